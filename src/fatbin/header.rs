//! Field offsets of the fixed 64-byte entry header.
//!
//! ```text
//!  0 u16 kind (1 PTX, 2 ELF)       2 u16 format version (0x0101)
//!  4 u32 header size (>= 64)       8 u64 payload size, padded to 8
//! 16 u32 compressed size           20 u32 options block offset (from entry start), 0 = none
//! 24 u32 code version              28 u32 arch number (75 = sm_75)
//! 32 u32 identifier offset         36 u32 identifier length
//! 40 u64 flags                     48 u64 reserved (0)
//! 56 u64 uncompressed size (0 when not compressed)
//! ```

pub const FIXED_LEN: usize = 64;

pub mod flags {
    pub const ADDR_64: u64 = 0x1;
    pub const DEBUG: u64 = 0x2;
    pub const HOST_LINUX: u64 = 0x10;
    /// `--compress-mode=speed`: LZ4 block.
    pub const COMPRESSED_LZ4: u64 = 0x2000;
    /// nvcc 13's default compression: one zstd frame.
    pub const COMPRESSED_ZSTD: u64 = 0x8000;
    /// `sm_90a` / `compute_90a`.
    pub const ARCH_SPECIFIC: u64 = 0x10_0000;
    /// `sm_100f` / `compute_100f`.
    pub const ARCH_FAMILY: u64 = 0x20_0000;
}
