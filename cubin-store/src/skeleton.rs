//! A store without its blobs: the header, the dictionary and the index, which is everything
//! needed to know what a store holds and to check any blob given to it (each blob's length
//! and blake3 are in the index). `fatpack split` keeps this part with the binary and moves
//! the blobs into per-capability packs; putting the blobs back at the offsets the index
//! records gives the original store byte for byte ([`Store::assemble`]).
//!
//! Layout (see `FORMAT.md`, *Detached index*): `"FPSKEL\0\0"`, u32 version (1), u32 zero,
//! then the store's header (`header_len` bytes), dictionary (`dict_len`) and index
//! (`index_len`), lengths as the copied header states them, nothing after.

use core::ops::Range;

use crate::prelude::*;

use crate::error::{Result, StoreError};
use crate::format::*;
use crate::reader::{Parsed, Source, Store};

pub const SKELETON_MAGIC: [u8; 8] = *b"FPSKEL\0\0";
const SKELETON_VERSION: u32 = 1;
const PREFIX_LEN: usize = 16;

/// The pieces of a detached index, placed at the store offsets the header gives them.
struct Pieces<'a> {
    header: &'a [u8],
    dict: (usize, &'a [u8]),
    index: (usize, &'a [u8]),
    file_len: u64,
}

impl Source for Pieces<'_> {
    fn len(&self) -> u64 {
        self.file_len
    }
    fn get(&self, r: Range<usize>) -> Option<&[u8]> {
        [(0, self.header), self.dict, self.index]
            .into_iter()
            .find_map(|(at, b)| b.get(r.start.checked_sub(at)?..r.end.checked_sub(at)?))
    }
}

fn truncated(what: &'static str, need: u64, have: u64) -> StoreError {
    StoreError::Truncated { what, need, have }
}

fn pieces(bytes: &[u8]) -> Result<Pieces<'_>> {
    let have = bytes.len() as u64;
    if let Some(found) = get_array::<8>(bytes, 0) {
        if found != SKELETON_MAGIC {
            return Err(StoreError::MalformedHeader(format!(
                "not a detached store index: magic {} (expected \"FPSKEL\\0\\0\")",
                crate::error::Hex(&found)
            )));
        }
    }
    let version = get_u32(bytes, 8).ok_or_else(|| truncated("detached index", 16, have))?;
    if version != SKELETON_VERSION || get_u32(bytes, 12) != Some(0) {
        return Err(StoreError::MalformedHeader(format!(
            "detached index version {version} (this reader supports {SKELETON_VERSION})"
        )));
    }
    let rest = &bytes[PREFIX_LEN..];
    let hdr = rest
        .get(..HEADER_LEN)
        .ok_or_else(|| truncated("store header", (PREFIX_LEN + HEADER_LEN) as u64, have))?;
    let h = Header::read(hdr)
        .ok_or_else(|| truncated("store header", (PREFIX_LEN + HEADER_LEN) as u64, have))?;
    let header_len = u64::from(h.header_len);
    let lens = [header_len, h.dict_len, h.index_len];
    let total = lens.iter().try_fold(0u64, |a, &l| a.checked_add(l));
    if total != Some(rest.len() as u64) {
        return Err(StoreError::MalformedHeader(format!(
            "detached index is {} bytes after its prefix; the store header it carries needs \
             {header_len} + {} + {} bytes",
            rest.len(),
            lens[1],
            lens[2]
        )));
    }
    // All three fit in `rest`, so they fit in usize.
    let (header_bytes, tail) = rest.split_at(header_len as usize);
    let (d, i) = tail.split_at(lens[1] as usize);
    let at = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Ok(Pieces {
        header: header_bytes,
        dict: (at(h.dict_offset), d),
        index: (at(h.index_offset), i),
        file_len: h.file_len,
    })
}

impl<'a> Store<'a> {
    /// The detached index of this store: header, dictionary and index, no blobs.
    pub fn skeleton(&self) -> Vec<u8> {
        let p = self.parsed();
        let index = p.index_bytes();
        let dict = p.dict_bytes();
        let mut out =
            Vec::with_capacity(PREFIX_LEN + p.header_bytes().len() + dict.len() + index.len());
        out.extend_from_slice(&SKELETON_MAGIC);
        out.extend_from_slice(&SKELETON_VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(p.header_bytes());
        out.extend_from_slice(dict);
        out.extend_from_slice(index);
        out
    }

    /// Parses a detached index made by [`Store::skeleton`], validated as [`Store::parse`]
    /// validates a whole store. The result has the same digest, modules and entries as the
    /// store it came from; its blobs are read with [`Store::read_entry_from`].
    pub fn parse_skeleton(bytes: &[u8]) -> Result<Store<'static>> {
        let parsed = Parsed::parse_from(&pieces(bytes)?)?;
        Ok(Store::detached(parsed))
    }

    #[cfg(feature = "std")]
    /// Writes the whole store, each blob's stored bytes from `blob(id)`, at the offsets
    /// the index records, with the zero padding the writer puts between them: for a store
    /// whose blobs were moved out ([`Store::skeleton`]) this gives back the original bytes.
    /// Each blob's length is checked; its contents are the caller's to verify (parse the
    /// result and [`Store::verify`] it).
    pub fn assemble<'b, W: std::io::Write>(
        &self,
        out: &mut W,
        mut blob: impl FnMut(u32) -> Result<&'b [u8]>,
    ) -> Result<u64> {
        let p = self.parsed();
        let mut pos = 0u64;
        let pad_to = |out: &mut W, pos: &mut u64, to: u64| -> Result<()> {
            if to < *pos {
                return Err(StoreError::MalformedHeader(format!(
                    "store parts overlap at offset {to} (already at {pos})"
                )));
            }
            std::io::copy(&mut std::io::Read::take(std::io::repeat(0), to - *pos), out)?;
            *pos = to;
            Ok(())
        };
        out.write_all(p.header_bytes())?;
        pos += p.header_bytes().len() as u64;
        if let Some(d) = p.dict_at() {
            pad_to(out, &mut pos, d)?;
            out.write_all(p.dict_bytes())?;
            pos += p.dict_bytes().len() as u64;
        }
        let mut before: Option<crate::BlobView> = None;
        for b in self.blobs() {
            // A solid group's blobs share one frame: written once, for its first blob.
            let shared = before.as_ref().is_some_and(|p| b.shares_frame_with(p));
            before = Some(b.clone());
            if shared {
                continue;
            }
            let bytes = blob(b.id)?;
            if bytes.len() as u64 != b.stored_len {
                return Err(StoreError::MalformedHeader(format!(
                    "blob {}: {} bytes given, the index records {}",
                    b.id,
                    bytes.len(),
                    b.stored_len
                )));
            }
            pad_to(out, &mut pos, b.offset)?;
            out.write_all(bytes)?;
            pos += b.stored_len;
        }
        pad_to(out, &mut pos, p.index_at())?;
        out.write_all(p.index_bytes())?;
        pos += p.index_bytes().len() as u64;
        Ok(pos)
    }
}
