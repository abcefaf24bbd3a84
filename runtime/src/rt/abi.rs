//! The `__wrap_*` entry points and the `__real_*` (cudart) functions they call.
//!
//! Signatures follow CUDA 13.0's crt/host_runtime.h, crt/device_functions.h and
//! cuda_runtime_api.h. Arguments that are only passed through keep their C ABI shape: enums
//! are `int`, handles and structs behind pointers are `void*`, `dim3` is a by-value
//! `#[repr(C)]` struct (two registers on x86-64 SysV and AArch64, exactly as C passes it).
//! `__real_X` resolves to cudart's X only in the final `--wrap` link, which is why the
//! archive cannot link on its own.

#![allow(non_snake_case)]
#[allow(unused_imports)]
use crate::prelude::*;

use core::ffi::{c_char, c_int, c_uint, c_void};

use super::{ensure_host, fake, stub_of, CudaError, FatbinWrapper, Handle, Reg};

pub(crate) type Stream = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Dim3 {
    x: c_uint,
    y: c_uint,
    z: c_uint,
}

extern "C" {
    fn __real___cudaRegisterFatBinary(fat_cubin: *mut c_void) -> Handle;
    fn __real___cudaRegisterFatBinaryEnd(handle: Handle);
    fn __real___cudaUnregisterFatBinary(handle: Handle);
    fn __real___cudaRegisterFunction(
        handle: Handle,
        host_fun: *const c_char,
        device_fun: *mut c_char,
        device_name: *const c_char,
        thread_limit: c_int,
        tid: *mut c_void,
        bid: *mut c_void,
        bdim: *mut c_void,
        gdim: *mut c_void,
        wsize: *mut c_int,
    );
    fn __real___cudaRegisterVar(
        handle: Handle,
        host_var: *mut c_char,
        device_address: *mut c_char,
        device_name: *const c_char,
        ext: c_int,
        size: usize,
        constant: c_int,
        global: c_int,
    );
    fn __real___cudaRegisterManagedVar(
        handle: Handle,
        host_var_ptr_address: *mut *mut c_void,
        device_address: *mut c_char,
        device_name: *const c_char,
        ext: c_int,
        size: usize,
        constant: c_int,
        global: c_int,
    );
    fn __real___cudaInitModule(handle: Handle) -> c_char;
}

pub(crate) unsafe fn real_register(w: *mut FatbinWrapper) -> Handle {
    // SAFETY: w is a complete wrapper around a container that outlives the registration.
    unsafe { __real___cudaRegisterFatBinary(w.cast()) }
}

pub(crate) unsafe fn real_register_end(h: Handle) {
    // SAFETY: h is a real cudart handle.
    unsafe { __real___cudaRegisterFatBinaryEnd(h) }
}

pub(crate) unsafe fn real_unregister(h: Handle) {
    // SAFETY: h is a real cudart handle.
    unsafe { __real___cudaUnregisterFatBinary(h) }
}

/// Passes one recorded registration to cudart under its real handle.
pub(crate) unsafe fn replay(h: Handle, r: &Reg) {
    // SAFETY: the arguments are the ones nvcc's code passed; only the handle differs.
    unsafe {
        match *r {
            Reg::Function {
                host_fun,
                device_fun,
                device_name,
                thread_limit,
                tid,
                bid,
                bdim,
                gdim,
                wsize,
            } => __real___cudaRegisterFunction(
                h,
                host_fun,
                device_fun,
                device_name,
                thread_limit,
                tid,
                bid,
                bdim,
                gdim,
                wsize,
            ),
            Reg::Var {
                host_var,
                device_address,
                device_name,
                ext,
                size,
                constant,
                global,
            } => __real___cudaRegisterVar(
                h,
                host_var,
                device_address,
                device_name,
                ext,
                size,
                constant,
                global,
            ),
            Reg::ManagedVar {
                host_var_ptr,
                device_address,
                device_name,
                ext,
                size,
                constant,
                global,
            } => __real___cudaRegisterManagedVar(
                h,
                host_var_ptr,
                device_address,
                device_name,
                ext,
                size,
                constant,
                global,
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Registration (static constructors of the binary).

#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaRegisterFatBinary(fat_cubin: *mut c_void) -> Handle {
    let w = fat_cubin as *const FatbinWrapper;
    // SAFETY: fat_cubin is what nvcc's code passes: a wrapper (or something cudart judges).
    match unsafe { stub_of(w) } {
        Some(name) => super::register_module(w, name) as *const super::Module as Handle,
        // SAFETY: forwarding the caller's argument unchanged.
        None => unsafe { __real___cudaRegisterFatBinary(fat_cubin) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaRegisterFatBinaryEnd(handle: Handle) {
    match fake(handle) {
        Some(m) => m.end(),
        // SAFETY: a cudart handle, forwarded unchanged.
        None => unsafe { __real___cudaRegisterFatBinaryEnd(handle) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaUnregisterFatBinary(handle: Handle) {
    match fake(handle) {
        Some(m) => m.unregister(),
        // SAFETY: a cudart handle, forwarded unchanged.
        None => unsafe { __real___cudaUnregisterFatBinary(handle) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaRegisterFunction(
    handle: Handle,
    host_fun: *const c_char,
    device_fun: *mut c_char,
    device_name: *const c_char,
    thread_limit: c_int,
    tid: *mut c_void,
    bid: *mut c_void,
    bdim: *mut c_void,
    gdim: *mut c_void,
    wsize: *mut c_int,
) {
    let reg = Reg::Function {
        host_fun,
        device_fun,
        device_name,
        thread_limit,
        tid,
        bid,
        bdim,
        gdim,
        wsize,
    };
    match fake(handle) {
        Some(m) => m.record(reg),
        // SAFETY: forwarded unchanged.
        None => unsafe { replay(handle, &reg) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaRegisterVar(
    handle: Handle,
    host_var: *mut c_char,
    device_address: *mut c_char,
    device_name: *const c_char,
    ext: c_int,
    size: usize,
    constant: c_int,
    global: c_int,
) {
    let reg = Reg::Var {
        host_var,
        device_address,
        device_name,
        ext,
        size,
        constant,
        global,
    };
    match fake(handle) {
        Some(m) => m.record(reg),
        // SAFETY: forwarded unchanged.
        None => unsafe { replay(handle, &reg) },
    }
}

#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaRegisterManagedVar(
    handle: Handle,
    host_var_ptr_address: *mut *mut c_void,
    device_address: *mut c_char,
    device_name: *const c_char,
    ext: c_int,
    size: usize,
    constant: c_int,
    global: c_int,
) {
    let reg = Reg::ManagedVar {
        host_var_ptr: host_var_ptr_address,
        device_address,
        device_name,
        ext,
        size,
        constant,
        global,
    };
    match fake(handle) {
        Some(m) => m.record(reg),
        // SAFETY: forwarded unchanged.
        None => unsafe { replay(handle, &reg) },
    }
}

/// Host access to a `__managed__` variable calls this with the module's handle first.
#[no_mangle]
pub unsafe extern "C" fn __wrap___cudaInitModule(handle: Handle) -> c_char {
    match fake(handle) {
        Some(m) => {
            if m.ensure(core::ptr::null()).is_err() {
                return 0;
            }
            match m.real_handle() {
                Some(h) => {
                    // SAFETY: the real handle of this module.
                    let r = unsafe { __real___cudaInitModule(h) };
                    if super::log::level() >= super::log::DEBUG {
                        m.log_managed(r);
                    }
                    if r != 0 {
                        // SAFETY: the module is loaded; its recorded registrations are
                        // nvcc's static data.
                        unsafe { fill_managed(m) };
                    }
                    r
                }
                // Deferred (no driver/device): cudart could not initialise either.
                None => 0,
            }
        }
        // SAFETY: a cudart handle, forwarded unchanged.
        None => unsafe { __real___cudaInitModule(handle) },
    }
}

/// Static cudart (13.0) fills in the host pointer of a `__managed__` variable when it loads
/// the variable's module into a context. A module registered after the context exists (a
/// lazy load, whenever the program made any CUDA call before touching the variable; also
/// any library loaded late) is loaded into the context only when one of its kernels or
/// variables is looked up, and `__cudaInitModule` then returns 1 with the pointers still
/// NULL (seen on the H200: docs/RUNTIME.md), so the host access that follows dereferences
/// NULL. Shared cudart fills them in `__cudaInitModule` itself. So when a pointer is still
/// NULL, the module is looked up the way a launch would (one of its kernels, else one of
/// its variables), which loads it and fills the pointers, and `__cudaInitModule` is asked
/// again.
///
/// # Safety
/// `m` must be loaded; its registrations are nvcc's.
unsafe fn fill_managed(m: &super::Module) {
    let Some((fun, var, handle)) = m.unfilled_managed() else {
        return;
    };
    // SAFETY: nvcc's host stub / shadow addresses of this module, now registered with
    // cudart; the attribute buffer is larger than cudaFuncAttributes in any CUDA 13.
    unsafe {
        if let Some(f) = fun {
            let mut attrs = [0u64; 128];
            __real_cudaFuncGetAttributes(attrs.as_mut_ptr().cast(), f.cast());
        } else if let Some(v) = var {
            let mut size = 0usize;
            __real_cudaGetSymbolSize(&mut size, v.cast());
        }
        __real___cudaInitModule(handle);
    }
    if m.unfilled_managed().is_some() {
        warn!(
            "module {}: cudart left a __managed__ variable's host pointer unset",
            m.display_name()
        );
    } else {
        debug!(
            "module {}: managed host pointers filled by a lookup",
            m.display_name()
        );
    }
}

extern "C" {
    fn cudaPeekAtLastError() -> CudaError;
    fn cudaGetLastError() -> CudaError;
}

/// Has cudart this thread's module loaded that registered host function `f` (what a launch
/// would do first), and says what loading it returned.
///
/// # Safety
/// `f` must be a host stub registered with cudart under a real handle.
pub(crate) unsafe fn load_function(f: *const c_char) -> CudaError {
    let mut attrs = [0u64; 128];
    // SAFETY: as fill_managed: a registered host stub; the buffer is larger than
    // cudaFuncAttributes in any CUDA 13.
    unsafe { __real_cudaFuncGetAttributes(attrs.as_mut_ptr().cast(), f.cast()) }
}

/// The error cudart holds for this thread, unread.
pub(crate) fn pending_error() -> CudaError {
    // SAFETY: no arguments; reads cudart's per-thread state.
    unsafe { cudaPeekAtLastError() }
}

/// Reads (and so clears) the error cudart holds for this thread.
pub(crate) fn clear_error() {
    // SAFETY: as above.
    unsafe { cudaGetLastError() };
}

// ---------------------------------------------------------------------------------------------
// Calls naming a host function or variable: load its module, then forward.

/// Defines `__wrap_X` calling `__real_X` after loading the module `$key` belongs to. The
/// call is forwarded even when loading failed, so that cudart also records an error for
/// cudaGetLastError; the load error is what the caller gets back.
macro_rules! wrap_host {
    ($wrap:ident => $real:ident ($($a:ident: $t:ty),* $(,)?) key $key:expr) => {
        extern "C" {
            fn $real($($a: $t),*) -> CudaError;
        }

        #[no_mangle]
        pub unsafe extern "C" fn $wrap($($a: $t),*) -> CudaError {
            let pre = ensure_host($key);
            // SAFETY: forwarded unchanged to the function this wraps.
            let r = unsafe { $real($($a),*) };
            match pre {
                Ok(()) => r,
                Err(e) => e,
            }
        }
    };
}

/// `cudaKernelNodeParams{,V2}::func` (offset 0), null-safe.
unsafe fn kernel_params_func(p: *const c_void) -> *const c_void {
    if p.is_null() {
        return core::ptr::null();
    }
    // SAFETY: p points at a cudaKernelNodeParams, whose first member is `void* func`.
    unsafe { *p.cast::<*const c_void>() }
}

/// `cudaGraphNodeParams`: `int type` (cudaGraphNodeTypeKernel = 0), 12 reserved bytes, then
/// the union whose kernel member starts with `void* func` (offset 16).
unsafe fn node_params_func(p: *const c_void) -> *const c_void {
    if p.is_null() {
        return core::ptr::null();
    }
    // SAFETY: p points at a cudaGraphNodeParams (at least 16 + 8 bytes).
    unsafe {
        if *p.cast::<c_int>() != 0 {
            return core::ptr::null();
        }
        *p.cast::<u8>().add(16).cast::<*const c_void>()
    }
}

wrap_host!(__wrap___cudaGetKernel => __real___cudaGetKernel(
    kernel: *mut *mut c_void, fun: *const c_void) key fun);

wrap_host!(__wrap_cudaLaunchKernel => __real_cudaLaunchKernel(
    func: *const c_void, grid_dim: Dim3, block_dim: Dim3, args: *mut *mut c_void,
    shared_mem: usize, stream: Stream) key func);
wrap_host!(__wrap_cudaLaunchKernel_ptsz => __real_cudaLaunchKernel_ptsz(
    func: *const c_void, grid_dim: Dim3, block_dim: Dim3, args: *mut *mut c_void,
    shared_mem: usize, stream: Stream) key func);
wrap_host!(__wrap_cudaLaunchKernelExC => __real_cudaLaunchKernelExC(
    config: *const c_void, func: *const c_void, args: *mut *mut c_void) key func);
wrap_host!(__wrap_cudaLaunchKernelExC_ptsz => __real_cudaLaunchKernelExC_ptsz(
    config: *const c_void, func: *const c_void, args: *mut *mut c_void) key func);
wrap_host!(__wrap_cudaLaunchCooperativeKernel => __real_cudaLaunchCooperativeKernel(
    func: *const c_void, grid_dim: Dim3, block_dim: Dim3, args: *mut *mut c_void,
    shared_mem: usize, stream: Stream) key func);
wrap_host!(__wrap_cudaLaunchCooperativeKernel_ptsz => __real_cudaLaunchCooperativeKernel_ptsz(
    func: *const c_void, grid_dim: Dim3, block_dim: Dim3, args: *mut *mut c_void,
    shared_mem: usize, stream: Stream) key func);

wrap_host!(__wrap_cudaFuncSetAttribute => __real_cudaFuncSetAttribute(
    func: *const c_void, attr: c_int, value: c_int) key func);
wrap_host!(__wrap_cudaFuncGetAttributes => __real_cudaFuncGetAttributes(
    attr: *mut c_void, func: *const c_void) key func);
wrap_host!(__wrap_cudaFuncSetCacheConfig => __real_cudaFuncSetCacheConfig(
    func: *const c_void, cache_config: c_int) key func);
wrap_host!(__wrap_cudaFuncSetSharedMemConfig => __real_cudaFuncSetSharedMemConfig(
    func: *const c_void, config: c_int) key func);
wrap_host!(__wrap_cudaFuncGetName => __real_cudaFuncGetName(
    name: *mut *const c_char, func: *const c_void) key func);
wrap_host!(__wrap_cudaFuncGetParamInfo => __real_cudaFuncGetParamInfo(
    func: *const c_void, param_index: usize, param_offset: *mut usize, param_size: *mut usize)
    key func);
wrap_host!(__wrap_cudaGetKernel => __real_cudaGetKernel(
    kernel_ptr: *mut *mut c_void, entry_func_addr: *const c_void) key entry_func_addr);
wrap_host!(__wrap_cudaGetFuncBySymbol => __real_cudaGetFuncBySymbol(
    function_ptr: *mut *mut c_void, symbol_ptr: *const c_void) key symbol_ptr);

wrap_host!(__wrap_cudaOccupancyMaxActiveBlocksPerMultiprocessor =>
    __real_cudaOccupancyMaxActiveBlocksPerMultiprocessor(
    num_blocks: *mut c_int, func: *const c_void, block_size: c_int, dynamic_smem_size: usize)
    key func);
wrap_host!(__wrap_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags =>
    __real_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    num_blocks: *mut c_int, func: *const c_void, block_size: c_int, dynamic_smem_size: usize,
    flags: c_uint) key func);
wrap_host!(__wrap_cudaOccupancyAvailableDynamicSMemPerBlock =>
    __real_cudaOccupancyAvailableDynamicSMemPerBlock(
    dynamic_smem_size: *mut usize, func: *const c_void, num_blocks: c_int, block_size: c_int)
    key func);
wrap_host!(__wrap_cudaOccupancyMaxPotentialClusterSize =>
    __real_cudaOccupancyMaxPotentialClusterSize(
    cluster_size: *mut c_int, func: *const c_void, launch_config: *const c_void) key func);
wrap_host!(__wrap_cudaOccupancyMaxActiveClusters => __real_cudaOccupancyMaxActiveClusters(
    num_clusters: *mut c_int, func: *const c_void, launch_config: *const c_void) key func);

wrap_host!(__wrap_cudaMemcpyToSymbol => __real_cudaMemcpyToSymbol(
    symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int)
    key symbol);
wrap_host!(__wrap_cudaMemcpyToSymbol_ptds => __real_cudaMemcpyToSymbol_ptds(
    symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int)
    key symbol);
wrap_host!(__wrap_cudaMemcpyFromSymbol => __real_cudaMemcpyFromSymbol(
    dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int)
    key symbol);
wrap_host!(__wrap_cudaMemcpyFromSymbol_ptds => __real_cudaMemcpyFromSymbol_ptds(
    dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int)
    key symbol);
wrap_host!(__wrap_cudaMemcpyToSymbolAsync => __real_cudaMemcpyToSymbolAsync(
    symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int,
    stream: Stream) key symbol);
wrap_host!(__wrap_cudaMemcpyToSymbolAsync_ptsz => __real_cudaMemcpyToSymbolAsync_ptsz(
    symbol: *const c_void, src: *const c_void, count: usize, offset: usize, kind: c_int,
    stream: Stream) key symbol);
wrap_host!(__wrap_cudaMemcpyFromSymbolAsync => __real_cudaMemcpyFromSymbolAsync(
    dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int,
    stream: Stream) key symbol);
wrap_host!(__wrap_cudaMemcpyFromSymbolAsync_ptsz => __real_cudaMemcpyFromSymbolAsync_ptsz(
    dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize, kind: c_int,
    stream: Stream) key symbol);
wrap_host!(__wrap_cudaGetSymbolAddress => __real_cudaGetSymbolAddress(
    dev_ptr: *mut *mut c_void, symbol: *const c_void) key symbol);
wrap_host!(__wrap_cudaGetSymbolSize => __real_cudaGetSymbolSize(
    size: *mut usize, symbol: *const c_void) key symbol);

wrap_host!(__wrap_cudaGraphAddKernelNode => __real_cudaGraphAddKernelNode(
    graph_node: *mut *mut c_void, graph: *mut c_void, dependencies: *const *mut c_void,
    num_dependencies: usize, node_params: *const c_void)
    // SAFETY: the caller passes cudart a valid cudaKernelNodeParams (or null) for the call.
    key unsafe { kernel_params_func(node_params) });
wrap_host!(__wrap_cudaGraphKernelNodeSetParams => __real_cudaGraphKernelNodeSetParams(
    node: *mut c_void, node_params: *const c_void)
    // SAFETY: the caller passes cudart a valid cudaKernelNodeParams (or null) for the call.
    key unsafe { kernel_params_func(node_params) });
wrap_host!(__wrap_cudaGraphExecKernelNodeSetParams => __real_cudaGraphExecKernelNodeSetParams(
    graph_exec: *mut c_void, node: *mut c_void, node_params: *const c_void)
    // SAFETY: the caller passes cudart a valid cudaKernelNodeParams (or null) for the call.
    key unsafe { kernel_params_func(node_params) });
wrap_host!(__wrap_cudaGraphAddMemcpyNodeToSymbol => __real_cudaGraphAddMemcpyNodeToSymbol(
    graph_node: *mut *mut c_void, graph: *mut c_void, dependencies: *const *mut c_void,
    num_dependencies: usize, symbol: *const c_void, src: *const c_void, count: usize,
    offset: usize, kind: c_int) key symbol);
wrap_host!(__wrap_cudaGraphAddMemcpyNodeFromSymbol => __real_cudaGraphAddMemcpyNodeFromSymbol(
    graph_node: *mut *mut c_void, graph: *mut c_void, dependencies: *const *mut c_void,
    num_dependencies: usize, dst: *mut c_void, symbol: *const c_void, count: usize,
    offset: usize, kind: c_int) key symbol);
wrap_host!(__wrap_cudaGraphMemcpyNodeSetParamsToSymbol =>
    __real_cudaGraphMemcpyNodeSetParamsToSymbol(
    node: *mut c_void, symbol: *const c_void, src: *const c_void, count: usize, offset: usize,
    kind: c_int) key symbol);
wrap_host!(__wrap_cudaGraphMemcpyNodeSetParamsFromSymbol =>
    __real_cudaGraphMemcpyNodeSetParamsFromSymbol(
    node: *mut c_void, dst: *mut c_void, symbol: *const c_void, count: usize, offset: usize,
    kind: c_int) key symbol);
wrap_host!(__wrap_cudaGraphExecMemcpyNodeSetParamsToSymbol =>
    __real_cudaGraphExecMemcpyNodeSetParamsToSymbol(
    graph_exec: *mut c_void, node: *mut c_void, symbol: *const c_void, src: *const c_void,
    count: usize, offset: usize, kind: c_int) key symbol);
wrap_host!(__wrap_cudaGraphExecMemcpyNodeSetParamsFromSymbol =>
    __real_cudaGraphExecMemcpyNodeSetParamsFromSymbol(
    graph_exec: *mut c_void, node: *mut c_void, dst: *mut c_void, symbol: *const c_void,
    count: usize, offset: usize, kind: c_int) key symbol);
// CUDA 13 signature (12.x had no edge data argument).
wrap_host!(__wrap_cudaGraphAddNode => __real_cudaGraphAddNode(
    graph_node: *mut *mut c_void, graph: *mut c_void, dependencies: *const *mut c_void,
    dependency_data: *const c_void, num_dependencies: usize, node_params: *mut c_void)
    // SAFETY: the caller passes cudart a valid cudaGraphNodeParams (or null) for the call.
    key unsafe { node_params_func(node_params) });
wrap_host!(__wrap_cudaGraphNodeSetParams => __real_cudaGraphNodeSetParams(
    node: *mut c_void, node_params: *mut c_void)
    // SAFETY: the caller passes cudart a valid cudaGraphNodeParams (or null) for the call.
    key unsafe { node_params_func(node_params) });
wrap_host!(__wrap_cudaGraphExecNodeSetParams => __real_cudaGraphExecNodeSetParams(
    graph_exec: *mut c_void, node: *mut c_void, node_params: *mut c_void)
    // SAFETY: the caller passes cudart a valid cudaGraphNodeParams (or null) for the call.
    key unsafe { node_params_func(node_params) });
