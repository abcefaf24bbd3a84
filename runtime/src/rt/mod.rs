//! The interposed runtime: pending modules, their recorded registrations, lazy loading.
//!
//! Locks: `REGISTRY` (rw, maps only) is never held while taking a module lock; a module lock
//! may be held while taking `CUDART_LOCK`. So the order is module -> CUDART_LOCK, and no
//! cycle exists.

#[macro_use]
pub(crate) mod log;
mod abi;
mod ahead;
mod container;
mod driver;
mod hash;
mod image;
mod load;
pub(crate) mod sys;

use alloc::collections::BTreeMap;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::prelude::*;
use sys::{Mutex, MutexGuard, ReadGuard, RwLock, ThreadWord, WriteGuard};

use fatpack_format::stub;

pub(crate) type CudaError = c_int;
pub(crate) type Handle = *mut *mut c_void;

pub(crate) const CUDA_ERROR_INVALID_KERNEL_IMAGE: CudaError = 200;
pub(crate) const CUDA_ERROR_NO_KERNEL_IMAGE_FOR_DEVICE: CudaError = 209;

/// `__fatBinC_Wrapper_t` (fatbinary_section.h), in `.nvFatBinSegment`.
#[repr(C)]
pub(crate) struct FatbinWrapper {
    pub magic: c_int,
    pub version: c_int,
    pub data: *const u64,
    /// Version 2 (device link): NULL-terminated array of the prelinked `__nv_relfatbin`s.
    pub filename_or_fatbins: *mut c_void,
}

/// The magic as the C struct types it.
pub(crate) const WRAPPER_MAGIC: c_int = fatpack_format::fatbin::WRAPPER_MAGIC as c_int;

/// One recorded registration; the pointers are static data of the binary, so keeping them
/// is what cudart itself does.
#[derive(Clone, Copy)]
pub(crate) enum Reg {
    Function {
        host_fun: *const c_char,
        device_fun: *mut c_char,
        device_name: *const c_char,
        thread_limit: c_int,
        tid: *mut c_void,
        bid: *mut c_void,
        bdim: *mut c_void,
        gdim: *mut c_void,
        wsize: *mut c_int,
    },
    Var {
        host_var: *mut c_char,
        device_address: *mut c_char,
        device_name: *const c_char,
        ext: c_int,
        size: usize,
        constant: c_int,
        global: c_int,
    },
    ManagedVar {
        host_var_ptr: *mut *mut c_void,
        device_address: *mut c_char,
        device_name: *const c_char,
        ext: c_int,
        size: usize,
        constant: c_int,
        global: c_int,
    },
}

impl Reg {
    /// The host address that later API calls name this entity by.
    fn key(&self) -> usize {
        match *self {
            Reg::Function { host_fun, .. } => host_fun as usize,
            Reg::Var { host_var, .. } => host_var as usize,
            Reg::ManagedVar { host_var_ptr, .. } => host_var_ptr as usize,
        }
    }
}

pub(crate) enum State {
    Pending,
    Loaded(load::Loaded),
    /// Sticky: the error was reported once; every later use returns the same code.
    Failed(CudaError),
    Unregistered,
}

pub(crate) struct Inner {
    pub regs: Vec<Reg>,
    pub ended: bool,
    pub state: State,
}

/// A fatbin registration whose data was a fatpack stub. Leaked: its address is the fake
/// handle the nvcc stub code keeps, so it must stay put for the life of the binary.
pub(crate) struct Module {
    /// Store module name, or why the stub could not be read.
    pub name: Result<&'static str, String>,
    pub wrapper: *const FatbinWrapper,
    loaded: AtomicBool,
    inner: Mutex<Inner>,
    /// Its container, when decoded ahead of its first use.
    ahead: ahead::Slot,
}

// SAFETY: the raw pointers are addresses of static data in the binary (wrapper, strings,
// host stubs), immutable and valid for as long as this runtime copy is mapped.
unsafe impl Send for Module {}
// SAFETY: as for Send; the mutable state is behind the Mutex and the AtomicBool.
unsafe impl Sync for Module {}

struct Registry {
    /// Fake handle -> module.
    handles: BTreeMap<usize, &'static Module>,
    /// Host function / variable address -> module that registered it.
    hosts: BTreeMap<usize, &'static Module>,
    /// Every module, in the order of registration (the order decoding ahead takes them in).
    order: Vec<&'static Module>,
}

static REGISTRY: RwLock<Registry> = RwLock::new(Registry {
    handles: BTreeMap::new(),
    hosts: BTreeMap::new(),
    order: Vec::new(),
});

/// Modules neither loaded nor unregistered (failed ones included): when 0, API calls skip
/// the lookup entirely.
static NOT_LOADED: AtomicUsize = AtomicUsize::new(0);

/// Serialises this copy's calls into cudart's registration entry points.
pub(crate) static CUDART_LOCK: Mutex<()> = Mutex::new(());

/// Non-zero while this thread loads a module: a wrapped call made from inside cudart during
/// registration must not try to load (and re-lock) again.
static IN_LOAD: ThreadWord = ThreadWord::new();
/// The last host address this thread found ready (loaded, or not ours): launch loops then
/// skip the shared lock. Modules are never unloaded while the copy is mapped, so a stale
/// entry can only be "ready", never wrong.
static LAST_READY: ThreadWord = ThreadWord::new();

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

fn registry_read() -> ReadGuard<'static, Registry> {
    REGISTRY.read()
}

fn registry_write() -> WriteGuard<'static, Registry> {
    REGISTRY.write()
}

/// If `fat` is a wrapper whose data is a fatpack stub: the stub's module name (or why it is
/// unreadable). None means "not ours, forward to cudart".
///
/// # Safety
/// `fat` must be null or what nvcc passes to `__cudaRegisterFatBinary`.
unsafe fn stub_of(fat: *const FatbinWrapper) -> Option<Result<&'static str, String>> {
    if fat.is_null() {
        return None;
    }
    // SAFETY: a non-null wrapper pointer from registration code points at a wrapper.
    let w = unsafe { &*fat };
    if w.magic != WRAPPER_MAGIC || w.data.is_null() {
        return None;
    }
    // SAFETY: a wrapper's data points at its container (or, after packing, a stub).
    unsafe { stub_at(w.data.cast()) }
}

/// Reads a stub at `p` if it starts with the stub magic.
///
/// # Safety
/// `p` must point at a fatbin container or a stub (both at least 16 readable bytes).
pub(crate) unsafe fn stub_at(p: *const u8) -> Option<Result<&'static str, String>> {
    // SAFETY: both fatbin containers and stubs start with a 16-byte header.
    let head: &[u8; stub::STUB_HEADER_LEN] = unsafe { &*p.cast() };
    if !stub::is_stub(head) {
        return None;
    }
    let h = match stub::parse_header(head) {
        Ok(h) => h,
        Err(e) => return Some(Err(e.to_string())),
    };
    // SAFETY: the stub header says this many name bytes follow it in the same section.
    let name = unsafe { core::slice::from_raw_parts(p.add(h.header_len), h.name_len) };
    Some(core::str::from_utf8(name).map_err(|_| "fatpack stub module name is not UTF-8".into()))
}

fn register_module(
    wrapper: *const FatbinWrapper,
    name: Result<&'static str, String>,
) -> &'static Module {
    let m: &'static Module = Box::leak(Box::new(Module {
        name,
        wrapper,
        loaded: AtomicBool::new(false),
        inner: Mutex::new(Inner {
            regs: Vec::new(),
            ended: false,
            state: State::Pending,
        }),
        ahead: ahead::Slot::new(),
    }));
    match &m.name {
        Ok(n) => debug!("module {n}: registration recorded (loads at first use)"),
        Err(e) => error!("unreadable fatpack stub: {e}"),
    }
    NOT_LOADED.fetch_add(1, Ordering::AcqRel);
    // A store in a file is opened now, while the file is the one this image came from.
    image::prepare();
    let mut r = registry_write();
    r.handles.insert(m as *const Module as usize, m);
    r.order.push(m);
    m
}

/// The modules not loaded yet, in the order they registered.
fn pending_in_order() -> Vec<&'static Module> {
    let r = registry_read();
    r.order
        .iter()
        .copied()
        .filter(|m| !m.loaded.load(Ordering::Acquire))
        .collect()
}

/// The module behind a fake handle; None for cudart's own handles.
fn fake(h: Handle) -> Option<&'static Module> {
    if h.is_null() {
        return None;
    }
    registry_read().handles.get(&(h as usize)).copied()
}

/// Loads the module that registered host address `p`, if it is one of ours and not loaded.
/// Err is the cudaError the API call must return instead of cudart's.
pub(crate) fn ensure_host(p: *const c_void) -> Result<(), CudaError> {
    if p.is_null() || NOT_LOADED.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let key = p as usize;
    if LAST_READY.get() == key || IN_LOAD.get() != 0 {
        return Ok(());
    }
    let m = registry_read().hosts.get(&key).copied();
    let ready = match m {
        Some(m) => {
            m.ensure(p)?;
            m.loaded.load(Ordering::Acquire)
        }
        None => true,
    };
    if ready {
        LAST_READY.set(key);
    }
    Ok(())
}

impl Module {
    fn record(&'static self, reg: Reg) {
        let mut g = lock(&self.inner);
        if let State::Loaded(l) = &g.state {
            // Registration after an early load (never seen from nvcc code): pass it on.
            let h = l.handle;
            let _c = lock(&CUDART_LOCK);
            // SAFETY: h is cudart's handle for this module; reg holds nvcc's arguments.
            unsafe { abi::replay(h, &reg) };
            return;
        }
        g.regs.push(reg);
        drop(g);
        registry_write().hosts.insert(reg.key(), self);
    }

    fn end(&'static self) {
        let mut g = lock(&self.inner);
        g.ended = true;
        if let State::Loaded(l) = &g.state {
            let h = l.handle;
            let _c = lock(&CUDART_LOCK);
            // SAFETY: h is cudart's handle for this module.
            unsafe { abi::real_register_end(h) };
        }
        drop(g);
        if matches!(log::env(fatpack_format::link::ENV_EAGER), Some(b"1")) {
            let _ = self.ensure(core::ptr::null());
        }
    }

    fn unregister(&'static self) {
        // Before this runtime copy can be unmapped (a library's destructors run this).
        ahead::stop();
        self.ahead.retire();
        let mut g = lock(&self.inner);
        match core::mem::replace(&mut g.state, State::Unregistered) {
            State::Loaded(l) => {
                let _c = lock(&CUDART_LOCK);
                // SAFETY: l.handle came from the real __cudaRegisterFatBinary.
                unsafe { abi::real_unregister(l.handle) };
                // The container stays allocated: cudart is not documented to drop every
                // reference at unregister, and the process is usually exiting anyway.
                core::mem::forget(l);
            }
            State::Pending | State::Failed(_) => {
                NOT_LOADED.fetch_sub(1, Ordering::AcqRel);
            }
            State::Unregistered => {}
        }
    }

    /// Loads the module once; later calls return the cached outcome. `first_use`: the host
    /// address whose use asks for the load (null when none, as in eager mode).
    pub(crate) fn ensure(&'static self, first_use: *const c_void) -> Result<(), CudaError> {
        if self.loaded.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut g = lock(&self.inner);
        match g.state {
            State::Loaded(_) | State::Unregistered => return Ok(()),
            State::Failed(e) => return Err(e),
            State::Pending => {}
        }
        IN_LOAD.set(1);
        let outcome = load::load(self, &g, first_use);
        IN_LOAD.set(0);
        match outcome {
            load::Outcome::Loaded(l) => {
                g.state = State::Loaded(l);
                self.loaded.store(true, Ordering::Release);
                NOT_LOADED.fetch_sub(1, Ordering::AcqRel);
                Ok(())
            }
            // No driver or no device: cudart will report that itself; retry next time.
            load::Outcome::Deferred => Ok(()),
            load::Outcome::Failed(e) => {
                g.state = State::Failed(e.code());
                Err(e.code())
            }
        }
    }

    /// Debug log after `__cudaInitModule`: what cudart returned and the host pointers of the
    /// module's `__managed__` variables it should have filled in.
    fn log_managed(&self, ret: c_char) {
        let g = lock(&self.inner);
        for r in &g.regs {
            if let Reg::ManagedVar {
                host_var_ptr,
                device_name,
                ..
            } = *r
            {
                // SAFETY: nvcc's arguments: a pointer to the host pointer variable and a
                // NUL-terminated name, both static data of the binary.
                let (ptr, name) = unsafe {
                    (
                        *host_var_ptr,
                        core::ffi::CStr::from_ptr(device_name).to_string_lossy(),
                    )
                };
                debug!("__cudaInitModule returned {ret}; managed {name}: host pointer {ptr:p}");
            }
        }
    }

    /// If some `__managed__` host pointer of this loaded module is still NULL: a kernel and a
    /// variable of the module to look it up by, and its real handle.
    fn unfilled_managed(&self) -> Option<(Option<*const c_char>, Option<*mut c_char>, Handle)> {
        let g = lock(&self.inner);
        let State::Loaded(l) = &g.state else {
            return None;
        };
        let unset = g.regs.iter().any(|r| match *r {
            // SAFETY: nvcc's pointer to the host pointer variable, static data of the binary.
            Reg::ManagedVar { host_var_ptr, .. } => unsafe { (*host_var_ptr).is_null() },
            _ => false,
        });
        if !unset {
            return None;
        }
        let fun = g.regs.iter().find_map(|r| match *r {
            Reg::Function { host_fun, .. } => Some(host_fun),
            _ => None,
        });
        let var = g.regs.iter().find_map(|r| match *r {
            Reg::Var { host_var, .. } => Some(host_var),
            _ => None,
        });
        Some((fun, var, l.handle))
    }

    /// The module's name for messages.
    fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or("<unreadable stub>")
    }

    /// cudart's handle, once loaded.
    fn real_handle(&self) -> Option<Handle> {
        match &lock(&self.inner).state {
            State::Loaded(l) => Some(l.handle),
            _ => None,
        }
    }
}
