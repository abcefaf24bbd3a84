//! The link-time contract between `fatpack ld` and the runtime it links into every packed
//! output: the `--wrap` list, section, symbol and file names, and the environment variables
//! both sides read.

use crate::prelude::*;
use crate::wire_layout;
use core::ffi::CStr;

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
    // Calls that initialise the driver: the first starts decoding ahead as it begins (the
    // runtime's ahead.rs); each is otherwise passed straight through.
    "cudaGetDeviceCount",
    "cudaSetDevice",
    "cudaInitDevice",
    "cudaMalloc",
    "cudaMallocHost",
    "cudaHostAlloc",
    "cudaMallocManaged",
    "cudaMallocAsync",
    "cudaMallocAsync_ptsz",
    "cudaFree",
    "cudaStreamCreate",
    "cudaStreamCreateWithFlags",
    "cudaDeviceSynchronize",
    "cudaMemcpy",
    "cudaMemcpy_ptds",
    "cudaMemcpyAsync",
    "cudaMemcpyAsync_ptsz",
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

/// Section of the packed output that holds the store: allocated and mapped by a read-only
/// `PT_LOAD` of its own after everything else the output loads (what `fatpack ld` does by
/// default), or non-allocated where the linker left no program header to spare (the
/// runtime then reads it from the file).
pub const STORE_SECTION: &str = ".fatpack";
/// Suffix of the side-file store (`<output>.fatpack`), tried when the section is absent.
pub const SIDE_FILE_SUFFIX: &str = ".fatpack";
/// Allocated section of the glue object that holds the store slot ([`StoreSlot`]).
pub const DIGEST_SECTION: &str = ".fatpack_digest";
/// Hidden symbol at the start of [`DIGEST_SECTION`]; the runtime reads the slot through it.
pub const DIGEST_SYMBOL: &str = "__fatpack_store_digest";

/// Allocated note section of the glue object. Linkers give a note of an alignment no other
/// note has a program header of its own (`PT_NOTE`); `fatpack ld` turns that header into the
/// `PT_LOAD` that maps the store after everything else the output loads, so the running
/// image reaches its store in memory with no file to open.
pub const SEGMENT_NOTE_SECTION: &str = ".note.fatpack";
/// Its alignment: 16, which no toolchain note uses (they are 4 or 8), so the linker cannot
/// merge it into another note's `PT_NOTE`.
pub const SEGMENT_NOTE_ALIGN: u64 = 16;
/// The note's owner name (NUL included) and type.
pub const SEGMENT_NOTE_NAME: &[u8; 8] = b"fatpack\0";
pub const SEGMENT_NOTE_TYPE: u32 = 0x4650_4b31;

/// The 64-byte slot `fatpack ld` patches after the link, read by the runtime from memory:
///
/// | offset | size | field |
/// |---:|---:|---|
/// | 0 | 32 | blake3 digest of the store (all zero: not patched) |
/// | 32 | 8 | `i64`: address of the mapped store minus address of the slot; 0: not mapped |
/// | 40 | 8 | `u64`: length of the mapped store; 0: not mapped (section or side file) |
/// | 48 | 4 | `u32`: where the store is, a [`StoreLocation`] |
/// | 52 | 4 | `u32`: what the linked runtime can read, [`RUNTIME_FEATURES`] bits; set in the
/// glue object at link time and kept by every later patch |
/// | 56 | 8 | reserved, zero |
///
/// A relative address needs no dynamic relocation, so the slot stays read-only data and
/// the same bytes are right at any load address. Outputs of fatpack before the mapped
/// store had a 32-byte slot: the digest alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreSlot {
    pub digest: [u8; 32],
    pub store_rel: i64,
    pub store_len: u64,
    pub location: StoreLocation,
    pub features: u32,
}

/// [`StoreSlot::features`] bit: the runtime reads a split manifest ([`crate::split`]) where
/// the store was, and loads blobs from pack files. `fatpack split` refuses binaries whose
/// runtime predates it.
pub const FEATURE_SPLIT: u32 = 1;
/// [`StoreSlot::features`] bit: the runtime reads stores of format 1.1 (solid groups) and
/// split packs that hold a GPU family. `fatpack repack --release` refuses binaries whose
/// runtime predates it.
pub const FEATURE_SOLID: u32 = 2;
/// Everything the runtime of this fatpack reads.
pub const RUNTIME_FEATURES: u32 = FEATURE_SPLIT | FEATURE_SOLID;

/// Where a packed output keeps its store, as its slot records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreLocation {
    /// Not recorded (a slot not patched, or written before locations were recorded): look
    /// for the section in the file, then the side file.
    #[default]
    Unknown,
    /// Mapped with the image (a `PT_LOAD` of the `.fatpack` section).
    Mapped,
    /// The non-allocated `.fatpack` section of the file (no program header was free).
    Section,
    /// The side file `<output>.fatpack`.
    SideFile,
}

impl StoreLocation {
    fn to_u32(self) -> u32 {
        match self {
            StoreLocation::Unknown => 0,
            StoreLocation::Mapped => 1,
            StoreLocation::Section => 2,
            StoreLocation::SideFile => 3,
        }
    }

    fn from_u32(v: u32) -> StoreLocation {
        match v {
            1 => StoreLocation::Mapped,
            2 => StoreLocation::Section,
            3 => StoreLocation::SideFile,
            _ => StoreLocation::Unknown,
        }
    }
}

impl StoreSlot {
    pub const LEN: usize = 64;
    /// Length of the slot in outputs written before the store was mapped.
    pub const LEGACY_LEN: usize = 32;

    /// Reads a slot of [`Self::LEN`] or [`Self::LEGACY_LEN`] bytes.
    pub fn read(b: &[u8]) -> Option<StoreSlot> {
        if b.len() < Self::LEN {
            return Some(StoreSlot {
                digest: LegacySlotRecord::read(b)?.digest,
                ..StoreSlot::default()
            });
        }
        let r = SlotRecord::read(b)?;
        Some(StoreSlot {
            digest: r.digest,
            store_rel: r.store_rel,
            store_len: r.store_len,
            location: StoreLocation::from_u32(r.location),
            features: r.features,
        })
    }

    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        SlotRecord {
            digest: self.digest,
            store_rel: self.store_rel,
            store_len: self.store_len,
            location: self.location.to_u32(),
            features: self.features,
        }
        .to_bytes()
    }

    /// True when the store is mapped with the image (reached through `store_rel`).
    pub fn is_mapped(&self) -> bool {
        self.location == StoreLocation::Mapped && self.store_len != 0
    }
}

wire_layout! {
    /// The [`StoreSlot`] as the glue object lays it out.
    pub struct SlotRecord (64) {
        digest: [u8; 32] = 0,
        store_rel: i64 = 32,
        store_len: u64 = 40,
        location: u32 = 48,
        features: u32 = 52,
    }
}

wire_layout! {
    /// The slot of outputs linked before the store was mapped: the digest alone.
    pub struct LegacySlotRecord (32) {
        digest: [u8; 32] = 0,
    }
}

wire_layout! {
    /// The glue object's note: a valid ELF note (so any note reader skips it) whose
    /// descriptor is 12 zero bytes.
    pub struct SegmentNote (32) {
        namesz: u32 = 0,
        descsz: u32 = 4,
        note_type: u32 = 8,
        name: [u8; 8] = 12,
    }
}

/// The glue object's note, 32 bytes in all.
pub fn segment_note() -> [u8; 32] {
    SegmentNote {
        namesz: SEGMENT_NOTE_NAME.len() as u32,
        descsz: 12,
        note_type: SEGMENT_NOTE_TYPE,
        name: *SEGMENT_NOTE_NAME,
    }
    .to_bytes()
}

// The variables a packed program's runtime reads (the CLI's own are in its `environment`
// table, which documents these too). The runtime reads them with getenv (no allocation,
// safe before main), hence C strings.

/// Environment variable: `info` or `debug` logs choices to stderr.
pub const ENV_LOG: &CStr = c"FATPACK_LOG";
/// Environment variable: `sm_80`, `compute_90`, ... forces that entry for every module.
pub const ENV_ARCH: &CStr = c"FATPACK_ARCH";
/// Environment variable: `1` loads each module when its registration ends (at program or
/// library load) instead of at first use.
pub const ENV_EAGER: &CStr = c"FATPACK_EAGER";
/// Environment variable: `runtime` decodes every entry in the runtime, never handing a
/// driver the stored zstd frames (the default, `auto`, hands them over where the driver
/// takes them).
pub const ENV_DECODE: &CStr = c"FATPACK_DECODE";
/// Environment variable: at most this many MiB of device code decoded ahead, on a helper
/// thread, from the program's first CUDA call that initialises the driver on (default
/// [`AHEAD_DEFAULT_MIB`]; `0` decodes nothing ahead).
pub const ENV_AHEAD: &CStr = c"FATPACK_AHEAD";
/// [`ENV_AHEAD`] when unset.
pub const AHEAD_DEFAULT_MIB: u64 = 32;

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
    fn slot_round_trips_and_reads_legacy_slots() {
        let s = StoreSlot {
            digest: [7; 32],
            store_rel: -4096,
            store_len: 12345,
            location: StoreLocation::Mapped,
            features: RUNTIME_FEATURES,
        };
        assert_eq!(StoreSlot::read(&s.to_bytes()), Some(s));
        let legacy = StoreSlot::read(&[9u8; 32]).unwrap();
        assert_eq!(legacy.digest, [9; 32]);
        assert!(!legacy.is_mapped());
        assert_eq!(StoreSlot::read(&[0u8; 31]), None);
    }

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
