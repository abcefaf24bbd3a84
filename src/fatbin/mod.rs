//! The CUDA fatbin container as nvcc 13 writes it, read into a model and written back.
//!
//! The wire layout is fatpack-format's ([`fatpack_format::fatbin`], shared with the runtime);
//! this module is the CLI's model over it: containers and entries read into owned values,
//! nvcc's zstd/LZ4 payloads decoded, and written back byte for byte.

mod compress;
mod parse;
mod write;

pub use compress::Compression;
pub use fatpack_format::arch::EntryKind;
pub use fatpack_format::fatbin::{flags, EntryHeader, CONTAINER_HEADER_LEN, FATBIN_MAGIC};
pub use parse::{
    entry_at, entry_headers, entry_spans, find_embedded, parse_all, parse_all_at, parse_one,
    span_one, spans, spans_with,
};

use crate::arch::{Arch, EntryId};

/// One fatbin container: what one `__cudaRegisterFatBinary` call registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fatbin {
    pub version: u16,
    pub entries: Vec<Entry>,
}

/// One entry: a cubin or PTX for one arch, with its header kept so that it can be written
/// back exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The fixed header as read; `header_len` and `payload_len` are recomputed on writing.
    pub header: EntryHeader,
    /// Header bytes past the fixed 64 (identifier, ptxas options, compatibility table).
    /// Offsets inside the fixed header point into this, so it is kept opaque.
    pub header_tail: Vec<u8>,
    /// The payload as stored, padding included.
    pub stored: Vec<u8>,
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
        Entry {
            header: EntryHeader::new(kind, arch, code_version, stored.len() as u64),
            header_tail: Vec::new(),
            stored,
        }
    }

    pub fn kind(&self) -> EntryKind {
        self.header.entry_kind()
    }

    pub fn flags(&self) -> u64 {
        self.header.flags
    }

    pub fn compression(&self) -> Compression {
        Compression::from_flags(self.header.flags)
    }

    pub fn arch(&self) -> Arch {
        self.header.arch()
    }

    pub fn target(&self) -> Option<EntryId> {
        EntryId::code(self.kind(), self.header.arch_number, self.header.variant())
    }

    /// `sm_90a` for cubins, `compute_90` for PTX.
    pub fn arch_name(&self) -> String {
        match self.kind() {
            EntryKind::Ptx => self.arch().compute_name(),
            _ => self.arch().sm_name(),
        }
    }

    pub fn header_len(&self) -> usize {
        EntryHeader::LEN + self.header_tail.len()
    }

    /// Bytes this entry occupies in the container (header and padded payload).
    pub fn encoded_len(&self) -> usize {
        self.header_len() + self.stored.len()
    }

    /// Size of the payload once decompressed.
    pub fn raw_len(&self) -> u64 {
        match self.compression() {
            Compression::None => self.stored.len() as u64,
            _ => self.header.uncompressed_len,
        }
    }

    /// Bytes the payload takes in the file (compressed size, padding excluded when known).
    pub fn stored_len(&self) -> u64 {
        match self.compression() {
            Compression::None => self.stored.len() as u64,
            _ => u64::from(self.header.compressed_len),
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
        let mut stored = self.payload()?.into_owned();
        stored.resize(stored.len().div_ceil(8) * 8, 0);
        Ok(Entry {
            header: self.header.uncompressed(stored.len() as u64),
            header_tail: self.header_tail.clone(),
            stored,
        })
    }

    /// The identifier nvcc records for debug builds (the source file name), if any.
    pub fn identifier(&self) -> Option<String> {
        self.tail_str(self.header.ident_offset, self.header.ident_len)
    }

    /// The ptxas/JIT options recorded in the options block, if they are text.
    pub fn options(&self) -> Option<String> {
        if self.header.options_offset == 0 {
            return None;
        }
        let at = (self.header.options_offset as usize).checked_sub(EntryHeader::LEN)?;
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
        let start = (offset as usize).checked_sub(EntryHeader::LEN)?;
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
