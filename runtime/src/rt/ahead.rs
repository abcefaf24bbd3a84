//! Decoding ahead: a module's code decoded and checked before its first use asks for it.
//!
//! The first launch of a module otherwise pays for decoding (the runtime's own path) or for
//! the driver decoding (the handoff). Every program makes a CUDA call that needs the driver
//! before its first kernel (it picks a device, allocates, copies), and the first such call
//! initialises the driver and creates the device's context: a hundred milliseconds and more.
//! As that call starts ([`hint`], from the wrapped calls at the end of this file) one helper thread starts
//! too. It asks the driver for the devices itself (`cuInit` returns once the call beside it
//! has initialised the driver), then decodes the modules not yet loaded, in registration
//! order, each exactly as its load would ([`Plan::build`]: the store's digests checked),
//! until `FATPACK_AHEAD` MiB of decoded code (default 32; 0: none), while the program's call
//! is still creating its context. The runtime never initialises the driver on its own: only
//! beside a call of the program's that does. A load then takes the decoded container if it
//! is ready, waits for it if the helper is on that module, and otherwise claims the module
//! and decodes it itself as before. A check that fails ahead is not reported ahead: the load
//! runs its own path and fails closed there, with the same message.
//!
//! Costs, and why they are bounded: one thread per runtime copy, for as long as its list
//! takes; memory for containers decoded but not used yet (at most the budget; a used one is
//! what cudart would hold anyway). Fork: the helper never takes a lock an application thread
//! needs (modules are handed over through one atomic word each; the store, the list and the
//! driver's entry points are found on the application's thread before it starts, so it
//! neither maps, locks nor loads a library); a child of a fork treats a module the parent's
//! helper was on as not started. Unloading: the first unregistration (a library's
//! destructors, or the process exiting) stops the helper and joins it, so no thread runs the
//! runtime's code after its library is gone.

#![allow(non_snake_case)]

use core::ffi::{c_int, c_uint, c_void};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

#[allow(unused_imports)]
use crate::prelude::*;

use super::abi::Stream;
use super::container::Aligned;
use super::image::Image;
use super::load::{forced_arch, Plan};
use super::sys::{self, Mutex, Thread};
use super::{driver, image, lock, CudaError, Module};
use fatpack_format::arch::EntryId;

/// A module's place in decoding ahead.
pub(crate) struct Slot {
    state: AtomicU32,
    /// Written by the helper before `state` becomes READY; taken by the load after.
    ready: core::cell::UnsafeCell<Option<Decoded>>,
}

/// Nobody has started on the module.
const IDLE: u32 = 0;
/// The helper is decoding it.
const BUSY: u32 = 1;
/// Decoded and checked, waiting in `ready`.
const READY: u32 = 2;
/// Its load has claimed it (or the helper could not decode it): the helper leaves it alone.
const DONE: u32 = 3;

/// A container decoded ahead: the chosen entries it holds (the load checks that it would
/// have chosen the same) and the bytes decoded.
pub(crate) struct Decoded {
    pub buf: Aligned,
    pub chosen: Vec<usize>,
    pub bytes: u64,
}

// SAFETY: `ready` is written only by the thread that moved `state` to BUSY, before it moves
// it to READY (release), and read only by the thread that moves it from READY to DONE
// (after an acquire load): never two threads at once.
unsafe impl Sync for Slot {}

impl Slot {
    pub(crate) const fn new() -> Slot {
        Slot {
            state: AtomicU32::new(IDLE),
            ready: core::cell::UnsafeCell::new(None),
        }
    }

    /// For the module's load (which holds the module's lock, so one at a time): what the
    /// helper decoded for it, after waiting while the helper is on it; None (and the helper
    /// kept away) when it has not started on it.
    pub(crate) fn take(&self) -> Option<Decoded> {
        loop {
            match self.state.load(Ordering::Acquire) {
                IDLE => {
                    if self
                        .state
                        .compare_exchange(IDLE, DONE, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        return None;
                    }
                }
                BUSY if HELPER_PID.load(Ordering::Acquire) != sys::pid() => {
                    // Forked while the parent's helper was on it: no helper here.
                    self.state.store(DONE, Ordering::Release);
                    return None;
                }
                BUSY => sys::wait_while(&self.state, BUSY),
                READY => {
                    self.state.store(DONE, Ordering::Release);
                    // SAFETY: READY was acquired above and DONE is ours now (see `Sync`).
                    return unsafe { (*self.ready.get()).take() };
                }
                _ => return None,
            }
        }
    }

    /// For a module unregistered before any load: nothing to decode.
    pub(crate) fn retire(&self) {
        let _ = self
            .state
            .compare_exchange(IDLE, DONE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Decodes the module's container with `f` if nobody has started on it.
    fn decode_with(&self, f: impl FnOnce() -> Option<Decoded>) {
        if self
            .state
            .compare_exchange(IDLE, BUSY, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let d = f();
        let next = if d.is_some() { READY } else { DONE };
        // SAFETY: BUSY is ours (see `Sync`).
        unsafe { *self.ready.get() = d };
        self.state.store(next, Ordering::Release);
        sys::wake_all(&self.state);
    }
}

/// Whether the first hint has come (the fast path of every wrapped call).
static HINTED: AtomicBool = AtomicBool::new(false);
/// Set by the first unregistration: the helper stops after the module it is on.
static STOP: AtomicBool = AtomicBool::new(false);
/// The process the helper runs in (0: none started).
static HELPER_PID: AtomicI32 = AtomicI32::new(0);
/// The helper, until it is joined.
static HELPER: Mutex<Option<Thread>> = Mutex::new(None);

/// What the helper works through.
struct Job {
    modules: Vec<&'static Module>,
    image: &'static Image,
    /// The driver's entry points, to read the devices with.
    api: driver::Api,
    forced: Option<EntryId>,
    budget: u64,
}

/// A wrapped call that needs the driver is about to run: start decoding ahead, once.
pub(crate) fn hint() {
    if HINTED.load(Ordering::Relaxed) || super::IN_LOAD.get() != 0 {
        return;
    }
    if HINTED.swap(true, Ordering::AcqRel) {
        return;
    }
    if let Some(job) = job() {
        start(job);
    }
}

/// The budget in bytes: `FATPACK_AHEAD` MiB, else the default.
fn budget() -> u64 {
    let mib = super::log::env(fatpack_format::link::ENV_AHEAD)
        .and_then(|v| core::str::from_utf8(v).ok())
        .and_then(|v| v.trim_ascii().parse::<u64>().ok())
        .unwrap_or(fatpack_format::link::AHEAD_DEFAULT_MIB);
    mib.saturating_mul(1 << 20)
}

/// The helper's list, with everything it needs found on this (the application's) thread:
/// the one-time set-up (the store, a split binary's installed packs, the driver's library)
/// is never left half-done in a fork's child. Only the devices are read on the helper, once
/// the driver is initialised.
fn job() -> Option<Job> {
    let budget = budget();
    if budget == 0 || STOP.load(Ordering::Acquire) || super::NOT_LOADED.load(Ordering::Acquire) == 0
    {
        return None;
    }
    let forced = forced_arch().ok()?;
    let image = image::get().ok()?;
    image.map_installed_packs();
    let api = driver::Api::open().ok()?;
    let modules = super::pending_in_order();
    if modules.is_empty() {
        return None;
    }
    debug!(
        "decoding ahead: {} modules pending, up to {} MiB",
        modules.len(),
        budget >> 20
    );
    Some(Job {
        modules,
        image,
        api,
        forced,
        budget,
    })
}

fn start(job: Job) {
    let mut slot = lock(&HELPER);
    if STOP.load(Ordering::Acquire) {
        return;
    }
    let arg = Box::into_raw(Box::new(job));
    HELPER_PID.store(sys::pid(), Ordering::Release);
    // SAFETY: the helper owns the boxed job; it is joined (in `stop`) before the runtime's
    // code can go away.
    match unsafe { Thread::spawn(helper, arg.cast()) } {
        Some(t) => *slot = Some(t),
        None => {
            HELPER_PID.store(0, Ordering::Release);
            // SAFETY: no thread took it.
            drop(unsafe { Box::from_raw(arg) });
        }
    }
}

/// Stops the helper after the module it is on and waits for it: at the first unregistration,
/// before a library's code (this runtime copy) can be unmapped.
pub(crate) fn stop() {
    STOP.store(true, Ordering::Release);
    let t = lock(&HELPER).take();
    if let Some(t) = t {
        // A fork's child has the parent's handle but not its thread.
        if HELPER_PID.load(Ordering::Acquire) == sys::pid() {
            t.join();
        }
    }
}

extern "C" fn helper(arg: *mut c_void) -> *mut c_void {
    // SAFETY: `start` handed this thread the boxed job, and nothing else holds it.
    let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
    let t0 = sys::now_us();
    // Waits in cuInit while the program's call initialises the driver.
    // No device, or no driver: nothing to decode for (each load says why, as before).
    let caps = match job.api.devices() {
        Ok(d) if !d.is_empty() => driver::distinct_caps(&d),
        _ => return core::ptr::null_mut(),
    };
    debug!(
        "decoding ahead: devices read in {} ms",
        sys::Millis(sys::now_us() - t0)
    );
    let (mut spent, mut count) = (0u64, 0usize);
    for m in &job.modules {
        if STOP.load(Ordering::Acquire) {
            break;
        }
        m.ahead.decode_with(|| {
            let d = decode(m, &job, &caps, spent)?;
            spent += d.bytes;
            count += 1;
            Some(d)
        });
    }
    debug!(
        "decoding ahead: {count} modules, {spent} bytes, in {} ms",
        sys::Millis(sys::now_us() - t0)
    );
    core::ptr::null_mut()
}

/// One module's container as its load would build it, if it fits the budget and needs
/// nothing the helper must not do: a device-linked module that some device would JIT-link
/// (its prelinked containers), or entries in a pack not mapped yet (its one-time set-up), are
/// left to the load.
fn decode(m: &Module, job: &Job, caps: &[u32], spent: u64) -> Option<Decoded> {
    let name = *m.name.as_ref().ok()?;
    let plan = Plan::new(
        &job.image.store,
        &job.image.origin,
        name,
        caps,
        job.forced.as_ref(),
    )
    .ok()?;
    // SAFETY: the wrapper is nvcc's static data, as registered.
    let w = unsafe { &*m.wrapper };
    let device_linked = w.version == 2 && !w.filename_or_fatbins.is_null();
    if device_linked && caps.iter().any(|&c| !plan.is_sass(c)) {
        return None;
    }
    let chosen = plan.chosen(caps);
    let size: u64 = chosen.iter().map(|&i| plan.raw_len(i)).sum();
    if chosen.is_empty()
        || spent.saturating_add(size) > job.budget
        || !chosen.iter().all(|&i| plan.mapped(job.image, i))
    {
        return None;
    }
    let mut bytes = 0;
    let buf = plan.build(job.image, caps, None, &mut bytes).ok()?;
    Some(Decoded { buf, chosen, bytes })
}

// ---------------------------------------------------------------------------------------------
// The program's calls that start it: wrapped (`--wrap`) as abi.rs wraps the others.

/// Defines `__wrap_X` telling decoding ahead that the driver is being used, then
/// calling `__real_X`: calls a program makes before its first kernel, the first of which
/// initialises the driver.
macro_rules! wrap_hint {
    ($wrap:ident => $real:ident ($($a:ident: $t:ty),* $(,)?)) => {
        extern "C" {
            fn $real($($a: $t),*) -> CudaError;
        }

        #[no_mangle]
        pub unsafe extern "C" fn $wrap($($a: $t),*) -> CudaError {
            // Before the call: the helper reads the devices once this call has initialised
            // the driver, and decodes while the call creates its context.
            hint();
            // SAFETY: forwarded unchanged to the function this wraps.
            unsafe { $real($($a),*) }
        }
    };
}

wrap_hint!(__wrap_cudaGetDeviceCount => __real_cudaGetDeviceCount(count: *mut c_int));
wrap_hint!(__wrap_cudaSetDevice => __real_cudaSetDevice(device: c_int));
wrap_hint!(__wrap_cudaInitDevice => __real_cudaInitDevice(
    device: c_int, device_flags: c_uint, flags: c_uint));
wrap_hint!(__wrap_cudaMalloc => __real_cudaMalloc(p: *mut *mut c_void, size: usize));
wrap_hint!(__wrap_cudaMallocHost => __real_cudaMallocHost(p: *mut *mut c_void, size: usize));
wrap_hint!(__wrap_cudaHostAlloc => __real_cudaHostAlloc(
    p: *mut *mut c_void, size: usize, flags: c_uint));
wrap_hint!(__wrap_cudaMallocManaged => __real_cudaMallocManaged(
    p: *mut *mut c_void, size: usize, flags: c_uint));
wrap_hint!(__wrap_cudaMallocAsync => __real_cudaMallocAsync(
    p: *mut *mut c_void, size: usize, stream: Stream));
wrap_hint!(__wrap_cudaMallocAsync_ptsz => __real_cudaMallocAsync_ptsz(
    p: *mut *mut c_void, size: usize, stream: Stream));
wrap_hint!(__wrap_cudaFree => __real_cudaFree(p: *mut c_void));
wrap_hint!(__wrap_cudaStreamCreate => __real_cudaStreamCreate(stream: *mut Stream));
wrap_hint!(__wrap_cudaStreamCreateWithFlags => __real_cudaStreamCreateWithFlags(
    stream: *mut Stream, flags: c_uint));
wrap_hint!(__wrap_cudaDeviceSynchronize => __real_cudaDeviceSynchronize());
wrap_hint!(__wrap_cudaMemcpy => __real_cudaMemcpy(
    dst: *mut c_void, src: *const c_void, count: usize, kind: c_int));
wrap_hint!(__wrap_cudaMemcpy_ptds => __real_cudaMemcpy_ptds(
    dst: *mut c_void, src: *const c_void, count: usize, kind: c_int));
wrap_hint!(__wrap_cudaMemcpyAsync => __real_cudaMemcpyAsync(
    dst: *mut c_void, src: *const c_void, count: usize, kind: c_int, stream: Stream));
wrap_hint!(__wrap_cudaMemcpyAsync_ptsz => __real_cudaMemcpyAsync_ptsz(
    dst: *mut c_void, src: *const c_void, count: usize, kind: c_int, stream: Stream));
