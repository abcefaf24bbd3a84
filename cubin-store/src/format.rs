//! Wire layout constants and little-endian helpers. FORMAT.md is the normative description;
//! keep the two in sync.

#[allow(unused_imports)]
use crate::prelude::*;
use fatpack_format::wire_layout;
pub const MAGIC: [u8; 8] = *b"FPSTORE\0";
pub const FORMAT_MAJOR: u16 = 1;
/// The newest minor version this crate reads and writes. A store without solid groups is
/// written as 1.0, byte for byte what earlier writers wrote.
pub const FORMAT_MINOR: u16 = 1;

/// Size of the v1.0 header; `header_len` may be larger in later minor versions.
pub const HEADER_LEN: usize = Header::LEN;
pub const INDEX_HEADER_LEN: usize = IndexHeader::LEN;
pub const BLOB_RECORD_LEN: usize = BlobRecord::LEN;
pub const MODULE_RECORD_LEN: usize = ModuleRecord::LEN;
pub const ENTRY_RECORD_LEN: usize = EntryRecord::LEN;

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
/// Largest decoded size of a solid group (its blobs' `skip` is a u32).
pub const MAX_GROUP_RAW: u64 = u32::MAX as u64;
/// The first four bytes of a zstd frame.
pub(crate) const ZSTD_MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();

wire_layout! {
    /// The store header (FORMAT.md, "Header"); `header_len` may be larger in later minor
    /// versions, and the digest covers all of it.
    pub struct Header (128) {
        /// [`MAGIC`].
        magic: [u8; 8] = 0x00,
        major: u16 = 0x08,
        minor: u16 = 0x0A,
        header_len: u32 = 0x0C,
        file_len: u64 = 0x10,
        index_offset: u64 = 0x18,
        index_len: u64 = 0x20,
        dict_offset: u64 = 0x28,
        dict_len: u64 = 0x30,
        /// Zero.
        reserved: u64 = 0x38,
        index_digest: [u8; 32] = 0x40,
        dict_digest: [u8; 32] = 0x60,
    }
}

wire_layout! {
    /// The start of the index: its table sizes.
    pub struct IndexHeader (24) {
        module_count: u32 = 0,
        entry_count: u32 = 4,
        blob_count: u32 = 8,
        /// Zero.
        reserved: u32 = 12,
        pool_len: u64 = 16,
    }
}

wire_layout! {
    /// One blob of the index's blob table.
    pub struct BlobRecord (64) {
        offset: u64 = 0,
        stored_len: u64 = 8,
        raw_len: u64 = 16,
        codec: u8 = 24,
        /// Zero.
        reserved: [u8; 3] = 25,
        /// Codec 3 (1.1): where the blob starts in its group's decoded bytes; zero for the
        /// other codecs.
        skip: u32 = 28,
        /// blake3 of the raw bytes.
        digest: [u8; 32] = 32,
    }
}

wire_layout! {
    /// One module of the index's module table: its name in the pool, its entries.
    pub struct ModuleRecord (16) {
        name_off: u32 = 0,
        name_len: u32 = 4,
        first: u32 = 8,
        count: u32 = 12,
    }
}

wire_layout! {
    /// One entry of the index's entry table.
    pub struct EntryRecord (24) {
        tag: u8 = 0,
        variant: u8 = 1,
        value: u16 = 2,
        arch: u32 = 4,
        blob: u32 = 8,
        attrs_off: u32 = 12,
        attrs_len: u32 = 16,
        /// Zero.
        reserved: u32 = 20,
    }
}

pub fn get_array<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

pub fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    get_array(b, off).map(u32::from_le_bytes)
}

// Bit test rather than `%`/`is_multiple_of` so the code stays within the crate's MSRV.
/// Stored bytes of blobs given as `(offset, stored_len)` in storage order, each solid group's
/// frame counted once (its blobs share the offset and follow one another).
pub fn distinct_frames(blobs: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut last = None;
    blobs.fold(0u64, |acc, (offset, len)| {
        if last.replace(offset) == Some(offset) {
            acc
        } else {
            acc.saturating_add(len)
        }
    })
}

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
    let Some(mut h) = Header::read(bytes) else {
        return;
    };
    let range = |b: &[u8], offset: u64, len: u64| {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        (end <= b.len()).then_some(start..end)
    };
    if let Some(r) = range(bytes, h.index_offset, h.index_len) {
        h.index_digest = *blake3::hash(&bytes[r]).as_bytes();
    }
    if let Some(r) = range(bytes, h.dict_offset, h.dict_len) {
        if !r.is_empty() {
            h.dict_digest = *blake3::hash(&bytes[r]).as_bytes();
        }
    }
    bytes[..HEADER_LEN].copy_from_slice(&h.to_bytes());
}
