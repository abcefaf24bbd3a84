//! The CUDA fatbin container as nvcc 13 writes it, read into a model and written back.
//!
//! Layout (little-endian), learned from nvcc 13.0 output and checked against `cuobjdump`:
//! a 16-byte container header (`magic 0xBA55ED50, u16 version 1, u16 header size 16,
//! u64 size of the entries that follow`), then entries, each a header of at least 64 bytes
//! (see [`header`]) followed by its payload padded to 8 bytes. A section can hold several
//! containers back to back (a linked executable concatenates one per translation unit).

mod compress;
pub mod header;
mod parse;
mod write;

pub use compress::Compression;
pub use parse::{parse_all, parse_all_at, parse_one, span_one, spans};

use crate::arch::{Arch, CodeKind, Target, Variant};
use header::flags;

pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
pub const CONTAINER_HEADER_LEN: usize = 16;

/// What an entry's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryKind {
    Ptx,
    /// An ELF cubin (SASS), linked or relocatable.
    Elf,
    Other(u16),
}

impl EntryKind {
    pub fn from_code(code: u16) -> Self {
        match code {
            1 => EntryKind::Ptx,
            2 => EntryKind::Elf,
            c => EntryKind::Other(c),
        }
    }
    pub fn code(self) -> u16 {
        match self {
            EntryKind::Ptx => 1,
            EntryKind::Elf => 2,
            EntryKind::Other(c) => c,
        }
    }
}

/// One fatbin container: what one `__cudaRegisterFatBinary` call registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatbin {
    pub version: u16,
    pub entries: Vec<Entry>,
}

/// One entry: a cubin or PTX for one arch, with its header fields kept so that it can be
/// written back exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// Entry header format version (0x0101 in every nvcc seen).
    pub format_version: u16,
    /// PTX ISA version (`major << 16 | minor`) for PTX; ELF format version for cubins.
    pub code_version: u32,
    /// Compute capability number, `90` for sm_90.
    pub arch_number: u32,
    pub flags: u64,
    /// The 64-bit word at offset 48 (zero in every nvcc output seen); kept for round trips.
    pub reserved: u64,
    /// Header bytes past the fixed 64 (identifier, ptxas options, compatibility table).
    /// Offsets inside the fixed header point into this, so it is kept opaque.
    pub header_tail: Vec<u8>,
    /// Offset (from the entry start) of the options block, 0 if none.
    pub options_offset: u32,
    /// Offset and length (from the entry start) of the identifier string, 0 if none.
    pub ident_offset: u32,
    pub ident_len: u32,
    /// The payload as stored, padding included.
    pub stored: Vec<u8>,
    /// For compressed entries: length of the compressed data inside `stored`.
    pub compressed_len: u32,
    /// For compressed entries: the decompressed size.
    pub uncompressed_len: u64,
}

impl Entry {
    /// A new uncompressed entry around `payload` (padded to 8 bytes), for writing fatbins.
    pub fn new_uncompressed(
        kind: EntryKind,
        arch: Arch,
        code_version: u32,
        payload: &[u8],
    ) -> Self {
        let mut stored = payload.to_vec();
        stored.resize(payload.len().div_ceil(8) * 8, 0);
        let mut f = flags::ADDR_64 | flags::HOST_LINUX;
        match arch.variant {
            Variant::Plain => {}
            Variant::Specific => f |= flags::ARCH_SPECIFIC,
            Variant::Family => f |= flags::ARCH_FAMILY,
        }
        Entry {
            kind,
            format_version: 0x0101,
            code_version,
            arch_number: arch.number,
            flags: f,
            reserved: 0,
            header_tail: Vec::new(),
            options_offset: 0,
            ident_offset: 0,
            ident_len: 0,
            stored,
            compressed_len: 0,
            uncompressed_len: 0,
        }
    }

    pub fn compression(&self) -> Compression {
        Compression::from_flags(self.flags)
    }

    pub fn arch(&self) -> Arch {
        let variant = if self.flags & flags::ARCH_SPECIFIC != 0 {
            Variant::Specific
        } else if self.flags & flags::ARCH_FAMILY != 0 {
            Variant::Family
        } else {
            Variant::Plain
        };
        Arch::with_variant(self.arch_number, variant)
    }

    pub fn target(&self) -> Option<Target> {
        let kind = match self.kind {
            EntryKind::Ptx => CodeKind::Ptx,
            EntryKind::Elf => CodeKind::Sass,
            EntryKind::Other(_) => return None,
        };
        Some(Target {
            arch: self.arch(),
            kind,
        })
    }

    /// `sm_90a` for cubins, `compute_90` for PTX.
    pub fn arch_name(&self) -> String {
        match self.kind {
            EntryKind::Ptx => self.arch().compute_name(),
            _ => self.arch().sm_name(),
        }
    }

    pub fn header_len(&self) -> usize {
        header::FIXED_LEN + self.header_tail.len()
    }

    /// Bytes this entry occupies in the container (header and padded payload).
    pub fn encoded_len(&self) -> usize {
        self.header_len() + self.stored.len()
    }

    /// Size of the payload once decompressed.
    pub fn raw_len(&self) -> u64 {
        match self.compression() {
            Compression::None => self.stored.len() as u64,
            _ => self.uncompressed_len,
        }
    }

    /// Bytes the payload takes in the file (compressed size, padding excluded when known).
    pub fn stored_len(&self) -> u64 {
        match self.compression() {
            Compression::None => self.stored.len() as u64,
            _ => u64::from(self.compressed_len),
        }
    }

    /// The payload, decompressed when nvcc compressed it.
    pub fn payload(&self) -> Result<std::borrow::Cow<'_, [u8]>, compress::DecompressError> {
        compress::decompress(self)
    }

    /// The same entry with its payload stored uncompressed.
    pub fn to_uncompressed(&self) -> Result<Entry, compress::DecompressError> {
        if self.compression() == Compression::None {
            return Ok(self.clone());
        }
        let raw = self.payload()?.into_owned();
        let mut e = self.clone();
        e.flags &= !(flags::COMPRESSED_LZ4 | flags::COMPRESSED_ZSTD);
        e.compressed_len = 0;
        e.uncompressed_len = 0;
        e.stored = raw;
        e.stored.resize(e.stored.len().div_ceil(8) * 8, 0);
        Ok(e)
    }

    /// The identifier nvcc records for debug builds (the source file name), if any.
    pub fn identifier(&self) -> Option<String> {
        self.tail_str(self.ident_offset, self.ident_len)
    }

    /// The ptxas/JIT options recorded in the options block, if they are text.
    pub fn options(&self) -> Option<String> {
        if self.options_offset == 0 {
            return None;
        }
        let at = (self.options_offset as usize).checked_sub(header::FIXED_LEN)?;
        let word = |i: usize| -> Option<u32> {
            let b = self.header_tail.get(at + 4 * i..at + 4 * i + 4)?;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        };
        let (off, len) = (word(0)?, word(1)?);
        let s = self.tail_str(off, len)?;
        // The block also carries binary compatibility tables on sm_100+; only text is an option.
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
            .then(|| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    fn tail_str(&self, offset: u32, len: u32) -> Option<String> {
        if len == 0 {
            return None;
        }
        let start = (offset as usize).checked_sub(header::FIXED_LEN)?;
        let bytes = self
            .header_tail
            .get(start..start.checked_add(len as usize)?)?;
        let bytes = bytes.split(|&b| b == 0).next().unwrap_or(bytes);
        Some(String::from_utf8_lossy(bytes).into_owned())
    }
}

impl Fatbin {
    pub fn encoded_len(&self) -> usize {
        CONTAINER_HEADER_LEN + self.entries.iter().map(Entry::encoded_len).sum::<usize>()
    }

    /// Keep only the entries `keep` says yes to, in their order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        self.entries.retain(|e| keep(e));
    }
}

pub use compress::DecompressError;
pub use parse::FatbinError;
