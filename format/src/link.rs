//! The link-time contract between `fatpack ld` and the runtime it links into every packed
//! output: the `--wrap` list, section, symbol and file names, and the environment variables
//! both sides read.

use std::ffi::CStr;

/// Symbols `fatpack ld` must pass as `--wrap=SYM`. Every one has a `__wrap_SYM` here that
/// calls `__real_SYM` (i.e. cudart's SYM), so all of them must exist in the cudart the
/// output links against (all do in CUDA 13.0, shared and static).
pub const WRAPPED_SYMBOLS: &[&str] = &[
    // Registration, emitted by nvcc's host stubs and by the device-link stub.
    "__cudaRegisterFatBinary",
    "__cudaRegisterFatBinaryEnd",
    "__cudaUnregisterFatBinary",
    "__cudaRegisterFunction",
    "__cudaRegisterVar",
    "__cudaRegisterManagedVar",
    "__cudaInitModule",
    // CUDA 13 `<<<>>>`: host stub -> __cudaGetKernel(&k, stub) -> __cudaLaunchKernel(k, ...).
    // Only the first takes the host function, so __cudaLaunchKernel is not wrapped.
    "__cudaGetKernel",
    // Public APIs taking a host function or symbol address (cuda_runtime_api.h, 13.0), with
    // the per-thread-default-stream variants that `--default-stream per-thread` selects.
    "cudaLaunchKernel",
    "cudaLaunchKernel_ptsz",
    "cudaLaunchKernelExC",
    "cudaLaunchKernelExC_ptsz",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernel_ptsz",
    "cudaFuncSetAttribute",
    "cudaFuncGetAttributes",
    "cudaFuncSetCacheConfig",
    "cudaFuncSetSharedMemConfig",
    "cudaFuncGetName",
    "cudaFuncGetParamInfo",
    "cudaGetKernel",
    "cudaGetFuncBySymbol",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaOccupancyAvailableDynamicSMemPerBlock",
    "cudaOccupancyMaxPotentialClusterSize",
    "cudaOccupancyMaxActiveClusters",
    "cudaMemcpyToSymbol",
    "cudaMemcpyToSymbol_ptds",
    "cudaMemcpyFromSymbol",
    "cudaMemcpyFromSymbol_ptds",
    "cudaMemcpyToSymbolAsync",
    "cudaMemcpyToSymbolAsync_ptsz",
    "cudaMemcpyFromSymbolAsync",
    "cudaMemcpyFromSymbolAsync_ptsz",
    "cudaGetSymbolAddress",
    "cudaGetSymbolSize",
    "cudaGraphAddKernelNode",
    "cudaGraphKernelNodeSetParams",
    "cudaGraphExecKernelNodeSetParams",
    "cudaGraphAddMemcpyNodeToSymbol",
    "cudaGraphAddMemcpyNodeFromSymbol",
    "cudaGraphMemcpyNodeSetParamsToSymbol",
    "cudaGraphMemcpyNodeSetParamsFromSymbol",
    "cudaGraphExecMemcpyNodeSetParamsToSymbol",
    "cudaGraphExecMemcpyNodeSetParamsFromSymbol",
    "cudaGraphAddNode",
    "cudaGraphNodeSetParams",
    "cudaGraphExecNodeSetParams",
];

/// Libraries to add after `libfatpack_rt.a` (what Rust's std needs on glibc; on glibc >= 2.34
/// all but libgcc_s are empty stubs, harmless). For a `-static` link use `-lgcc_eh` instead of
/// `-lgcc_s`.
pub const SYSTEM_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// File name of the archive; `--exclude-libs` matches on it.
pub const RUNTIME_ARCHIVE: &str = "libfatpack_rt.a";

/// Non-allocated section of the packed output that holds the store.
pub const STORE_SECTION: &str = ".fatpack";
/// Suffix of the side-file store (`<output>.fatpack`), tried when the section is absent.
pub const SIDE_FILE_SUFFIX: &str = ".fatpack";
/// Allocated section of the glue object that holds the 32-byte store digest.
pub const DIGEST_SECTION: &str = ".fatpack_digest";
/// Hidden symbol at the start of [`DIGEST_SECTION`]; the runtime reads the digest through it.
pub const DIGEST_SYMBOL: &str = "__fatpack_store_digest";

/// Environment variable: a runtime archive to link instead of the one fatpack carries.
pub const ENV_RUNTIME: &str = "FATPACK_RUNTIME";
/// Environment variable: the real linker to run (else the one of fatpack's own name on PATH).
pub const ENV_REAL_LD: &str = "FATPACK_REAL_LD";
/// Environment variable: `1` makes `fatpack ld` report what it did (as `--fatpack-verbose`).
pub const ENV_VERBOSE: &str = "FATPACK_VERBOSE";
// The runtime reads these with getenv (no allocation, safe before main), hence C strings.

/// Environment variable: `info` or `debug` logs choices to stderr.
pub const ENV_LOG: &CStr = c"FATPACK_LOG";
/// Environment variable: `sm_80`, `compute_90`, ... forces that entry for every module.
pub const ENV_ARCH: &CStr = c"FATPACK_ARCH";
/// Environment variable: `1` loads each module when its registration ends (at program or
/// library load) instead of at first use.
pub const ENV_EAGER: &CStr = c"FATPACK_EAGER";

/// Linker arguments (for `ld` itself; prefix each with `-Wl,` for a compiler driver): one
/// `--wrap=SYM` per [`WRAPPED_SYMBOLS`], plus `--exclude-libs=libfatpack_rt.a` when the output
/// is a shared object.
///
/// Hiding matters only in a shared object: there another packed library's exported
/// `__wrap_*` would otherwise interpose on this one's. In an executable nothing can interpose,
/// and hiding breaks GNU ld: it applies `--wrap` to the cudart references of the shared
/// libraries the executable links against, then refuses a hidden `__wrap_*` as their
/// definition ("hidden symbol ... is referenced by DSO"); gold does not mind either way.
pub fn link_args(shared_output: bool) -> Vec<String> {
    let mut v: Vec<String> = WRAPPED_SYMBOLS
        .iter()
        .map(|s| format!("--wrap={s}"))
        .collect();
    if shared_output {
        v.push(format!("--exclude-libs={RUNTIME_ARCHIVE}"));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_symbols_are_unique() {
        let mut v = WRAPPED_SYMBOLS.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), WRAPPED_SYMBOLS.len());
        assert_eq!(link_args(true).len(), WRAPPED_SYMBOLS.len() + 1);
        assert_eq!(link_args(false).len(), WRAPPED_SYMBOLS.len());
    }
}
