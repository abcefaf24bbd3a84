//! Wire layout constants and little-endian helpers. FORMAT.md is the normative description;
//! keep the two in sync.

#[allow(unused_imports)]
use crate::prelude::*;
pub const MAGIC: [u8; 8] = *b"FPSTORE\0";
pub const FORMAT_MAJOR: u16 = 1;
pub const FORMAT_MINOR: u16 = 0;

/// Size of the v1.0 header; `header_len` may be larger in later minor versions.
pub const HEADER_LEN: usize = 128;
pub const INDEX_HEADER_LEN: usize = 24;
pub const BLOB_RECORD_LEN: usize = 64;
pub const MODULE_RECORD_LEN: usize = 16;
pub const ENTRY_RECORD_LEN: usize = 24;

/// Blob, dictionary and index offsets are multiples of this.
pub const ALIGN: u64 = 8;

/// Largest `attrs` per entry.
pub const MAX_ATTRS_LEN: usize = 64 * 1024;
/// Largest module name.
pub const MAX_NAME_LEN: usize = 64 * 1024;
/// A compressed blob may claim at most this many raw bytes per stored byte. zstd cannot exceed
/// ~32768:1 (a 4-byte RLE block per 128 KiB), so this only rejects hostile indexes that would
/// make a reader allocate far more than the store could ever decompress to.
pub const MAX_ZSTD_RATIO: u64 = 1 << 16;
/// The first four bytes of a zstd frame.
pub(crate) const ZSTD_MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();

// Header field offsets.
pub const H_MAGIC: usize = 0x00;
pub const H_MAJOR: usize = 0x08;
pub const H_MINOR: usize = 0x0A;
pub const H_HEADER_LEN: usize = 0x0C;
pub const H_FILE_LEN: usize = 0x10;
pub const H_INDEX_OFFSET: usize = 0x18;
pub const H_INDEX_LEN: usize = 0x20;
pub const H_DICT_OFFSET: usize = 0x28;
pub const H_DICT_LEN: usize = 0x30;
pub const H_RESERVED: usize = 0x38;
pub const H_INDEX_DIGEST: usize = 0x40;
pub const H_DICT_DIGEST: usize = 0x60;

/// Header fields as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub major: u16,
    pub minor: u16,
    pub header_len: u32,
    pub file_len: u64,
    pub index_offset: u64,
    pub index_len: u64,
    pub dict_offset: u64,
    pub dict_len: u64,
    pub index_digest: [u8; 32],
    pub dict_digest: [u8; 32],
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        put(&mut b, H_MAGIC, &MAGIC);
        put(&mut b, H_MAJOR, &self.major.to_le_bytes());
        put(&mut b, H_MINOR, &self.minor.to_le_bytes());
        put(&mut b, H_HEADER_LEN, &self.header_len.to_le_bytes());
        put(&mut b, H_FILE_LEN, &self.file_len.to_le_bytes());
        put(&mut b, H_INDEX_OFFSET, &self.index_offset.to_le_bytes());
        put(&mut b, H_INDEX_LEN, &self.index_len.to_le_bytes());
        put(&mut b, H_DICT_OFFSET, &self.dict_offset.to_le_bytes());
        put(&mut b, H_DICT_LEN, &self.dict_len.to_le_bytes());
        put(&mut b, H_INDEX_DIGEST, &self.index_digest);
        put(&mut b, H_DICT_DIGEST, &self.dict_digest);
        b
    }
}

/// Copies `src` into `dst` at `off`; callers only use offsets inside fixed-size buffers, and an
/// out-of-range write is silently dropped rather than panicking.
pub fn put(dst: &mut [u8], off: usize, src: &[u8]) {
    if let Some(d) = off
        .checked_add(src.len())
        .and_then(|end| dst.get_mut(off..end))
    {
        d.copy_from_slice(src);
    }
}

pub fn get_array<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

pub fn get_u8(b: &[u8], off: usize) -> Option<u8> {
    b.get(off).copied()
}

pub fn get_u16(b: &[u8], off: usize) -> Option<u16> {
    get_array(b, off).map(u16::from_le_bytes)
}

pub fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    get_array(b, off).map(u32::from_le_bytes)
}

pub fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    get_array(b, off).map(u64::from_le_bytes)
}

// Bit test rather than `%`/`is_multiple_of` so the code stays within the crate's MSRV.
pub fn is_aligned(v: u64) -> bool {
    v & (ALIGN - 1) == 0
}

pub fn align_up(v: u64) -> Option<u64> {
    v.checked_add(ALIGN - 1).map(|x| x & !(ALIGN - 1))
}

/// The whole-store digest: blake3 over the header bytes `[0, header_len)`. The header holds the
/// index digest (which covers every blob's raw-content digest) and the dictionary digest, so
/// this transitively identifies every byte a reader can observe.
pub fn store_digest(header_bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(header_bytes).as_bytes()
}

/// Recomputes the index and dictionary digests of a store image in place.
///
/// Only for tests and fuzzing: it lets a mutated index reach the index validator instead of
/// stopping at the digest check. Does nothing if the header is unreadable.
#[doc(hidden)]
pub fn reseal(bytes: &mut [u8]) {
    let field = |b: &[u8], off| get_u64(b, off).and_then(|v| usize::try_from(v).ok());
    let range = |b: &[u8], o, l| {
        let start = field(b, o)?;
        let end = start.checked_add(field(b, l)?)?;
        (end <= b.len()).then_some(start..end)
    };
    if let Some(r) = range(bytes, H_INDEX_OFFSET, H_INDEX_LEN) {
        let d = *blake3::hash(&bytes[r]).as_bytes();
        put(bytes, H_INDEX_DIGEST, &d);
    }
    if let Some(r) = range(bytes, H_DICT_OFFSET, H_DICT_LEN) {
        if !r.is_empty() {
            let d = *blake3::hash(&bytes[r]).as_bytes();
            put(bytes, H_DICT_DIGEST, &d);
        }
    }
}
