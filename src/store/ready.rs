//! The link's store made ready while the real linker runs: the store does not depend on the
//! linker's output, only on which modules it used. [`prepare`] decodes, hashes and compresses
//! the entries of every module the rewrite took out, on the CPUs the linker leaves idle, and
//! keeps each blob's bytes in a temp file; once the linker is done, [`write_ready`] writes the
//! store of the modules it used, in its order, copying those bytes. The result is the store
//! [`super::write_store`] writes from the same modules, byte for byte: each blob is the one
//! [`cubin_store::StoreWriter::add_entries`] would write for the first entry of its content in
//! the linker's order (nvcc's frame of that entry when it is kept, else the frame of the
//! content at the link's level).

use std::collections::HashMap;
use std::io::{Seek, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use cubin_store::{
    BlobCompressor, EntryMeta, ReadyBlob, StoreError, StoreSummary, StoreWriter, WriteOptions,
};

use super::{entry_meta, nvcc_frame, payload, read_module, window_full, PackError};
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
    /// The blob of each content whose entries do not all bring nvcc's frame: compressed at
    /// the link's level, or raw.
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
    fn keep(&mut self, bytes: &[u8], frame: bool) -> Result<Kept, PackError> {
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

/// Makes every module of `modules` ready at `level` (nvcc's zstd frames kept with
/// `reuse_frames`), a window at a time, on every thread the link may use but one while the
/// real linker runs, and on all of them once it is done; the temp file goes into `dir`.
pub fn prepare(
    modules: &[Extracted],
    maps: &Maps,
    level: i32,
    reuse_frames: bool,
    dir: &std::path::Path,
    signals: &Signals,
) -> Result<Ready, PackError> {
    let started = std::time::Instant::now();
    // Fails here, not after the link, on a level the writer would refuse.
    BlobCompressor::new(level)?;
    let file = tempfile::tempfile_in(dir).map_err(StoreError::Io)?;
    let mut spill = Spill {
        w: std::io::BufWriter::with_capacity(1 << 20, file.try_clone().map_err(StoreError::Io)?),
        len: 0,
    };
    let mut ready = HashMap::with_capacity(modules.len());
    let mut own: HashMap<[u8; 32], Kept> = HashMap::new();
    // nvcc's frames by content and frame: two entries of one content may bring different
    // frames, and the store keeps the one of whichever comes first in the linker's order.
    let mut nvcc: HashMap<([u8; 32], [u8; 32]), Kept> = HashMap::new();
    let mut i = 0;
    while i < modules.len() {
        if signals.cancel.load(Ordering::Relaxed) {
            return Err(PackError::Cancelled);
        }
        let wanted = |m: &Extracted| signals.used.get().is_none_or(|u| u.contains(&m.module));
        let mut window: Vec<&Extracted> = Vec::new();
        let mut bytes = 0u64;
        while let Some(m) = modules.get(i) {
            if !wanted(m) {
                i += 1;
                continue;
            }
            if window_full(window.len(), bytes, m.len) {
                break;
            }
            bytes += m.len;
            window.push(m);
            i += 1;
        }
        if window.is_empty() {
            break;
        }
        let parsed = window
            .iter()
            .map(|m| read_module(m, maps))
            .collect::<Result<Vec<_>, _>>()?;
        let flat: Vec<(&Entry, &Extracted)> = parsed
            .iter()
            .zip(&window)
            .flat_map(|(f, m)| f.entries.iter().map(move |e| (e, *m)))
            .collect();
        let linking = signals.linking.load(Ordering::Relaxed);
        let decoded = map(linking, &flat, |&(e, m)| {
            let raw = payload(e, m)?;
            let digest = *blake3::hash(&raw).as_bytes();
            let frame =
                nvcc_frame(e, reuse_frames).filter(|f| cubin_store::reusable_frame(f, &raw));
            let frame_digest = frame.map(|f| *blake3::hash(f).as_bytes());
            Ok((raw, digest, frame, frame_digest))
        })
        .into_iter()
        .collect::<Result<Vec<_>, PackError>>()?;
        // Contents first seen without a frame of nvcc's: compressed.
        let mut jobs: Vec<usize> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (k, (_, digest, frame, _)) in decoded.iter().enumerate() {
            if frame.is_none() && !own.contains_key(digest) && seen.insert(*digest) {
                jobs.push(k);
            }
        }
        let compressed = map(linking, &jobs, |&k| compress(level, &decoded[k].0));
        for (&k, c) in jobs.iter().zip(compressed) {
            let kept = match c? {
                Some(frame) => spill.keep(&frame, true)?,
                None => spill.keep(&decoded[k].0, false)?,
            };
            own.insert(decoded[k].1, kept);
        }
        let mut entries = decoded.into_iter().zip(&flat);
        for (m, f) in window.iter().zip(&parsed) {
            let mut list = Vec::with_capacity(f.entries.len());
            for ((raw, digest, frame, frame_digest), &(e, _)) in
                entries.by_ref().take(f.entries.len())
            {
                let nvcc = match (frame, frame_digest) {
                    (Some(frame), Some(fd)) => Some(match nvcc.get(&(digest, fd)) {
                        Some(&k) => k,
                        None => {
                            let k = spill.keep(frame, true)?;
                            nvcc.insert((digest, fd), k);
                            k
                        }
                    }),
                    _ => None,
                };
                list.push(ReadyEntry {
                    meta: entry_meta(e),
                    digest,
                    raw_len: raw.len() as u64,
                    nvcc,
                });
            }
            ready.insert(m.module.clone(), list);
        }
        for m in window {
            maps.release(&m.file, m.file_offset, m.len);
        }
    }
    spill.w.flush().map_err(StoreError::Io)?;
    Ok(Ready {
        modules: ready,
        own,
        file,
        seconds: started.elapsed().as_secs_f64(),
        kept_bytes: spill.len,
    })
}

/// [`crate::parallel::map_ordered`], beside the linker while it runs.
fn map<T: Sync, R: Send>(linking: bool, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if linking {
        crate::parallel::map_ordered_beside(items, f)
    } else {
        crate::parallel::map_ordered(items, f)
    }
}

impl Ready {
    /// How many modules were made ready.
    pub fn module_count(&self) -> usize {
        self.modules.len()
    }
}

/// `raw`'s blob at `level` (`None`: stored raw), with a compressor kept per thread.
fn compress(level: i32, raw: &[u8]) -> Result<Option<Vec<u8>>, PackError> {
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
) -> Result<(W, StoreSummary), PackError> {
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
    for name in used {
        let entries = ready
            .modules
            .get(*name)
            .ok_or_else(|| StoreError::Compression(format!("module {name} was not made ready")))?;
        let id = w.add_module(name)?;
        for e in entries {
            let kept = e.nvcc.or_else(|| ready.own.get(&e.digest).copied());
            w.add_ready_entry(id, e.meta.clone(), e.digest, e.raw_len, || match kept {
                Some(k) => bytes(k),
                None => Err(StoreError::Compression(format!(
                    "module {name}: a blob made ready is missing"
                ))),
            })?;
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
    /// (the same object twice), nvcc's zstd frames kept or compressed again, and at two
    /// levels.
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
        for (level, reuse) in [(9, true), (9, false), (3, true)] {
            let ready =
                prepare(&all, &maps, level, reuse, dir.path(), &Signals::default()).unwrap();
            assert!(ready.kept_bytes > 0);
            let opts = || WriteOptions {
                level,
                dictionary: None,
            };
            for order in &orders {
                let used: Vec<&Extracted> = order.iter().map(|&k| &all[k]).collect();
                let names: Vec<&str> = used.iter().map(|m| m.module.as_str()).collect();
                let (want, _) = super::super::write_store(
                    std::io::Cursor::new(Vec::new()),
                    &used,
                    opts(),
                    &maps,
                    reuse,
                    &mut |_| {},
                )
                .unwrap();
                let (got, summary) =
                    write_ready(std::io::Cursor::new(Vec::new()), &names, &ready, opts()).unwrap();
                assert!(
                    got.get_ref() == want.get_ref(),
                    "level {level}, reuse {reuse}, order {order:?}: the stores differ"
                );
                assert_eq!(summary.modules, used.len());
            }
        }
        // Once the linker has named the modules it used, only those are made ready.
        let signals = Signals::default();
        let _ = signals
            .used
            .set([all[2].module.clone()].into_iter().collect());
        let ready = prepare(&all, &maps, 9, true, dir.path(), &signals).unwrap();
        assert_eq!(ready.module_count(), 1);
        // A failed link stops the preparation; a module it did not make ready is an error.
        let stop = Signals::default();
        stop.cancel.store(true, Ordering::Relaxed);
        assert!(matches!(
            prepare(&all, &maps, 9, true, dir.path(), &stop),
            Err(PackError::Cancelled)
        ));
        let ready = prepare(&all[..1], &maps, 9, true, dir.path(), &Signals::default()).unwrap();
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
