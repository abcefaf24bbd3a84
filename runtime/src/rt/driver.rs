//! Device capabilities from the driver API (libcuda.so.1 via dlopen, so a binary that never
//! uses the GPU never needs the driver).

use super::sys::Once;
#[allow(unused_imports)]
use crate::prelude::*;
use core::ffi::{c_int, c_uint, c_void, CStr};

use fatpack_format::select;

/// A device as the driver numbers it (CUDA_VISIBLE_DEVICES applied), with its capability.
#[derive(Clone, Copy)]
pub(crate) struct Device {
    pub ordinal: i32,
    /// `major * 10 + minor`.
    pub cap: u32,
}

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

type CuInit = unsafe extern "C" fn(c_uint) -> c_int;
type CuDeviceGetCount = unsafe extern "C" fn(*mut c_int) -> c_int;
type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type CuDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;

static DEVICES: Once<Result<Vec<Device>, String>> = Once::new();

/// Queried once per process (per runtime copy); the answer does not change while it runs.
pub(crate) fn devices() -> &'static Result<Vec<Device>, String> {
    DEVICES.get_or_init(|| {
        let r = query();
        match &r {
            Ok(d) => {
                let list: Vec<String> = d
                    .iter()
                    .map(|d| format!("{} (compute capability {})", d.ordinal, d.cap))
                    .collect();
                debug!("devices: {}", list.join(", "))
            }
            Err(e) => debug!("no devices: {e}"),
        }
        r
    })
}

/// The distinct compute capabilities of `devices`, in order: one choice of entries each.
pub(crate) fn distinct_caps(devices: &[Device]) -> Vec<u32> {
    let mut caps: Vec<u32> = devices.iter().map(|d| d.cap).collect();
    super::sys::sort_small(&mut caps);
    caps.dedup();
    caps
}

unsafe fn sym(lib: *mut c_void, name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: lib is a live dlopen handle.
    let p = unsafe { super::sys::dlsym(lib, name) };
    if p.is_null() {
        return Err(format!("libcuda.so.1 lacks {}", name.to_string_lossy()));
    }
    Ok(p)
}

fn query() -> Result<Vec<Device>, String> {
    Api::open()?.devices()
}

/// The four driver entry points the devices are read with, found in libcuda.so.1.
pub(crate) struct Api {
    init: CuInit,
    get_count: CuDeviceGetCount,
    get: CuDeviceGet,
    attr: CuDeviceGetAttribute,
}

impl Api {
    /// Loads libcuda.so.1 (never closed: cudart opens the same library and the handle is
    /// cheap) and finds the entry points; initialises nothing. Decoding ahead calls this on
    /// the application's thread, so the helper it starts never takes the dynamic loader's
    /// lock.
    pub(crate) fn open() -> Result<Api, String> {
        let lib = super::sys::dlopen(c"libcuda.so.1");
        if lib.is_null() {
            return Err(format!(
                "cannot load libcuda.so.1: {}",
                super::sys::dlerror()
            ));
        }
        // SAFETY: `lib` is live, and the symbols have these C signatures in every CUDA driver
        // (cuda.h); none of them is versioned (no _v2 variants).
        unsafe {
            Ok(Api {
                init: core::mem::transmute::<*mut c_void, CuInit>(sym(lib, c"cuInit")?),
                get_count: core::mem::transmute::<*mut c_void, CuDeviceGetCount>(sym(
                    lib,
                    c"cuDeviceGetCount",
                )?),
                get: core::mem::transmute::<*mut c_void, CuDeviceGet>(sym(lib, c"cuDeviceGet")?),
                attr: core::mem::transmute::<*mut c_void, CuDeviceGetAttribute>(sym(
                    lib,
                    c"cuDeviceGetAttribute",
                )?),
            })
        }
    }

    /// Every device and its capability. `cuInit` first: it returns at once once the driver
    /// is initialised, and while another thread initialises it, when that is done.
    pub(crate) fn devices(&self) -> Result<Vec<Device>, String> {
        // SAFETY: the entry points of `open`, called with valid out-pointers.
        unsafe {
            let r = (self.init)(0);
            if r != 0 {
                return Err(format!("cuInit failed (CUresult {r})"));
            }
            let mut n: c_int = 0;
            let r = (self.get_count)(&mut n);
            if r != 0 {
                return Err(format!("cuDeviceGetCount failed (CUresult {r})"));
            }
            let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
            for ordinal in 0..n {
                let mut dev: c_int = 0;
                let r = (self.get)(&mut dev, ordinal);
                if r != 0 {
                    return Err(format!("cuDeviceGet({ordinal}) failed (CUresult {r})"));
                }
                let (mut major, mut minor) = (0, 0);
                let r1 = (self.attr)(
                    &mut major,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    dev,
                );
                let r2 = (self.attr)(
                    &mut minor,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    dev,
                );
                if r1 != 0 || r2 != 0 {
                    return Err(format!(
                        "cuDeviceGetAttribute(compute capability) failed for device {ordinal}"
                    ));
                }
                let cap = select::capability(major, minor).ok_or_else(|| {
                    format!("device {ordinal} reports compute capability {major}.{minor}")
                })?;
                out.push(Device { ordinal, cap });
            }
            Ok(out)
        }
    }
}
