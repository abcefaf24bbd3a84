//! Writing solid groups (format 1.1): the blobs of a group compressed as one zstd frame, with a
//! window over the whole group and long-distance matching, so that what the group's entries
//! share is stored once. A release store's layout; the default stays one frame per blob.

use std::collections::HashSet;
use std::io::{Seek, Write};

use super::{
    check_attrs, compress, new_compressor, parallel_map_with, BlobRec, EntryRec, StoreWriter,
};
use crate::error::{Result, StoreError};
use crate::format::*;
use crate::meta::{Codec, EntryMeta};
use crate::writer::{EntryRef, ModuleId};

/// zstd's largest window that every decoder accepts without being told (`--long=27`).
const MAX_WINDOW_LOG: u32 = 27;

/// What one group became.
enum Written {
    /// One frame over the group's new blobs, in order.
    Solid(Vec<u8>),
    /// Each new blob on its own (one blob, or the frame did not pay): a frame or `None` for
    /// raw, as [`StoreWriter::add_entry`] writes them.
    Each(Vec<Option<Vec<u8>>>),
}

impl<W: Write + Seek> StoreWriter<W> {
    /// Adds blobs in solid groups: the blobs of each group that are not stored yet (first
    /// occurrence; content-addressed as always) become one zstd frame, compressed at the
    /// writer's level with a window over the whole group, on up to `threads` threads (0 = one
    /// per CPU); groups are written in order, so the bytes do not depend on `threads`. A
    /// group of one new blob, or whose frame would not be smaller than its blobs, is written
    /// as separate blobs. Returns each group's blob ids, in its order; entries then name them
    /// ([`StoreWriter::add_entry_for_blob`]). Memory: every group's blobs are the caller's,
    /// and one frame per thread is held until it is written.
    pub fn add_groups(&mut self, groups: &[Vec<&[u8]>], threads: usize) -> Result<Vec<Vec<u32>>> {
        self.check_poisoned()?;
        if !self.dict.is_empty() {
            return Err(StoreError::Compression(
                "solid groups are not compressed with a store dictionary".into(),
            ));
        }
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let flat: Vec<&[u8]> = groups.iter().flatten().copied().collect();
        let digests: Vec<[u8; 32]> = parallel_map_with(
            &flat,
            threads,
            || Ok(()),
            |_, raw| Ok(*blake3::hash(raw).as_bytes()),
        )?;
        // Each group's new blobs: (raw, digest), first occurrence in the whole batch.
        let mut seen = HashSet::new();
        let mut at = 0;
        let mut jobs: Vec<Vec<(&[u8], [u8; 32])>> = Vec::with_capacity(groups.len());
        for g in groups {
            let mut fresh = Vec::new();
            for (&raw, &d) in g.iter().zip(digests.get(at..).unwrap_or_default()) {
                if !self.by_digest.contains_key(&d) && seen.insert(d) {
                    fresh.push((raw, d));
                }
            }
            at += g.len();
            jobs.push(fresh);
        }
        let level = self.level;
        let written = parallel_map_with(
            &jobs,
            threads.min(jobs.len().max(1)),
            || Ok(()),
            |_, fresh: &Vec<(&[u8], [u8; 32])>| compress_group(level, fresh),
        )?;
        for (fresh, w) in jobs.iter().zip(written) {
            match w {
                Written::Solid(frame) => self.emit_group(fresh, &frame)?,
                Written::Each(frames) => {
                    for ((raw, d), f) in fresh.iter().zip(frames) {
                        self.emit_blob(raw, f.as_deref(), *d)?;
                    }
                }
            }
        }
        let mut at = 0;
        groups
            .iter()
            .map(|g| {
                let ids = g
                    .iter()
                    .zip(digests.get(at..).unwrap_or_default())
                    .map(|(_, d)| {
                        self.by_digest
                            .get(d)
                            .copied()
                            .ok_or_else(|| StoreError::Compression("a blob was lost".into()))
                    })
                    .collect();
                at += g.len();
                ids
            })
            .collect()
    }

    /// Adds one solid group whose frame is already made: `frame` (a group of another store,
    /// copied as it is) decodes to `raws` one after another, which the caller vouches for (it
    /// decoded and checked them); the frame's header must say so (one zstd frame, no
    /// dictionary, content size the sum of `raws`). None of `raws` may be stored already.
    /// Returns their blob ids. What `fatpack prune` does with a group it keeps whole: no
    /// compression again.
    pub fn add_solid_frame(&mut self, frame: &[u8], raws: &[&[u8]]) -> Result<Vec<u32>> {
        use zstd::zstd_safe;
        self.check_poisoned()?;
        let total: u64 = raws.iter().map(|r| r.len() as u64).sum();
        let whole = frame.get(..4) == Some(&ZSTD_MAGIC[..])
            && matches!(zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == total)
            && matches!(zstd_safe::find_frame_compressed_size(frame), Ok(n) if n == frame.len())
            && zstd_safe::get_dict_id_from_frame(frame).is_none()
            && raws.len() > 1
            && total - raws.last().map_or(0, |r| r.len() as u64) <= MAX_GROUP_RAW
            && (frame.len() as u64)
                .checked_mul(MAX_ZSTD_RATIO)
                .is_some_and(|max| total <= max);
        if !whole {
            return Err(StoreError::Compression(
                "not a solid group's frame for these blobs".into(),
            ));
        }
        let fresh: Vec<(&[u8], [u8; 32])> = raws
            .iter()
            .map(|r| (*r, *blake3::hash(r).as_bytes()))
            .collect();
        let mut seen = HashSet::new();
        if fresh
            .iter()
            .any(|(_, d)| self.by_digest.contains_key(d) || !seen.insert(*d))
        {
            return Err(StoreError::Compression(
                "a solid group's blob is stored already".into(),
            ));
        }
        self.emit_group(&fresh, frame)?;
        Ok(fresh
            .iter()
            .filter_map(|(_, d)| self.by_digest.get(d).copied())
            .collect())
    }

    /// Appends an entry to module `m` whose bytes are blob `blob`, already stored (by
    /// [`StoreWriter::add_groups`]).
    pub fn add_entry_for_blob(
        &mut self,
        m: ModuleId,
        meta: EntryMeta,
        blob: u32,
    ) -> Result<EntryRef> {
        self.check_poisoned()?;
        check_attrs(&meta)?;
        let raw_len = self
            .blobs
            .get(blob as usize)
            .map(|b| b.raw_len)
            .ok_or_else(|| StoreError::Compression(format!("no blob {blob} in this store")))?;
        let rec = self
            .modules
            .get_mut(m.index())
            .ok_or(StoreError::InvalidModuleId(m.0))?;
        let index = rec.entries.len();
        rec.entries.push(EntryRec { meta, blob });
        self.raw_bytes = self.raw_bytes.saturating_add(raw_len);
        Ok(EntryRef {
            module: m,
            index,
            blob,
            deduplicated: false,
        })
    }

    /// Writes one group's frame; its blobs share it, each at its stretch of the decoded bytes.
    fn emit_group(&mut self, fresh: &[(&[u8], [u8; 32])], frame: &[u8]) -> Result<()> {
        self.pad_to_alignment()?;
        let offset = self.pos;
        self.write(frame)?;
        let mut skip = 0u64;
        for (raw, digest) in fresh {
            let id = u32::try_from(self.blobs.len()).map_err(|_| StoreError::TooLarge {
                what: "blob count",
                len: self.blobs.len() as u64,
                limit: u32::MAX.into(),
            })?;
            self.blobs.push(BlobRec {
                offset,
                stored_len: frame.len() as u64,
                raw_len: raw.len() as u64,
                codec: Codec::ZstdSolid,
                // compress_group keeps groups under MAX_GROUP_RAW.
                skip: u32::try_from(skip).map_err(|_| StoreError::TooLarge {
                    what: "solid group",
                    len: skip,
                    limit: MAX_GROUP_RAW,
                })?,
                digest: *digest,
            });
            self.by_digest.insert(*digest, id);
            skip += raw.len() as u64;
        }
        Ok(())
    }
}

/// One group's new blobs compressed: one frame if there are several and it pays, else each.
fn compress_group(level: i32, fresh: &[(&[u8], [u8; 32])]) -> Result<Written> {
    let total: u64 = fresh.iter().map(|(r, _)| r.len() as u64).sum();
    let last_start = total - fresh.last().map_or(0, |(r, _)| r.len() as u64);
    if fresh.len() > 1 && last_start <= MAX_GROUP_RAW {
        let mut raw = Vec::new();
        raw.try_reserve_exact(total as usize)
            .map_err(|_| StoreError::OutOfMemory { need: total })?;
        for (r, _) in fresh {
            raw.extend_from_slice(r);
        }
        let mut c = new_compressor(level, &[])?;
        let zerr = |e: std::io::Error| StoreError::Compression(e.to_string());
        use zstd::zstd_safe::CParameter;
        // A window over the whole group (what a group is for), matches found across it.
        let log = (64 - total.saturating_sub(1).leading_zeros()).clamp(10, MAX_WINDOW_LOG);
        c.set_parameter(CParameter::WindowLog(log)).map_err(zerr)?;
        c.set_parameter(CParameter::EnableLongDistanceMatching(true))
            .map_err(zerr)?;
        let mut frame = Vec::new();
        if compress(&mut c, &raw, &mut frame)? {
            return Ok(Written::Solid(frame));
        }
    }
    let mut c = new_compressor(level, &[])?;
    fresh
        .iter()
        .map(|(raw, _)| {
            let mut buf = Vec::new();
            Ok(compress(&mut c, raw, &mut buf)?.then_some(buf))
        })
        .collect::<Result<_>>()
        .map(Written::Each)
}
