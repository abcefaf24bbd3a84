//! Handing the driver a module's entries as the store keeps them, checked beside it.
//!
//! nvcc's `--compress-mode=size` leaves each entry one zstd frame and the driver (550 and
//! later) decodes it at module load. A store's codec-1 blob is exactly such a frame (no
//! dictionary, its content size in its header: cubin-store's FORMAT.md), so on a driver that
//! decodes them the runtime need not decode first: it registers a container of the stored
//! frames, flagged as nvcc flags its compressed entries, and has cudart load the module at
//! once (a lookup of the function whose use asked for the load, as the launch itself would).
//! While the driver decodes, a second thread decodes the same entries and checks each against
//! the store's digests ([`Plan::build`], what the runtime's own path runs). Only when both are
//! done does the load return, so no kernel of the module runs before its code is checked: a
//! mismatch unregisters the module and fails closed with the error the runtime's own path
//! gives. A first launch then costs about what size mode's does, the check off its critical
//! path.
//!
//! Whether the driver decodes them is found out, not guessed from its version: the first
//! module handed over is the probe. A refusal (any error from the load) unregisters it, clears
//! cudart's error (it is not the program's; an error the program had not read yet keeps the
//! module on the runtime's own path), registers the container the checking thread decoded,
//! and leaves every later module of the process to the runtime's own path.
//! `FATPACK_DECODE=runtime` keeps every module there.

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicU8, Ordering};

#[allow(unused_imports)]
use crate::prelude::*;

use super::{fail, register, LoadError, Loaded, Outcome, Plan};
use crate::rt::container::Aligned;
use crate::rt::image::Image;
use crate::rt::sys::{now_us, Millis, Thread};
use crate::rt::{abi, lock, FatbinWrapper, Handle, Inner, Reg, CUDART_LOCK, WRAPPER_MAGIC};

/// What the driver did with the stored frames in this process: not asked yet, took them, or
/// refused the first module it was given (then never asked again).
static DRIVER: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const TAKES: u8 = 1;
const REFUSES: u8 = 2;

pub(super) enum Handoff {
    /// Not for this module (the runtime decodes it).
    NotTried,
    /// Loaded from the stored frames, or failed closed.
    Done(Outcome),
    /// The driver refused the frames: the module as the checking thread decoded it (and the
    /// bytes decoded), for the runtime's own registration.
    Refused(Aligned, u64),
}

/// What [`Plan::build`] reads on the checking thread, and what it gives back.
struct Check {
    plan: *const Plan,
    image: *const Image,
    caps: *const [u32],
    /// The stored bytes as copied into the container the driver is handed.
    given: *const [&'static [u8]],
    out: Option<Result<Aligned, String>>,
    bytes: u64,
}

extern "C" fn check_beside(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the boxed `Check` of `hand_to_driver`, which touches it again only after
    // joining this thread; the plan, image and capabilities it points to outlive the join.
    let c = unsafe { &mut *p.cast::<Check>() };
    // SAFETY: as above; all three are only read, here and on the calling thread.
    let (plan, image, caps, given) = unsafe { (&*c.plan, &*c.image, &*c.caps, &*c.given) };
    let mut bytes = 0;
    c.out = Some(plan.build(image, caps, Some(given), &mut bytes));
    c.bytes = bytes;
    core::ptr::null_mut()
}

/// Hands the driver `main`'s chosen entries as stored, where that can be done: the load was
/// asked for by a use of one of the module's functions (`first_use`), the driver has not
/// refused before, the program has no unread cudart error, and every chosen entry is stored
/// as one plain zstd frame or raw.
pub(super) fn hand_to_driver(
    inner: &Inner,
    name: &str,
    main: &Plan,
    image: &'static Image,
    caps: &[u32],
    first_use: *const c_void,
) -> Handoff {
    let fun = first_use.cast::<c_char>();
    let by_function = inner
        .regs
        .iter()
        .any(|r| matches!(*r, Reg::Function { host_fun, .. } if host_fun == fun));
    if !by_function
        || DRIVER.load(Ordering::Acquire) == REFUSES
        || crate::rt::log::env(fatpack_format::link::ENV_DECODE) == Some(b"runtime")
        || abi::pending_error() != 0
    {
        return Handoff::NotTried;
    }
    let t0 = now_us();
    let (buf, ranges) = match main.handoff(image, caps) {
        Ok(Some(b)) => b,
        Ok(None) => return Handoff::NotTried,
        Err(e) => return Handoff::Done(fail(LoadError::Module(e))),
    };
    let stored: usize = ranges.iter().map(|r| r.len()).sum();
    // The check reads the frames where the driver reads them, in memory of the runtime's own:
    // a store file rewritten in place meanwhile changes neither.
    // SAFETY: `buf` is not written again, and outlives the thread (joined below) and the
    // registration (kept in `Loaded`, or left to cudart).
    let whole: &'static [u8] = unsafe { core::slice::from_raw_parts(buf.as_ptr(), buf.len()) };
    let given: Vec<&'static [u8]> = ranges.iter().map(|r| &whole[r.clone()]).collect();
    let mut check = Box::new(Check {
        plan: main,
        image,
        caps,
        given: &given[..],
        out: None,
        bytes: 0,
    });
    let arg: *mut Check = &mut *check;
    // SAFETY: the thread is joined below, before `check`, `main`, `image` or `caps` can go.
    let Some(thread) = (unsafe { Thread::spawn(check_beside, arg.cast()) }) else {
        return Handoff::NotTried;
    };
    let mut wrapper = Box::new(FatbinWrapper {
        magic: WRAPPER_MAGIC,
        version: 1,
        data: buf.as_ptr().cast(),
        filename_or_fatbins: core::ptr::null_mut(),
    });
    // SAFETY: the wrapper and the container live in `Loaded`, or are left to cudart when the
    // module is withdrawn.
    let handle = unsafe { register(&mut wrapper, inner) };
    let t_load = now_us();
    // SAFETY: `fun` is one of this module's host stubs, registered just above.
    let r = unsafe { abi::load_function(fun) };
    let t_join = now_us();
    thread.join();
    let t_end = now_us();
    let checked = check
        .out
        .take()
        .unwrap_or_else(|| Err(format!("module \"{name}\": its check did not run")));
    let decoded = match checked {
        Ok(d) => d,
        Err(e) => {
            // Fail closed: the driver may hold the module, but none of its kernels has run
            // (this load holds the module's lock) and none will.
            withdraw(handle, r, buf, wrapper);
            return Handoff::Done(fail(LoadError::Module(e)));
        }
    };
    if r != 0 {
        withdraw(handle, r, buf, wrapper);
        // Only the first module decides: a later refusal is that module's alone.
        let _ = DRIVER.compare_exchange(UNKNOWN, REFUSES, Ordering::AcqRel, Ordering::Acquire);
        info!(
            "module {name}: the driver refused its entries as stored (cudaError {r}); \
             decoded here"
        );
        return Handoff::Refused(decoded, check.bytes);
    }
    DRIVER.store(TAKES, Ordering::Release);
    drop(decoded);
    info!(
        "module {name}: the driver took {} bytes as stored ({} decoded beside it) in {} ms \
         (set-up {}, cudart and the driver {}, the check's remainder {})",
        stored,
        check.bytes,
        Millis(t_end - t0),
        Millis(t_load - t0),
        Millis(t_join - t_load),
        Millis(t_end - t_join)
    );
    Handoff::Done(Outcome::Loaded(Loaded {
        handle,
        _wrapper: wrapper,
        _main: buf,
        _prelinked: Vec::new(),
        _array: Vec::new(),
    }))
}

/// Takes back a module the driver was handed: unregistered, cudart's error for it read (it is
/// not the program's), its memory left to cudart as [`crate::rt::Module`]'s unregister leaves it.
fn withdraw(handle: Handle, r: crate::rt::CudaError, buf: Aligned, wrapper: Box<FatbinWrapper>) {
    {
        let _c = lock(&CUDART_LOCK);
        // SAFETY: `handle` came from the real __cudaRegisterFatBinary.
        unsafe { abi::real_unregister(handle) };
    }
    if r != 0 {
        abi::clear_error();
    }
    core::mem::forget(buf);
    core::mem::forget(wrapper);
}
