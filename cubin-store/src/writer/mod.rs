//! Streaming store writer.

mod groups;

use std::collections::{HashMap, HashSet};
use std::io::{Seek, SeekFrom, Write};

use crate::error::{Result, StoreError};
use crate::format::*;
use crate::meta::{kind_to_wire, variant_to_wire, Codec, EntryMeta};

/// The default zstd level; kept in one place so it is easy to change.
///
/// The store is rewritten at every link, so write speed matters as much as size. On 10.5 MB
/// of nvcc 13 cubins (sm_75..sm_120, `examples/levels.rs`, one core), stored size / write
/// speed were: level 3: 10.6% / 555 MB/s, level 9: 9.3% / 92 MB/s, level 19: 8.1% / 3.9 MB/s,
/// level 22: 8.1% / 2.8 MB/s; reads were 1.2-2 GB/s at every level. Level 9 keeps most of
/// level 19's ratio at ~20x its speed; use 19 for release packaging.
pub const DEFAULT_LEVEL: i32 = 9;

/// The zstd level of a release store (solid groups, written once and downloaded many
/// times): `fatpack repack --release` and `--fatpack-release` by default, and the level
/// prune recompresses a release store's partial groups at.
pub const RELEASE_LEVEL: i32 = 19;

/// How blobs are compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// zstd level (`zstd::compression_level_range()`; negative levels are the fast modes).
    pub level: i32,
    /// A zstd dictionary (e.g. from [`train_dictionary`]) stored once in the store and used
    /// for every compressed blob.
    pub dictionary: Option<Vec<u8>>,
    /// What becomes of a frame an entry brings ([`NewEntry::frame`]).
    pub frames: FrameUse,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            level: DEFAULT_LEVEL,
            dictionary: None,
            frames: FrameUse::Keep,
        }
    }
}

/// What [`StoreWriter::add_entries`] does with a frame an entry brings (nvcc's compressed
/// entries): both choices give a store that decodes to the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FrameUse {
    /// The frame is the blob; its content is not compressed again. The fast choice: a link
    /// of NVIDIA's libraries decodes their frames only to hash them.
    #[default]
    Keep,
    /// The content is compressed at the store's level as well, and the frame is the blob only
    /// where it is not larger ([`FrameUse::frame_wins`]): never a larger store than either.
    Smaller,
}

impl FrameUse {
    /// With [`FrameUse::Smaller`], whether the caller's `frame` is the blob rather than `own`,
    /// the level's frame of the same content (`None`: the content does not compress, and a
    /// reusable frame is smaller than it). Ties go to the frame, which was there first.
    pub fn frame_wins(frame_len: usize, own: Option<usize>) -> bool {
        own.is_none_or(|own| frame_len <= own)
    }
}

/// Trains a zstd dictionary of at most `max_size` bytes from sample blobs.
///
/// zstd needs a reasonable number of samples (roughly 10+ and total size well above
/// `max_size`); otherwise this returns [`StoreError::DictionaryTraining`].
pub fn train_dictionary(samples: &[&[u8]], max_size: usize) -> Result<Vec<u8>> {
    zstd::dict::from_samples(samples, max_size)
        .map_err(|e| StoreError::DictionaryTraining(e.to_string()))
}

/// A module added to a writer; only meaningful for the writer that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModuleId(pub(crate) u32);

impl ModuleId {
    /// Position of the module in the store (insertion order).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where [`StoreWriter::add_entry`] put an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef {
    pub module: ModuleId,
    /// Position of the entry within its module.
    pub index: usize,
    /// Blob holding the entry's bytes.
    pub blob: u32,
    /// True if the bytes were already in the store and no new blob was written.
    pub deduplicated: bool,
}

/// What [`StoreWriter::finish`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSummary {
    /// Whole-store digest (see [`crate::Store::digest`]).
    pub digest: [u8; 32],
    pub modules: usize,
    pub entries: usize,
    pub blobs: usize,
    /// Sum of the raw lengths of all entries.
    pub raw_bytes: u64,
    /// Sum of the raw lengths of distinct blobs.
    pub unique_raw_bytes: u64,
    /// Sum of the stored (compressed) lengths of all blobs.
    pub stored_bytes: u64,
    /// Length of the store in bytes (header to end of index).
    pub file_len: u64,
}

struct BlobRec {
    offset: u64,
    stored_len: u64,
    raw_len: u64,
    codec: Codec,
    /// Codec 3: where the blob starts in its group's decoded bytes.
    skip: u32,
    digest: [u8; 32],
}

struct EntryRec {
    meta: EntryMeta,
    blob: u32,
}

struct ModuleRec {
    name: String,
    entries: Vec<EntryRec>,
}

/// Writes a store to `out`, streaming each blob as it is added.
///
/// The store starts at the stream position `out` has when [`StoreWriter::new`] is called; all
/// offsets inside it are relative to that point. Only the index (names, metadata, one record
/// per blob) is kept in memory.
pub struct StoreWriter<W: Write + Seek> {
    out: W,
    base: u64,
    /// Bytes written so far, relative to `base`.
    pos: u64,
    compressor: zstd::bulk::Compressor<'static>,
    /// Kept to build per-thread compressors in `add_entries`.
    level: i32,
    dict: Vec<u8>,
    compressed_codec: Codec,
    frames: FrameUse,
    dict_offset: u64,
    dict_len: u64,
    dict_digest: [u8; 32],
    modules: Vec<ModuleRec>,
    names: HashSet<String>,
    blobs: Vec<BlobRec>,
    // Only looked up, never iterated, so HashMap order cannot leak into the output.
    by_digest: HashMap<[u8; 32], u32>,
    buf: Vec<u8>,
    raw_bytes: u64,
    poisoned: bool,
}

impl<W: Write + Seek> StoreWriter<W> {
    /// Starts a store at the current position of `out` (writes a placeholder header and the
    /// dictionary, if any).
    pub fn new(mut out: W, opts: WriteOptions) -> Result<Self> {
        check_level(opts.level)?;
        let dict = opts.dictionary.unwrap_or_default();
        let compressor = new_compressor(opts.level, &dict)?;

        let base = out.stream_position()?;
        // A zeroed header until `finish`: an interrupted write never looks like a valid store.
        out.write_all(&[0u8; HEADER_LEN])?;
        let mut w = StoreWriter {
            out,
            base,
            pos: HEADER_LEN as u64,
            compressor,
            level: opts.level,
            dict: Vec::new(),
            compressed_codec: if dict.is_empty() {
                Codec::Zstd
            } else {
                Codec::ZstdDict
            },
            frames: opts.frames,
            dict_offset: 0,
            dict_len: 0,
            dict_digest: [0; 32],
            modules: Vec::new(),
            names: HashSet::new(),
            blobs: Vec::new(),
            by_digest: HashMap::new(),
            buf: Vec::new(),
            raw_bytes: 0,
            poisoned: false,
        };
        if !dict.is_empty() {
            w.pad_to_alignment()?;
            w.dict_offset = w.pos;
            w.dict_len = dict.len() as u64;
            w.dict_digest = *blake3::hash(&dict).as_bytes();
            w.write(&dict)?;
        }
        w.dict = dict;
        Ok(w)
    }

    /// Adds a module; names must be unique within a store.
    pub fn add_module(&mut self, name: &str) -> Result<ModuleId> {
        self.check_poisoned()?;
        if name.len() > MAX_NAME_LEN {
            return Err(StoreError::TooLarge {
                what: "module name",
                len: name.len() as u64,
                limit: MAX_NAME_LEN as u64,
            });
        }
        if self.names.contains(name) {
            return Err(StoreError::DuplicateModule(name.to_owned()));
        }
        let id = u32::try_from(self.modules.len()).map_err(|_| StoreError::TooLarge {
            what: "module count",
            len: self.modules.len() as u64,
            limit: u32::MAX.into(),
        })?;
        self.names.insert(name.to_owned());
        self.modules.push(ModuleRec {
            name: name.to_owned(),
            entries: Vec::new(),
        });
        Ok(ModuleId(id))
    }

    /// Appends an entry to module `m`. If a blob with the same raw content (same blake3) is
    /// already stored it is reused; otherwise the bytes are compressed and written now.
    pub fn add_entry(&mut self, m: ModuleId, meta: EntryMeta, raw: &[u8]) -> Result<EntryRef> {
        self.check_poisoned()?;
        check_attrs(&meta)?;
        let module_entries = self
            .modules
            .get(m.index())
            .map(|r| r.entries.len())
            .ok_or(StoreError::InvalidModuleId(m.0))?;
        let digest = *blake3::hash(raw).as_bytes();
        let (blob, deduplicated) = match self.by_digest.get(&digest) {
            Some(&b) => (b, true),
            None => (self.write_blob(raw, digest)?, false),
        };
        self.raw_bytes = self.raw_bytes.saturating_add(raw.len() as u64);
        if let Some(rec) = self.modules.get_mut(m.index()) {
            rec.entries.push(EntryRec { meta, blob });
        }
        Ok(EntryRef {
            module: m,
            index: module_entries,
            blob,
            deduplicated,
        })
    }

    /// Writes the index and the real header, and returns the stream positioned at the end of
    /// the store.
    pub fn finish(mut self) -> Result<(W, StoreSummary)> {
        self.check_poisoned()?;
        let index = self.encode_index()?;
        self.pad_to_alignment()?;
        let index_offset = self.pos;
        self.write(&index)?;
        let header = Header {
            magic: MAGIC,
            reserved: 0,
            major: FORMAT_MAJOR,
            // 1.1 only where it is needed: a store without solid groups is what a 1.0
            // writer wrote, byte for byte, and any 1.0 reader reads it.
            minor: if self.blobs.iter().any(|b| b.codec == Codec::ZstdSolid) {
                FORMAT_MINOR
            } else {
                0
            },
            header_len: HEADER_LEN as u32,
            file_len: self.pos,
            index_offset,
            index_len: index.len() as u64,
            dict_offset: self.dict_offset,
            dict_len: self.dict_len,
            index_digest: *blake3::hash(&index).as_bytes(),
            dict_digest: self.dict_digest,
        };
        let hbytes = header.to_bytes();
        self.out.seek(SeekFrom::Start(self.base))?;
        self.out.write_all(&hbytes)?;
        let end = self
            .base
            .checked_add(self.pos)
            .ok_or_else(|| StoreError::MalformedHeader("store end overflows u64".into()))?;
        self.out.seek(SeekFrom::Start(end))?;
        self.out.flush()?;
        let summary = StoreSummary {
            digest: store_digest(&hbytes),
            modules: self.modules.len(),
            entries: self.modules.iter().map(|m| m.entries.len()).sum(),
            blobs: self.blobs.len(),
            raw_bytes: self.raw_bytes,
            unique_raw_bytes: self.blobs.iter().map(|b| b.raw_len).sum(),
            stored_bytes: distinct_frames(self.blobs.iter().map(|b| (b.offset, b.stored_len))),
            file_len: self.pos,
        };
        Ok((self.out, summary))
    }

    /// Number of modules added so far.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }

    fn write_blob(&mut self, raw: &[u8], digest: [u8; 32]) -> Result<u32> {
        let mut buf = std::mem::take(&mut self.buf);
        let r = compress(&mut self.compressor, raw, &mut buf)
            .and_then(|compressed| self.emit_blob(raw, compressed.then_some(&buf[..]), digest));
        self.buf = buf;
        r
    }

    /// Appends one blob: `compressed` is the zstd frame, or `None` to store `raw` verbatim.
    fn emit_blob(
        &mut self,
        raw: &[u8],
        compressed: Option<&[u8]>,
        digest: [u8; 32],
    ) -> Result<u32> {
        let (codec, data) = match compressed {
            Some(c) => (self.compressed_codec, c),
            None => (Codec::Raw, raw),
        };
        self.emit_stored(data, codec, raw.len() as u64, digest)
    }

    /// Appends one blob as it is to be stored: `data` under `codec`, `raw_len` bytes decoded.
    fn emit_stored(
        &mut self,
        data: &[u8],
        codec: Codec,
        raw_len: u64,
        digest: [u8; 32],
    ) -> Result<u32> {
        let id = u32::try_from(self.blobs.len()).map_err(|_| StoreError::TooLarge {
            what: "blob count",
            len: self.blobs.len() as u64,
            limit: u32::MAX.into(),
        })?;
        self.pad_to_alignment()?;
        let offset = self.pos;
        self.write(data)?;
        self.blobs.push(BlobRec {
            offset,
            stored_len: data.len() as u64,
            raw_len,
            codec,
            skip: 0,
            digest,
        });
        self.by_digest.insert(digest, id);
        Ok(id)
    }

    fn encode_index(&self) -> Result<Vec<u8>> {
        let too_large = |what| StoreError::TooLarge {
            what,
            len: u64::MAX,
            limit: u32::MAX.into(),
        };
        let entry_count: usize = self.modules.iter().map(|m| m.entries.len()).sum();
        let module_count = u32::try_from(self.modules.len()).map_err(|_| too_large("modules"))?;
        let entry_count_u32 = u32::try_from(entry_count).map_err(|_| too_large("entries"))?;
        let blob_count = u32::try_from(self.blobs.len()).map_err(|_| too_large("blobs"))?;

        // String pool: each module's name followed by its entries' attrs, in order.
        let mut pool = Vec::new();
        let mut pool_ref = |bytes: &[u8]| -> Result<(u32, u32)> {
            let off = u32::try_from(pool.len()).map_err(|_| too_large("string pool"))?;
            let len = u32::try_from(bytes.len()).map_err(|_| too_large("string pool"))?;
            pool.extend_from_slice(bytes);
            u32::try_from(pool.len()).map_err(|_| too_large("string pool"))?;
            Ok((off, len))
        };
        let mut modules = Vec::with_capacity(self.modules.len() * MODULE_RECORD_LEN);
        let mut entries = Vec::with_capacity(entry_count * ENTRY_RECORD_LEN);
        let mut first_entry = 0u32;
        for m in &self.modules {
            let (name_off, name_len) = pool_ref(m.name.as_bytes())?;
            let count = u32::try_from(m.entries.len()).map_err(|_| too_large("entries"))?;
            let record = ModuleRecord {
                name_off,
                name_len,
                first: first_entry,
                count,
            };
            modules.extend_from_slice(&record.to_bytes());
            first_entry = first_entry
                .checked_add(count)
                .ok_or_else(|| too_large("entries"))?;
            for e in &m.entries {
                let (attrs_off, attrs_len) = pool_ref(&e.meta.attrs)?;
                let (tag, value) = kind_to_wire(e.meta.id.kind);
                let record = EntryRecord {
                    tag,
                    variant: variant_to_wire(e.meta.id.variant),
                    value,
                    arch: e.meta.id.arch,
                    blob: e.blob,
                    attrs_off,
                    attrs_len,
                    reserved: 0,
                };
                entries.extend_from_slice(&record.to_bytes());
            }
        }

        let mut index = Vec::with_capacity(
            INDEX_HEADER_LEN
                + self.blobs.len() * BLOB_RECORD_LEN
                + modules.len()
                + entries.len()
                + pool.len(),
        );
        let header = IndexHeader {
            module_count,
            entry_count: entry_count_u32,
            blob_count,
            reserved: 0,
            pool_len: pool.len() as u64,
        };
        index.extend_from_slice(&header.to_bytes());
        for b in &self.blobs {
            let record = BlobRecord {
                offset: b.offset,
                stored_len: b.stored_len,
                raw_len: b.raw_len,
                codec: b.codec.to_u8(),
                reserved: [0; 3],
                skip: b.skip,
                digest: b.digest,
            };
            index.extend_from_slice(&record.to_bytes());
        }
        index.extend_from_slice(&modules);
        index.extend_from_slice(&entries);
        index.extend_from_slice(&pool);
        Ok(index)
    }

    fn check_poisoned(&self) -> Result<()> {
        if self.poisoned {
            Err(StoreError::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Writes bytes at the end; any failure poisons the writer because the stream position is
    /// then unknown.
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let new_pos = self.pos.checked_add(bytes.len() as u64);
        match (new_pos, self.out.write_all(bytes)) {
            (Some(p), Ok(())) => {
                self.pos = p;
                Ok(())
            }
            (_, Err(e)) => {
                self.poisoned = true;
                Err(e.into())
            }
            (None, Ok(())) => {
                self.poisoned = true;
                Err(StoreError::MalformedHeader(
                    "store length overflows u64".into(),
                ))
            }
        }
    }

    fn pad_to_alignment(&mut self) -> Result<()> {
        let target = align_up(self.pos).ok_or(StoreError::Poisoned)?;
        let pad = (target - self.pos) as usize;
        if pad > 0 {
            self.write(&[0u8; ALIGN as usize][..pad])?;
        }
        Ok(())
    }
}

/// An entry's attrs must fit the index's u32 pool references (and be of sane size).
fn check_attrs(meta: &EntryMeta) -> Result<()> {
    if meta.attrs.len() > MAX_ATTRS_LEN {
        return Err(StoreError::TooLarge {
            what: "entry attrs",
            len: meta.attrs.len() as u64,
            limit: MAX_ATTRS_LEN as u64,
        });
    }
    Ok(())
}

/// Compresses `raw` into `buf` (cleared first). Returns false when the blob should be stored
/// raw instead: zstd did not shrink it, or it would exceed the reader's ratio limit.
fn compress(
    c: &mut zstd::bulk::Compressor<'static>,
    raw: &[u8],
    buf: &mut Vec<u8>,
) -> Result<bool> {
    buf.clear();
    let bound = zstd::zstd_safe::compress_bound(raw.len());
    buf.try_reserve_exact(bound)
        .map_err(|_| StoreError::OutOfMemory { need: bound as u64 })?;
    c.compress_to_buffer(raw, buf)
        .map_err(|e| StoreError::Compression(e.to_string()))?;
    // Held until the batch is written: keep only the frame, not the worst-case bound (a
    // window's bounds add up to its raw size).
    buf.shrink_to_fit();
    let (stored, raw_len) = (buf.len() as u64, raw.len() as u64);
    Ok(stored < raw_len
        && stored
            .checked_mul(MAX_ZSTD_RATIO)
            .is_some_and(|max| raw_len <= max))
}

/// A zstd level the writer takes, or the error naming the range.
fn check_level(level: i32) -> Result<()> {
    let range = zstd::compression_level_range();
    if range.contains(&level) {
        return Ok(());
    }
    Err(StoreError::InvalidLevel {
        level,
        min: *range.start(),
        max: *range.end(),
    })
}

fn new_compressor(level: i32, dict: &[u8]) -> Result<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::with_dictionary(level, dict)
        .map_err(|e| StoreError::BadDictionary(e.to_string()))?;
    let zerr = |e: std::io::Error| StoreError::Compression(e.to_string());
    // blake3 already protects content; the content size lets readers size buffers exactly.
    c.include_checksum(false).map_err(zerr)?;
    c.include_contentsize(true).map_err(zerr)?;
    if let Some((window_log, hash_log)) = cubin_tuning(level) {
        use zstd::zstd_safe::CParameter;
        c.set_parameter(CParameter::WindowLog(window_log))
            .map_err(zerr)?;
        if let Some(hash_log) = hash_log {
            c.set_parameter(CParameter::HashLog(hash_log))
                .map_err(zerr)?;
        }
    }
    Ok(c)
}

/// zstd's window and hash-table logs for one frame per cubin at `level`, where they differ
/// from zstd's own. A cubin's repeats lie megabytes apart (a large cubin is up to 28 MiB),
/// so levels 1-12 look back 2^24 bytes rather than the level's 2^19-2^22. Levels 5-12 find
/// matches in rows of a hash table (greedy, lazy, lazy2), where a table of 2^19 rows finds
/// what 2^20-2^23 find (the larger tables only cost cache misses). Over 567 of cuBLASLt
/// 13's cubins (168 MiB; BENCHMARKS.md), level 9 so tuned writes 0.996x the bytes of zstd's
/// level 9 in 1/1.31 of the time, level 3 0.972x its own at the same speed, and every level
/// from 1 to 12 gains in both. zstd shrinks both logs again for a smaller input, as it does
/// its own. The other levels (13 and up, which search binary trees, and the fast negative
/// ones) are zstd's.
fn cubin_tuning(level: i32) -> Option<(u32, Option<u32>)> {
    match level {
        1..=4 => Some((24, None)),
        5..=12 => Some((24, Some(19))),
        _ => None,
    }
}

/// One entry for [`StoreWriter::add_entries`].
#[derive(Debug, Clone)]
pub struct NewEntry<'r> {
    pub module: ModuleId,
    pub meta: EntryMeta,
    pub raw: &'r [u8],
    /// A zstd frame the caller decompressed `raw` from (nvcc's compressed fatbin entries):
    /// the blob, as [`WriteOptions::frames`] says, when it is exactly one frame that records
    /// `raw`'s length and needs no dictionary, and the store has none. The caller vouches
    /// that it decodes to `raw` (it just did); readers check the blake3.
    pub frame: Option<&'r [u8]>,
}

/// `frame` as a blob for `raw`: one whole zstd frame, content size `raw.len()`, no
/// dictionary, smaller than `raw` and within the ratio readers accept.
pub fn reusable_frame(frame: &[u8], raw: &[u8]) -> bool {
    use zstd::zstd_safe;
    frame.get(..4) == Some(&crate::format::ZSTD_MAGIC[..])
        && matches!(zstd_safe::get_frame_content_size(frame), Ok(Some(n)) if n == raw.len() as u64)
        && matches!(zstd_safe::find_frame_compressed_size(frame), Ok(n) if n == frame.len())
        && zstd_safe::get_dict_id_from_frame(frame).is_none()
        && frame.len() < raw.len()
        && (frame.len() as u64)
            .checked_mul(MAX_ZSTD_RATIO)
            .is_some_and(|max| raw.len() as u64 <= max)
}

impl<W: Write + Seek> StoreWriter<W> {
    /// Adds a batch of entries, compressing new blobs on up to `threads` threads (0 = one per
    /// available CPU).
    ///
    /// The result is byte-identical to calling [`StoreWriter::add_entry`] for each entry in
    /// order: each blob is an independent frame, and blobs are written in batch order. The
    /// batch is validated before anything is written, so a bad entry adds nothing. Memory:
    /// the compressed bytes of the batch's new blobs are held until they are written.
    pub fn add_entries(
        &mut self,
        batch: Vec<NewEntry<'_>>,
        threads: usize,
    ) -> Result<Vec<EntryRef>> {
        self.check_poisoned()?;
        for e in &batch {
            check_attrs(&e.meta)?;
            if e.module.index() >= self.modules.len() {
                return Err(StoreError::InvalidModuleId(e.module.0));
            }
        }
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
        .min(batch.len().max(1));

        let digests: Vec<[u8; 32]> = parallel_map_with(
            &batch,
            threads,
            || Ok(()),
            |_, e| Ok(*blake3::hash(e.raw).as_bytes()),
        )?;
        // First occurrence of each digest that is not stored yet becomes a compression job.
        let mut seen = HashSet::new();
        let jobs: Vec<usize> = (0..batch.len())
            .filter(|&i| {
                let d = digests.get(i).copied().unwrap_or_default();
                !self.by_digest.contains_key(&d) && seen.insert(d)
            })
            .collect();
        // The reusable frame each job's entry brings; with `FrameUse::Keep` its content needs
        // no compression.
        let no_dict = self.dict.is_empty();
        let frames: Vec<Option<&[u8]>> = jobs
            .iter()
            .map(|&i| {
                batch
                    .get(i)
                    .and_then(|e| e.frame.filter(|f| no_dict && reusable_frame(f, e.raw)))
            })
            .collect();
        let keep = self.frames == FrameUse::Keep;
        let job_raw: Vec<&[u8]> = jobs
            .iter()
            .zip(&frames)
            .filter(|(_, f)| !(keep && f.is_some()))
            .filter_map(|(&i, _)| batch.get(i).map(|e| e.raw))
            .collect();
        let compressed: Vec<Option<Vec<u8>>> = if threads <= 1 {
            job_raw
                .iter()
                .map(|raw| {
                    let mut buf = Vec::new();
                    Ok(compress(&mut self.compressor, raw, &mut buf)?.then_some(buf))
                })
                .collect::<Result<_>>()?
        } else {
            let (level, dict) = (self.level, &self.dict);
            parallel_map_with(
                &job_raw,
                threads,
                || new_compressor(level, dict),
                |c, raw: &&[u8]| {
                    let mut buf = Vec::new();
                    Ok(compress(c, raw, &mut buf)?.then_some(buf))
                },
            )?
        };
        // Back in job order: each job's frame or its own compressed bytes.
        let mut fresh = compressed.into_iter();
        let compressed: Vec<Option<std::borrow::Cow<[u8]>>> = frames
            .iter()
            .map(|f| {
                let own = match (f, keep) {
                    (Some(_), true) => None,
                    _ => fresh.next().flatten(),
                };
                match (f, own) {
                    // Written straight from the caller's bytes: no copy.
                    (Some(f), own) if FrameUse::frame_wins(f.len(), own.as_ref().map(Vec::len)) => {
                        Some(std::borrow::Cow::Borrowed(*f))
                    }
                    (_, own) => own.map(std::borrow::Cow::Owned),
                }
            })
            .collect();

        let mut out = Vec::with_capacity(batch.len());
        let mut next_job = jobs.iter().zip(compressed).peekable();
        for (i, (e, digest)) in batch.into_iter().zip(digests).enumerate() {
            let (blob, deduplicated) = match next_job.peek() {
                Some((&j, _)) if j == i => {
                    let c = next_job.next().and_then(|(_, c)| c);
                    (self.emit_blob(e.raw, c.as_deref(), digest)?, false)
                }
                _ => match self.by_digest.get(&digest) {
                    Some(&b) => (b, true),
                    // Unreachable: every digest is either stored or a job; handled anyway.
                    None => (self.write_blob(e.raw, digest)?, false),
                },
            };
            self.raw_bytes = self.raw_bytes.saturating_add(e.raw.len() as u64);
            let rec = self
                .modules
                .get_mut(e.module.index())
                .ok_or(StoreError::InvalidModuleId(e.module.0))?;
            let index = rec.entries.len();
            rec.entries.push(EntryRec { meta: e.meta, blob });
            out.push(EntryRef {
                module: e.module,
                index,
                blob,
                deduplicated,
            });
        }
        Ok(out)
    }
}

/// A blob made ready before its store is written, as [`StoreWriter::add_entries`] would
/// write it for the first entry of its content: the link compresses its device code while the
/// real linker runs, and writes the store of the modules the linker used afterwards
/// ([`StoreWriter::add_ready_entry`]).
#[derive(Debug, Clone, Copy)]
pub enum ReadyBlob<'a> {
    /// One zstd frame without a dictionary that decodes to the entry's `raw_len` bytes: one
    /// [`BlobCompressor`] made, or one [`reusable_frame`] accepts.
    Frame(&'a [u8]),
    /// The raw bytes, stored as they are ([`BlobCompressor::compress`] found no gain).
    Raw(&'a [u8]),
}

/// Compresses blobs as a store without a dictionary at `level` does: the same frames, so a
/// blob compressed ahead of its store ([`ReadyBlob`]) is the blob the writer would write.
pub struct BlobCompressor(zstd::bulk::Compressor<'static>);

impl BlobCompressor {
    pub fn new(level: i32) -> Result<Self> {
        check_level(level)?;
        Ok(BlobCompressor(new_compressor(level, &[])?))
    }

    /// `raw`'s frame, or `None` where the writer would store `raw` as it is.
    pub fn compress(&mut self, raw: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut buf = Vec::new();
        Ok(compress(&mut self.0, raw, &mut buf)?.then_some(buf))
    }
}

impl<W: Write + Seek> StoreWriter<W> {
    /// Appends an entry to module `m` whose blob the caller made ready: `digest` is the
    /// blake3 of its `raw_len` raw bytes, and `blob()` is called only when no blob of that
    /// content is stored yet. Entries added this way in the order [`StoreWriter::add_entries`]
    /// would get them give the same bytes, when each blob is what that call would have
    /// written for the first entry of its content. The caller vouches for the frame, as for
    /// [`NewEntry::frame`]; readers check the blake3. Only for stores without a dictionary.
    pub fn add_ready_entry<'b>(
        &mut self,
        m: ModuleId,
        meta: EntryMeta,
        digest: [u8; 32],
        raw_len: u64,
        blob: impl FnOnce() -> Result<ReadyBlob<'b>>,
    ) -> Result<EntryRef> {
        self.check_poisoned()?;
        check_attrs(&meta)?;
        if !self.dict.is_empty() {
            return Err(StoreError::Compression(
                "a blob compressed ahead cannot go into a store with a dictionary".into(),
            ));
        }
        let index = self
            .modules
            .get(m.index())
            .map(|r| r.entries.len())
            .ok_or(StoreError::InvalidModuleId(m.0))?;
        let (blob, deduplicated) = match self.by_digest.get(&digest) {
            Some(&b) => (b, true),
            None => {
                let (data, codec) = match blob()? {
                    ReadyBlob::Frame(f) => (f, self.compressed_codec),
                    ReadyBlob::Raw(r) if r.len() as u64 == raw_len => (r, Codec::Raw),
                    ReadyBlob::Raw(r) => {
                        return Err(StoreError::Compression(format!(
                            "a raw blob of {} bytes given for {raw_len}",
                            r.len()
                        )))
                    }
                };
                (self.emit_stored(data, codec, raw_len, digest)?, false)
            }
        };
        self.raw_bytes = self.raw_bytes.saturating_add(raw_len);
        if let Some(rec) = self.modules.get_mut(m.index()) {
            rec.entries.push(EntryRec { meta, blob });
        }
        Ok(EntryRef {
            module: m,
            index,
            blob,
            deduplicated,
        })
    }
}

/// Maps `f` over `items` on `threads` scoped threads, preserving order, with per-thread state
/// from `init` (e.g. a zstd context).
fn parallel_map_with<T: Sync, R: Send, S>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> Result<S> + Sync,
    f: impl Fn(&mut S, &T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    if threads <= 1 || items.len() <= 1 {
        let mut state = init()?;
        return items.iter().map(|t| f(&mut state, t)).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<R>>>> =
        Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut state = match init() {
                    Ok(st) => st,
                    Err(e) => {
                        // Report the failure in the first unclaimed slot.
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if let (Ok(mut r), true) = (results.lock(), i < items.len()) {
                            if let Some(slot) = r.get_mut(i) {
                                *slot = Some(Err(e));
                            }
                        }
                        return;
                    }
                };
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(&mut state, item);
                    if let Ok(mut g) = results.lock() {
                        if let Some(slot) = g.get_mut(i) {
                            *slot = Some(r);
                        }
                    }
                }
            });
        }
    });
    let results = results
        .into_inner()
        .map_err(|_| StoreError::Compression("a compression thread panicked".into()))?;
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(StoreError::Compression("compression job lost".into()))))
        .collect()
}
