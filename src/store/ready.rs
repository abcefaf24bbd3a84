//! The link's store made ready while the real linker runs: the store does not depend on the
//! linker's output, only on which modules it used. [`prepare`] decodes, hashes and compresses
//! the entries of every module the rewrite took out, on the CPUs the linker leaves idle, and
//! keeps each blob's bytes in a temp file; once the linker is done, [`write_ready`] writes the
//! store of the modules it used, in its order, copying those bytes. The result is the store
//! [`super::write_store`] writes from the same modules, byte for byte: each blob is the one
//! [`cubin_store::StoreWriter::add_entries`] would write for the first entry of its content in
//! the linker's order (nvcc's frame of that entry when it is kept, else the frame of the
//! content at the link's level).

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::io::{Seek, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use cubin_store::{
    BlobCompressor, EntryMeta, FrameUse, ReadyBlob, StoreError, StoreSummary, StoreWriter,
    WriteOptions,
};

use super::{entry_meta, module_bytes, nvcc_frame, payload, StoreBuildError, WINDOW_BYTES};
use crate::fatbin::Entry;
use crate::inputs::Maps;
use crate::rewrite::Extracted;

/// Bytes kept in the temp file: where, how long, and whether they are a frame or raw bytes.
#[derive(Debug, Clone, Copy)]
struct Kept {
    at: u64,
    len: u64,
    frame: bool,
}

/// One entry of a module, ready to be stored.
struct ReadyEntry {
    meta: EntryMeta,
    digest: [u8; 32],
    raw_len: u64,
    /// nvcc's own frame of this entry, kept as its blob where it comes first.
    nvcc: Option<Kept>,
}

/// Every extracted module's entries, ready; the blobs' bytes in an unnamed temp file.
pub struct Ready {
    modules: HashMap<String, Vec<ReadyEntry>>,
    /// The blob of each content whose entries do not all bring nvcc's frame, or (with
    /// [`FrameUse::Smaller`]) whose level frame is smaller than one they bring: compressed
    /// at the link's level, or raw.
    own: HashMap<[u8; 32], Kept>,
    file: std::fs::File,
    /// For `--fatpack-verbose`: seconds the preparation took, and bytes it kept.
    pub seconds: f64,
    pub kept_bytes: u64,
}

/// Appends to the temp file, remembering where each piece went.
struct Spill {
    w: std::io::BufWriter<std::fs::File>,
    len: u64,
}

impl Spill {
    fn keep(&mut self, bytes: &[u8], frame: bool) -> Result<Kept, StoreBuildError> {
        self.w.write_all(bytes).map_err(StoreError::Io)?;
        let k = Kept {
            at: self.len,
            len: bytes.len() as u64,
            frame,
        };
        self.len += k.len;
        Ok(k)
    }
}

/// What the link tells the preparation while it runs.
#[derive(Debug, Default)]
pub struct Signals {
    /// The link failed: stop at the next window.
    pub cancel: AtomicBool,
    /// The real linker is running on a CPU of its own: leave it that one.
    pub linking: AtomicBool,
    /// The modules the linker used, once it is done: the others are not made ready any more
    /// (a link that pulls few members of large archives waits for no more than their work).
    pub used: std::sync::OnceLock<std::collections::HashSet<String>>,
}

/// Makes every module of `modules` ready at `level` (nvcc's zstd frames used as `frames`
/// says), a window at a time, on every thread the link may use but one while the
/// real linker runs, and on all of them once it is done; the temp file goes into `dir`.
pub fn prepare(
    modules: &[Extracted],
    maps: &Maps,
    level: i32,
    frames: FrameUse,
    dir: &std::path::Path,
    signals: &Signals,
) -> Result<Ready, StoreBuildError> {
    prepare_in(
        Pieces::new(modules, maps),
        WINDOW_BYTES,
        level,
        frames,
        dir,
        signals,
    )
}

/// [`prepare`], the entries `pieces` gives streamed through every thread the link may use,
/// with at most `cap` bytes of them read and not yet stored (unless one entry is larger).
fn prepare_in(
    mut pieces: Pieces<'_>,
    cap: u64,
    level: i32,
    frames: FrameUse,
    dir: &std::path::Path,
    signals: &Signals,
) -> Result<Ready, StoreBuildError> {
    let (modules, maps) = (pieces.modules, pieces.maps);
    let started = std::time::Instant::now();
    // Fails here, not after the link, on a level the writer would refuse.
    BlobCompressor::new(level)?;
    let file = tempfile::tempfile_in(dir).map_err(StoreError::Io)?;
    let mut spill = Spill {
        w: std::io::BufWriter::with_capacity(1 << 20, file.try_clone().map_err(StoreError::Io)?),
        len: 0,
    };
    let mut ready = HashMap::with_capacity(modules.len());
    let mut blobs = Blobs::default();
    // Each module's entries so far (a container may hold hundreds of MB, a large
    // translation unit built for every GPU: it is read an entry at a time).
    let mut lists: HashMap<usize, Vec<ReadyEntry>> = HashMap::new();
    // Contents some thread compresses: each once, whichever of its entries comes first.
    let claimed: std::sync::Mutex<std::collections::HashSet<[u8; 32]>> = Default::default();
    let threads = crate::parallel::threads();
    let active = || match signals.linking.load(Ordering::Relaxed) {
        true => threads.saturating_sub(1),
        false => threads,
    };
    let wanted = |m: &Extracted| signals.used.get().is_none_or(|u| u.contains(&m.module));
    let source = move || {
        if signals.cancel.load(Ordering::Relaxed) {
            return Err(StoreBuildError::Cancelled);
        }
        Ok(pieces.next(&wanted)?.map(|p| {
            let weight = p.len as u64;
            (p, weight)
        }))
    };
    let work = |p: Piece| -> Result<(Piece, Option<Got>), StoreBuildError> {
        if p.len == 0 {
            return Ok((p, None));
        }
        let m = &modules[p.module];
        let entry = read_entry(m, maps, &p)?;
        let (digest, decoded, frame_digest) = {
            let raw = payload(&entry, m)?;
            let digest = *blake3::hash(&raw).as_bytes();
            let frame = nvcc_frame(&entry).filter(|f| cubin_store::reusable_frame(f, &raw));
            let frame_digest = frame.map(|f| *blake3::hash(f).as_bytes());
            let decoded = match raw {
                std::borrow::Cow::Borrowed(b) if b.len() == entry.stored.len() => None,
                other => Some(other.into_owned()),
            };
            (digest, decoded, frame_digest)
        };
        let mut got = Got {
            entry,
            decoded,
            digest,
            frame_digest,
            packed: None,
        };
        let first = || {
            let mut c = claimed.lock().unwrap_or_else(|e| e.into_inner());
            c.insert(digest)
        };
        let compare = frames == FrameUse::Smaller;
        if (got.frame_digest.is_none() || compare) && first() {
            got.packed = Some(compress(level, got.raw())?);
        }
        Ok((p, Some(got)))
    };
    let consume =
        |done: Result<(Piece, Option<Got>), StoreBuildError>| -> Result<(), StoreBuildError> {
            let (p, got) = done?;
            let m = &modules[p.module];
            if let Some(mut done) = got {
                let nvcc = blobs.take(&mut done, level, frames, &mut spill)?;
                lists.entry(p.module).or_default().push(ReadyEntry {
                    meta: entry_meta(&done.entry),
                    digest: done.digest,
                    raw_len: done.raw().len() as u64,
                    nvcc,
                });
                maps.release(&m.file, m.file_offset + p.at as u64, p.len as u64);
            }
            if p.last {
                ready.insert(
                    m.module.clone(),
                    lists.remove(&p.module).unwrap_or_default(),
                );
            }
            Ok(())
        };
    crate::parallel::stream_ordered(cap, &active, source, work, consume)?;
    spill.w.flush().map_err(StoreError::Io)?;
    Ok(Ready {
        modules: ready,
        own: blobs.own,
        file,
        seconds: started.elapsed().as_secs_f64(),
        kept_bytes: spill.len,
    })
}

/// The blobs kept in the temp file so far.
#[derive(Default)]
struct Blobs {
    /// nvcc's frames by content and frame: two entries of one content may bring different
    /// frames, and the store keeps the one of whichever comes first in the linker's order.
    nvcc: HashMap<([u8; 32], [u8; 32]), Kept>,
    /// [`Ready::own`].
    own: HashMap<[u8; 32], Kept>,
    /// With [`FrameUse::Smaller`]: the length of each content's level frame once compared
    /// with a frame of nvcc's (None: stored raw), so later entries of it need no compression
    /// to know whether theirs is smaller.
    own_len: HashMap<[u8; 32], Option<usize>>,
}

impl Blobs {
    /// Keeps what the store may need of entry `done` (taken in module order) in the temp
    /// file; returns where nvcc's frame of it went, if it brings one.
    fn take(
        &mut self,
        done: &mut Got,
        level: i32,
        frames: FrameUse,
        spill: &mut Spill,
    ) -> Result<Option<Kept>, StoreBuildError> {
        let frame = done
            .frame_digest
            .and_then(|fd| Some((nvcc_frame(&done.entry)?, fd)));
        let Some((frame, fd)) = frame else {
            // Contents first seen without a frame of nvcc's: compressed. Where another entry
            // of the same bytes was compressed first, its blob went with it; this one is
            // compressed here (the same bytes either way).
            if let Slot::Vacant(slot) = self.own.entry(done.digest) {
                let raw = done.decoded.as_deref().unwrap_or(&done.entry.stored);
                slot.insert(match level_frame(&mut done.packed, level, raw)? {
                    Some(frame) => spill.keep(&frame, true)?,
                    None => spill.keep(raw, false)?,
                });
            }
            return Ok(None);
        };
        // A frame larger than the content's level frame is never the blob, whichever entry
        // comes first in the linker's order: it is not kept.
        if frames == FrameUse::Smaller {
            let raw = done.decoded.as_deref().unwrap_or(&done.entry.stored);
            let content = (done.digest, raw);
            if !self.frame_wins(frame.len(), content, &mut done.packed, level, spill)? {
                return Ok(None);
            }
        }
        Ok(Some(match self.nvcc.get(&(done.digest, fd)) {
            Some(&k) => k,
            None => {
                let k = spill.keep(frame, true)?;
                self.nvcc.insert((done.digest, fd), k);
                k
            }
        }))
    }

    /// With [`FrameUse::Smaller`], for an entry that brings nvcc's frame of `frame_len`
    /// bytes of `content` (digest, raw bytes): whether that frame is not larger than the
    /// content's level frame (`packed`, where the entry's thread compressed it, else
    /// compressed here). Where it is larger, the level frame goes into `own`, the blob of
    /// whichever entry of the content comes first in the linker's order.
    fn frame_wins(
        &mut self,
        frame_len: usize,
        (digest, raw): ([u8; 32], &[u8]),
        packed: &mut Option<Option<Vec<u8>>>,
        level: i32,
        spill: &mut Spill,
    ) -> Result<bool, StoreBuildError> {
        let slot = match self.own.entry(digest) {
            Slot::Occupied(o) => {
                let o = o.get();
                return Ok(FrameUse::frame_wins(
                    frame_len,
                    o.frame.then_some(o.len as usize),
                ));
            }
            Slot::Vacant(slot) => slot,
        };
        let len = match self.own_len.get(&digest) {
            Some(&len) => len,
            None => {
                let p = level_frame(packed, level, raw)?;
                let len = p.as_ref().map(Vec::len);
                self.own_len.insert(digest, len);
                *packed = Some(p);
                len
            }
        };
        if FrameUse::frame_wins(frame_len, len) {
            return Ok(true);
        }
        // Compressed again only where another entry's frame was compared with it first.
        if let Some(packed) = level_frame(packed, level, raw)? {
            slot.insert(spill.keep(&packed, true)?);
        }
        Ok(false)
    }
}

/// `raw`'s blob at `level` (`None`: stored raw): the one its entry's thread made (`packed`,
/// taken), else made now.
fn level_frame(
    packed: &mut Option<Option<Vec<u8>>>,
    level: i32,
    raw: &[u8],
) -> Result<Option<Vec<u8>>, StoreBuildError> {
    match packed.take() {
        Some(p) => Ok(p),
        None => compress(level, raw),
    }
}

/// One entry read, decoded, hashed and (where its content is to be compressed and no other
/// entry of it was first) compressed.
struct Got {
    entry: Entry,
    /// The payload decoded, where nvcc compressed it (else it is the entry's own bytes).
    decoded: Option<Vec<u8>>,
    digest: [u8; 32],
    /// The digest of nvcc's frame, where it is kept.
    frame_digest: Option<[u8; 32]>,
    /// The content's blob: `Some(None)` stored raw.
    packed: Option<Option<Vec<u8>>>,
}

impl Got {
    /// The payload, decoded.
    fn raw(&self) -> &[u8] {
        self.decoded.as_deref().unwrap_or(&self.entry.stored)
    }
}

/// One entry of a module, where it lies in the module's container.
struct Piece {
    /// Index of the module in the list being made ready.
    module: usize,
    at: usize,
    len: usize,
    /// The module's last entry.
    last: bool,
}

/// The entries of the modules to make ready, one at a time.
struct Pieces<'a> {
    modules: &'a [Extracted],
    maps: &'a Maps,
    /// The next module to look at.
    next: usize,
    /// What is left of the module being taken apart.
    left: std::collections::VecDeque<Piece>,
}

impl<'a> Pieces<'a> {
    fn new(modules: &'a [Extracted], maps: &'a Maps) -> Self {
        Pieces {
            modules,
            maps,
            next: 0,
            left: Default::default(),
        }
    }

    /// The next entry, in module order; modules not `wanted` are skipped, and a module
    /// without entries gives one piece of no bytes. None when all are taken.
    fn next(
        &mut self,
        wanted: &dyn Fn(&Extracted) -> bool,
    ) -> Result<Option<Piece>, StoreBuildError> {
        while self.left.is_empty() {
            let Some(m) = self.modules.get(self.next) else {
                return Ok(None);
            };
            let i = self.next;
            self.next += 1;
            if !wanted(m) {
                continue;
            }
            self.left = self.spans(i)?;
            if self.left.is_empty() {
                return Ok(Some(Piece {
                    module: i,
                    at: 0,
                    len: 0,
                    last: true,
                }));
            }
        }
        Ok(self.left.pop_front())
    }

    /// Where the entries of module `i` are, from its container's headers.
    fn spans(&self, i: usize) -> Result<std::collections::VecDeque<Piece>, StoreBuildError> {
        let m = &self.modules[i];
        let map = self.maps.get(&m.file)?;
        let bytes = module_bytes(m, &map)?;
        let release = |at, len| self.maps.release(&m.file, at, len);
        let mut walk = crate::inputs::WalkRelease::new(m.file_offset, &release);
        let spans =
            crate::fatbin::entry_spans(bytes, 0, &mut |p| walk.walked(p)).map_err(|_| {
                StoreBuildError::Changed {
                    origin: m.origin.clone(),
                }
            })?;
        // Walking the headers mapped runs of the container: let them go until read.
        self.maps.release(&m.file, m.file_offset, m.len);
        let n = spans.len();
        Ok(spans
            .into_iter()
            .enumerate()
            .map(|(k, (at, len))| Piece {
                module: i,
                at,
                len,
                last: k + 1 == n,
            })
            .collect())
    }
}

/// The entry `p` of module `m`, copied out of its input.
fn read_entry(m: &Extracted, maps: &Maps, p: &Piece) -> Result<Entry, StoreBuildError> {
    let map = maps.get(&m.file)?;
    let bytes = module_bytes(m, &map)?;
    crate::fatbin::entry_at(bytes, p.at, p.len, 0).map_err(|_| StoreBuildError::Changed {
        origin: m.origin.clone(),
    })
}

impl Ready {
    /// How many modules were made ready.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }
}

/// `raw`'s blob at `level` (`None`: stored raw), with a compressor kept per thread.
fn compress(level: i32, raw: &[u8]) -> Result<Option<Vec<u8>>, StoreBuildError> {
    thread_local! {
        static C: std::cell::RefCell<Option<(i32, BlobCompressor)>> =
            const { std::cell::RefCell::new(None) };
    }
    C.with(|c| {
        let mut c = c.borrow_mut();
        if !matches!(&*c, Some((l, _)) if *l == level) {
            *c = Some((level, BlobCompressor::new(level)?));
        }
        match c.as_mut() {
            Some((_, comp)) => Ok(comp.compress(raw)?),
            None => unreachable!("set just above"),
        }
    })
}

/// The store of `used` (module names, in the linker's order) from what [`prepare`] made, into
/// `out`: nothing is decoded or compressed again.
pub fn write_ready<W: Write + Seek>(
    out: W,
    used: &[&str],
    ready: &Ready,
    opts: WriteOptions,
) -> Result<(W, StoreSummary), StoreBuildError> {
    // SAFETY: the temp file is unnamed and this process's own: nothing else can change it
    // while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&ready.file) }.map_err(StoreError::Io)?;
    let bytes = |k: Kept| -> Result<ReadyBlob<'_>, StoreError> {
        let b = usize::try_from(k.at)
            .ok()
            .and_then(|at| map.get(at..at.checked_add(k.len as usize)?))
            .ok_or_else(|| StoreError::Compression("a blob made ready is missing".into()))?;
        Ok(if k.frame {
            ReadyBlob::Frame(b)
        } else {
            ReadyBlob::Raw(b)
        })
    };
    let mut w = StoreWriter::new(out, opts)?;
    // Bytes written since the map's pages last left the resident set.
    let mut unreleased = 0u64;
    for name in used {
        let entries = ready
            .modules
            .get(*name)
            .ok_or_else(|| StoreError::Compression(format!("module {name} was not made ready")))?;
        let id = w.add_module(name)?;
        for e in entries {
            // An entry brings nvcc's frame only where that frame is the content's blob, as
            // `StoreWriter::add_entries` chooses it (with `FrameUse::Smaller`, [`prepare`]
            // let go of every frame larger than the level's).
            let kept = e.nvcc.or_else(|| ready.own.get(&e.digest).copied());
            let r = w.add_ready_entry(id, e.meta.clone(), e.digest, e.raw_len, || match kept {
                Some(k) => bytes(k),
                None => Err(StoreError::Compression(format!(
                    "module {name}: a blob made ready is missing"
                ))),
            })?;
            // Written once, its pages may leave the resident set, or writing the store would
            // leave the whole of it resident once more. Every RELEASE_STEP bytes the whole map
            // is let go at once, not each blob: each release is a system call that every CPU
            // this process's threads ran on must hear of (a TLB flush), and static cuBLAS
            // writes 666 blobs after the link.
            if let (Some(k), false) = (kept, r.deduplicated) {
                unreleased += k.len;
                if unreleased >= crate::inputs::RELEASE_STEP {
                    crate::inputs::let_go(&map, 0, map.len() as u64);
                    unreleased = 0;
                }
            }
        }
    }
    Ok(w.finish()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every container of the fixture objects, as the rewrite extracts them.
    fn extracted(files: &[&str]) -> Vec<Extracted> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvcc13");
        let mut out = Vec::new();
        for f in files {
            let scanned = crate::inputs::scan(&dir.join(f)).unwrap();
            for s in scanned.sections {
                for (i, &(old, len)) in s.spans.iter().enumerate() {
                    out.push(Extracted {
                        module: format!("{f}#{}#{i}", s.section_index),
                        origin: f.to_string(),
                        section: s.section.clone(),
                        file: s.file.clone(),
                        file_offset: s.file_offset + old,
                        len,
                    });
                }
            }
        }
        out
    }

    /// The store written from what was made ready equals the store written after the link,
    /// byte for byte: for any subset of the modules in any order, with repeated contents
    /// (the same object twice), nvcc's zstd frames kept or kept only where smaller, and at
    /// three levels. Keeping the smaller frame never gives a larger store than keeping them
    /// all, and at level 19 a smaller one (the fixtures' frames are nvcc's default mode).
    #[test]
    fn a_ready_store_is_the_store_written_after_the_link() {
        let mut all = extracted(&[
            "kernels.o",
            "other.o",
            "kernels_size.o",
            "kernels_none.o",
            "kernels_all.o",
        ]);
        // The same containers again under other names: contents stored once.
        let again: Vec<Extracted> = extracted(&["kernels_size.o", "kernels.o"])
            .into_iter()
            .map(|mut e| {
                e.module.push_str("~again");
                e
            })
            .collect();
        all.extend(again);
        assert!(all.len() >= 6, "{} modules", all.len());
        let maps = Maps::default();
        let dir = tempfile::tempdir().unwrap();
        let orders: Vec<Vec<usize>> = vec![
            (0..all.len()).collect(),
            (0..all.len()).rev().collect(),
            (0..all.len()).step_by(2).collect(),
            vec![all.len() - 1, 0, 2],
            // nvcc's frames first, then the same contents without them.
            vec![2, 0, 3, 1],
        ];
        // Windows of whole modules, and of one entry each (as a container larger than a
        // window is read): the same store.
        let mut sizes = HashMap::new();
        for (level, frames, limit) in [
            (9, FrameUse::Keep, WINDOW_BYTES),
            (9, FrameUse::Smaller, WINDOW_BYTES),
            (3, FrameUse::Keep, WINDOW_BYTES),
            (9, FrameUse::Keep, 1),
            (19, FrameUse::Keep, WINDOW_BYTES),
            (19, FrameUse::Smaller, WINDOW_BYTES),
            (19, FrameUse::Smaller, 1),
            (1, FrameUse::Smaller, WINDOW_BYTES),
        ] {
            let pieces = Pieces::new(&all, &maps);
            let ready = prepare_in(
                pieces,
                limit,
                level,
                frames,
                dir.path(),
                &Signals::default(),
            )
            .unwrap();
            assert!(ready.kept_bytes > 0);
            let opts = || WriteOptions {
                level,
                dictionary: None,
                frames,
            };
            for order in &orders {
                let used: Vec<&Extracted> = order.iter().map(|&k| &all[k]).collect();
                let names: Vec<&str> = used.iter().map(|m| m.module.as_str()).collect();
                let (want, _) = super::super::write_store(
                    std::io::Cursor::new(Vec::new()),
                    &used,
                    opts(),
                    &maps,
                    &mut |_| {},
                )
                .unwrap();
                let (got, summary) =
                    write_ready(std::io::Cursor::new(Vec::new()), &names, &ready, opts()).unwrap();
                assert!(
                    got.get_ref() == want.get_ref(),
                    "level {level}, {frames:?}, windows of {limit} bytes, order {order:?}: the stores differ"
                );
                assert_eq!(summary.modules, used.len());
                sizes.insert((level, frames, order.clone()), got.get_ref().len());
            }
        }
        for order in &orders {
            let size = |level, frames| sizes[&(level, frames, order.clone())];
            assert!(size(9, FrameUse::Smaller) <= size(9, FrameUse::Keep));
            assert!(
                size(19, FrameUse::Smaller) < size(19, FrameUse::Keep),
                "{order:?}"
            );
        }
        // Once the linker has named the modules it used, only those are made ready.
        let signals = Signals::default();
        let _ = signals
            .used
            .set([all[2].module.clone()].into_iter().collect());
        let ready = prepare(&all, &maps, 9, FrameUse::Keep, dir.path(), &signals).unwrap();
        assert_eq!(ready.module_count(), 1);
        // A failed link stops the preparation; a module it did not make ready is an error.
        let stop = Signals::default();
        stop.cancel.store(true, Ordering::Relaxed);
        assert!(matches!(
            prepare(&all, &maps, 9, FrameUse::Keep, dir.path(), &stop),
            Err(StoreBuildError::Cancelled)
        ));
        let ready = prepare(
            &all[..1],
            &maps,
            9,
            FrameUse::Keep,
            dir.path(),
            &Signals::default(),
        )
        .unwrap();
        let other = all[1].module.as_str();
        assert!(write_ready(
            std::io::Cursor::new(Vec::new()),
            &[other],
            &ready,
            WriteOptions::default()
        )
        .is_err());
    }
}
