//! From the fatbin model to the store: each extracted container becomes a store module, each
//! entry a blob of its decompressed payload, with the entry's original header kept in `attrs`
//! so the runtime can rebuild a fatbin nvcc's runtime accepts.

pub mod groups;
pub mod ready;

use std::borrow::Cow;
use std::io::{Seek, Write};

use cubin_store::{EntryMeta, NewEntry, StoreSummary, StoreWriter, WriteOptions};

use crate::fatbin::{Compression, DecompressError, Entry, Fatbin};
use crate::inputs::Maps;
use crate::rewrite::Extracted;

/// What can go wrong building a link's store from the modules its inputs hold.
#[derive(Debug, thiserror::Error)]
pub enum StoreBuildError {
    #[error("{origin}: module {module}: {source}")]
    Payload {
        origin: String,
        module: String,
        #[source]
        source: DecompressError,
    },
    #[error("{origin}: changed on disk during the link")]
    Changed { origin: String },
    #[error(transparent)]
    Input(#[from] crate::inputs::InputError),
    #[error("writing the store: {0}")]
    Store(#[from] cubin_store::StoreError),
    /// The store made ready beside the linker was not wanted any more (the link failed).
    #[error("the store was not needed")]
    Cancelled,
}

/// The store entry metadata for a fatbin entry.
pub fn entry_meta(e: &Entry) -> EntryMeta {
    let mut attrs = Vec::with_capacity(e.header_len());
    // The header alone (no payload length): the runtime sets it for the payload it rebuilds.
    e.write_header(0, &mut attrs);
    EntryMeta {
        id: cubin_store::EntryId::new(e.kind(), e.header.arch_number, e.arch().variant),
        attrs,
    }
}

/// One extracted container, read back from its file and parsed.
fn read_module(m: &Extracted, maps: &Maps) -> Result<Fatbin, StoreBuildError> {
    let map = maps.get(&m.file)?;
    let bytes = module_bytes(m, &map)?;
    let (fatbin, _) = crate::fatbin::parse_one(bytes, 0).map_err(|_| StoreBuildError::Changed {
        origin: m.origin.clone(),
    })?;
    Ok(fatbin)
}

/// The bytes of module `m`'s container in `map`, its input.
fn module_bytes<'a>(m: &Extracted, map: &'a [u8]) -> Result<&'a [u8], StoreBuildError> {
    usize::try_from(m.file_offset)
        .ok()
        .and_then(|start| map.get(start..start.checked_add(m.len as usize)?))
        .ok_or_else(|| StoreBuildError::Changed {
            origin: m.origin.clone(),
        })
}

/// Container bytes read per batch of modules: their entries compress in parallel together
/// (real libraries have one or two entries per module, too few to keep the cores busy one
/// module at a time), and memory stays at one window of device code.
const WINDOW_BYTES: u64 = 16 << 20;

/// Modules per window at most: the store made beside the linker heeds the linker's list of
/// used modules from the next window on, and 16 MiB of small compressed containers is
/// thousands of modules, a third of a second of work (3,000 members of 7 KB: 0.38 s on the
/// dev machine).
const WINDOW_MODULES: usize = 256;

/// Whether a window of `count` modules and `bytes` of containers is closed before a module of
/// `next` bytes (a window always takes at least one).
fn window_full(count: usize, bytes: u64, next: u64) -> bool {
    count > 0 && (bytes + next > WINDOW_BYTES || count == WINDOW_MODULES)
}

/// An entry's payload, decoded where nvcc compressed it; an error names its module.
fn payload<'a>(e: &'a Entry, m: &Extracted) -> Result<Cow<'a, [u8]>, StoreBuildError> {
    e.payload().map_err(|source| StoreBuildError::Payload {
        origin: m.origin.clone(),
        module: m.module.clone(),
        source,
    })
}

/// nvcc's zstd frame of `e`: the blob of its content, as the store's [`cubin_store::FrameUse`]
/// says.
fn nvcc_frame(e: &Entry) -> Option<&[u8]> {
    (e.compression() == Compression::Zstd)
        .then(|| e.stored.get(..e.header.compressed_len as usize))
        .flatten()
}

/// Add `modules` (in this order), a window at a time; `before(i)` hears of each module.
fn add_modules<W: Write + Seek>(
    w: &mut StoreWriter<W>,
    modules: &[&Extracted],
    maps: &Maps,
    before: &mut dyn FnMut(usize),
) -> Result<(), StoreBuildError> {
    let mut i = 0;
    while i < modules.len() {
        let mut j = i;
        let mut bytes = 0u64;
        while j < modules.len() && !window_full(j - i, bytes, modules[j].len) {
            bytes += modules[j].len;
            j += 1;
        }
        let mut parsed = Vec::with_capacity(j - i);
        for (k, m) in modules.iter().enumerate().take(j).skip(i) {
            before(k);
            let fatbin = read_module(m, maps)?;
            parsed.push((w.add_module(&m.module)?, m, fatbin));
        }
        let flat: Vec<(&Entry, &Extracted)> = parsed
            .iter()
            .flat_map(|(_, m, fatbin)| fatbin.entries.iter().map(move |e| (e, **m)))
            .collect();
        let raws = payloads(&flat)?;
        // Entries are stored in batch order, whatever the threads: the same bytes as one
        // module at a time.
        let ids = parsed
            .iter()
            .flat_map(|(id, _, fatbin)| fatbin.entries.iter().map(move |_| *id));
        let batch: Vec<_> = flat
            .iter()
            .zip(ids)
            .zip(&raws)
            .map(|((&(e, _), id), raw)| NewEntry {
                module: id,
                meta: entry_meta(e),
                raw,
                // It just decoded to `raw`.
                frame: nvcc_frame(e),
            })
            .collect();
        let budget = crate::parallel::workers(batch.len());
        w.add_entries(batch, budget.count())?;
        for m in &modules[i..j] {
            maps.release(&m.file, m.file_offset, m.len);
        }
        i = j;
    }
    Ok(())
}

/// The payload of each entry, decoded on every CPU (NVIDIA's libraries come zstd-compressed:
/// decoding them one after another was most of the store step of a static cuBLAS link), in
/// order; the error of the first entry that fails, if any.
fn payloads<'a>(
    entries: &[(&'a Entry, &Extracted)],
) -> Result<Vec<Cow<'a, [u8]>>, StoreBuildError> {
    let decode = |&(e, m): &(&'a Entry, &Extracted)| payload(e, m);
    // Entries stored as they are need no thread.
    if entries
        .iter()
        .all(|(e, _)| e.compression() == Compression::None)
    {
        return entries.iter().map(decode).collect();
    }
    crate::parallel::map_ordered(entries, decode)
        .into_iter()
        .collect()
}

/// Write a whole store of `modules` (in this order) to `out`; `before(i)` hears of each
/// module as its turn comes (progress display). Entries nvcc already compressed with zstd
/// bring their frames, which `opts.frames` keeps as they are (no second compression: the
/// link stays as fast as decoding them once) or where they are the smaller.
pub fn write_store<W: Write + Seek>(
    out: W,
    modules: &[&Extracted],
    opts: WriteOptions,
    maps: &Maps,
    before: &mut dyn FnMut(usize),
) -> Result<(W, StoreSummary), StoreBuildError> {
    let mut w = StoreWriter::new(out, opts)?;
    add_modules(&mut w, modules, maps, before)?;
    Ok(w.finish()?)
}

/// [`write_store`], or with `release` a release store made from it: the link's store written
/// in memory (nvcc's frames kept, the rest at level 1), its blobs then
/// grouped ([`groups::write_solid`]) and compressed at `opts.level`. Memory: the link's
/// store, compressed.
pub fn write_store_as<W: Write + Seek>(
    out: W,
    modules: &[&Extracted],
    opts: WriteOptions,
    maps: &Maps,
    release: Option<groups::Solid>,
    before: &mut dyn FnMut(usize),
) -> Result<(W, StoreSummary), StoreBuildError> {
    let Some(solid) = release else {
        return write_store(out, modules, opts, maps, before);
    };
    // Only a carrier for the blobs the groups are made of (every one decoded again there):
    // the fastest level, not the default's; the release store does not depend on it.
    let (first, _) = write_store(
        std::io::Cursor::new(Vec::new()),
        modules,
        WriteOptions {
            level: 1,
            dictionary: None,
            frames: cubin_store::FrameUse::Keep,
        },
        maps,
        before,
    )?;
    let bytes = first.into_inner();
    let store = cubin_store::Store::parse(&bytes)?;
    let mut w = StoreWriter::new(out, opts)?;
    groups::write_solid(&store, solid, &mut w)?;
    Ok(w.finish()?)
}

/// Where a link's store comes from.
pub enum Source<'a> {
    /// Made ready beside the real linker.
    Ready(&'a ready::Ready),
    /// Read from the inputs now: a release store (`release`), or where making it ready failed.
    Inputs {
        maps: &'a Maps,
        release: Option<groups::Solid>,
    },
}

/// The store of a link's used `modules` (in the linker's order), from `from`: the same bytes
/// either way ([`ready`]).
pub fn write_link_store<W: Write + Seek>(
    out: W,
    modules: &[&Extracted],
    opts: WriteOptions,
    from: &Source<'_>,
    before: &mut dyn FnMut(usize),
) -> Result<(W, StoreSummary), StoreBuildError> {
    match from {
        Source::Ready(r) => {
            let names: Vec<&str> = modules.iter().map(|m| m.module.as_str()).collect();
            ready::write_ready(out, &names, r, opts)
        }
        Source::Inputs { maps, release } => {
            write_store_as(out, modules, opts, maps, *release, before)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extracted() -> Extracted {
        Extracted {
            module: "kernels_size.o#0".into(),
            origin: "kernels_size.o".into(),
            section: ".nv_fatbin".into(),
            file: "kernels_size.o".into(),
            file_offset: 0,
            len: 0,
        }
    }

    /// nvcc's zstd entries (size mode), decoded on several threads, come back in order and
    /// equal to decoding one at a time; a damaged one is the error, naming its module.
    #[test]
    fn payloads_in_order_and_the_first_failure() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/nvcc13/kernels_size.o");
        let scanned = crate::inputs::scan(&path).unwrap();
        let entries: Vec<Entry> = scanned
            .sections
            .into_iter()
            .flat_map(|s| s.containers)
            .flat_map(|f| f.entries)
            .collect();
        let zstd = entries
            .iter()
            .filter(|e| e.compression() == Compression::Zstd)
            .count();
        assert!(zstd >= 2, "the fixture should hold zstd entries: {zstd}");
        let m = extracted();
        let flat: Vec<(&Entry, &Extracted)> = entries.iter().map(|e| (e, &m)).collect();
        let got = payloads(&flat).unwrap();
        for (e, raw) in entries.iter().zip(&got) {
            assert_eq!(raw.as_ref(), e.payload().unwrap().as_ref());
        }

        let mut bad = entries.clone();
        let k = bad
            .iter()
            .rposition(|e| e.compression() == Compression::Zstd)
            .unwrap();
        let mid = bad[k].header.compressed_len as usize / 2;
        bad[k].stored[mid] ^= 0xff;
        let flat: Vec<(&Entry, &Extracted)> = bad.iter().map(|e| (e, &m)).collect();
        match payloads(&flat) {
            Err(StoreBuildError::Payload { module, .. }) => assert_eq!(module, "kernels_size.o#0"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a damaged frame decoded"),
        }
    }
}
