//! `fatpack repack IN -o OUT --level N`: the same packed binary with its store compressed
//! again at another zstd level, without relinking. The link's default keeps nvcc's frames
//! and compresses the rest at level 9, for link speed; a release build can spend minutes
//! once (level 19: 0.97× nvcc's `--compress-mode=size` on cuBLASLt's entries, 1.00× on
//! cuSPARSE's, BENCHMARKS.md) and ship the smaller file.
//!
//! `--release` writes a release store instead: blobs in solid groups (cubin-store format 1.1,
//! [`crate::store::groups`]), by GPU family in module order, each group one frame, so that
//! what a library's kernels repeat is stored once.
//!
//! Every entry is decoded and checked against the index (the store must be the one the
//! binary records), compressed again on all cores a window of modules at a time, and the
//! new store replaces the old where it was (section, mapped or not, or side file); the
//! binary's digest and build ID follow. Same modules, entries and contents: only the frames
//! change. Written beside the output, read back, then renamed.

use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use cubin_store::{NewEntry, Store, StoreWriter, WriteOptions};

use crate::store::groups::{self, Solid};

use crate::commit::Outputs;
use crate::inputs::read_file;
use crate::packed::{self, side_path, OutputError};

#[derive(Debug, thiserror::Error)]
pub enum RepackError {
    #[error("{}: not a packed output (no {} slot: a plain build, or a link `fatpack ld` left to the real linker); repack rewrites the store of what `fatpack ld` packed (`--fatpack-mode=packed` packs any link)", .0.display(), packed::DIGEST_SECTION)]
    NotPacked(PathBuf),
    #[error("{}: is split into packs; repack the packed binary before splitting, or `fatpack join` it first", .0.display())]
    Split(PathBuf),
    #[error("{}: its runtime cannot read solid groups (it was linked by an older fatpack); relink it to repack it with --release", .0.display())]
    OldRuntime(PathBuf),
    #[error(transparent)]
    Commit(#[from] crate::commit::CommitError),
    #[error(transparent)]
    Store(#[from] crate::error::StoreAt),
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    #[error(transparent)]
    Input(#[from] crate::inputs::InputError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    Transform(#[from] crate::transform::TransformError),
    /// An edit of an ELF file's headers or sections failed.
    #[error(transparent)]
    ElfEdit(#[from] crate::elf::EditError),
}

/// What `repack` writes.
#[derive(Debug, Clone, Copy)]
pub struct RepackOptions {
    /// zstd level.
    pub level: i32,
    /// Solid groups (a release store), or one frame per blob.
    pub solid: Option<Solid>,
}

#[derive(Debug, Clone, Default)]
pub struct RepackReport {
    pub entries: usize,
    pub stored_before: u64,
    pub stored_after: u64,
}

/// Raw bytes of entries compressed together: enough to keep every core busy, one window of
/// device code in memory at a time.
const WINDOW_BYTES: u64 = 64 << 20;

/// Writes every entry of `store` again into `out`.
fn write_repacked<W: Write + Seek>(
    store: &Store<'_>,
    opts: RepackOptions,
    out: W,
    path: &Path,
) -> Result<(W, cubin_store::StoreSummary), RepackError> {
    let level = opts.level;
    let store_err = |source| {
        RepackError::Store(crate::error::StoreAt {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut w = StoreWriter::new(
        out,
        WriteOptions {
            level,
            dictionary: None,
            frames: cubin_store::FrameUse::Keep,
        },
    )
    .map_err(store_err)?;
    if let Some(solid) = opts.solid {
        groups::write_solid(store, solid, &mut w).map_err(store_err)?;
        return w.finish().map_err(store_err);
    }
    let modules: Vec<_> = store.modules().collect();
    let mut i = 0;
    while i < modules.len() {
        // A window of modules; their entries are decoded (and checked) before compression.
        let mut j = i;
        let mut bytes = 0u64;
        while j < modules.len() && (j == i || bytes < WINDOW_BYTES) {
            bytes += modules[j].entries().map(|e| e.raw_len()).sum::<u64>();
            j += 1;
        }
        let mut ids = Vec::with_capacity(j - i);
        let mut raws = Vec::new();
        for m in &modules[i..j] {
            ids.push(w.add_module(m.name()).map_err(store_err)?);
            for e in m.entries() {
                raws.push((e.meta(), store.read_entry(&e).map_err(store_err)?));
            }
        }
        let mut raw_iter = raws.iter();
        let mut batch = Vec::with_capacity(raws.len());
        for (m, id) in modules[i..j].iter().zip(&ids) {
            for _ in m.entries() {
                let (meta, raw) = raw_iter.next().expect("one raw per entry");
                batch.push(NewEntry {
                    module: *id,
                    meta: meta.clone(),
                    raw,
                    frame: None,
                });
            }
        }
        let budget = crate::parallel::workers(batch.len());
        w.add_entries(batch, budget.count()).map_err(store_err)?;
        i = j;
    }
    w.finish().map_err(store_err)
}

pub fn repack(
    input: &Path,
    output: &Path,
    opts: RepackOptions,
) -> Result<RepackReport, RepackError> {
    let level = opts.level;
    let io_at = |p: &Path| {
        let p = p.to_path_buf();
        move |source| {
            RepackError::Io(crate::error::IoError {
                path: p.clone(),
                source,
            })
        }
    };
    let outs = Outputs::new(&[input]);
    outs.check(output)?;
    let map = read_file(input)?;
    let data: &[u8] = &map;
    let located =
        packed::locate(input, data)?.ok_or_else(|| RepackError::NotPacked(input.to_path_buf()))?;
    let bytes = located.store.bytes();
    if fatpack_format::split::is_manifest(bytes) {
        return Err(RepackError::Split(input.to_path_buf()));
    }
    if opts.solid.is_some() && located.slot.features & fatpack_format::link::FEATURE_SOLID == 0 {
        return Err(RepackError::OldRuntime(input.to_path_buf()));
    }
    let store = located.own_store(input)?;
    // Checked up front, so a bad level fails before any work.
    StoreWriter::new(
        std::io::Cursor::new(Vec::new()),
        WriteOptions {
            level,
            dictionary: None,
            frames: cubin_store::FrameUse::Keep,
        },
    )
    .map_err(|source| {
        RepackError::Store(crate::error::StoreAt {
            path: output.to_path_buf(),
            source,
        })
    })?;

    let tmp = outs.file(output)?;
    std::fs::write(tmp.path(), data).map_err(io_at(output))?;
    let embedded = located.store.is_section();
    let (summary, side) = if embedded {
        let s = packed::append_store(tmp.path(), |w| -> Result<_, RepackError> {
            Ok(write_repacked(&store, opts, w, input)?.1)
        })?;
        (s, None)
    } else {
        let mut side = outs.file(&side_path(output))?;
        let s = side.write_with(|w| write_repacked(&store, opts, w, input))?;
        (s, Some(side))
    };
    packed::finish(tmp.path(), &summary.digest, embedded)?;

    // Read back: the new store is whole, the binary records it, and it holds what the old
    // one held (same modules and entries, same contents by their digests).
    {
        let out_map = read_file(tmp.path())?;
        let side_map = side.as_ref().map(|s| read_file(s.path())).transpose()?;
        let new_bytes = match &side_map {
            Some(m) => &m[..],
            None => packed::section_bytes(&out_map).ok_or_else(|| OutputError::Bad {
                path: output.to_path_buf(),
                message: "the repacked binary lost its store section".into(),
            })?,
        };
        let new = Store::parse(new_bytes).map_err(|source| {
            RepackError::Store(crate::error::StoreAt {
                path: output.to_path_buf(),
                source,
            })
        })?;
        let recorded = packed::recorded_slot(&out_map).map(|s| s.digest);
        let same = new.digest() == summary.digest
            && recorded == Some(summary.digest)
            && new.entry_count() == store.entry_count()
            && new.entries().zip(store.entries()).all(|(a, b)| {
                a.module_name() == b.module_name()
                    && a.meta() == b.meta()
                    && a.digest() == b.digest()
            });
        if !same {
            return Err(RepackError::Output(OutputError::Bad {
                path: output.to_path_buf(),
                message: "the repacked store does not read back as the original's entries".into(),
            }));
        }
        new.verify().map_err(|source| {
            RepackError::Store(crate::error::StoreAt {
                path: output.to_path_buf(),
                source,
            })
        })?;
    }
    outs.commit_binary(tmp, input, side)?;
    let stats = store.stats();
    Ok(RepackReport {
        entries: stats.entries,
        stored_before: stats.stored_bytes,
        stored_after: summary.stored_bytes,
    })
}
