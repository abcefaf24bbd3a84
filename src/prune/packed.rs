//! Pruning a packed output: a new store with only the kept entries replaces the old one
//! (inside the file, or the side file), and the binary's recorded digest is updated.

use std::collections::BTreeSet;
use std::io::{Seek, Write};
use std::path::Path;

use cubin_store::{NewEntry, Store, StoreWriter, WriteOptions};

use super::{io_at, PruneError, PruneReport, Selection};
use crate::arch::EntryId;
use crate::packed::{self, side_path};

/// Copy the kept entries of `store` into a new store written to `out`.
fn write_pruned<W: Write + Seek>(
    store: &Store<'_>,
    sel: &Selection,
    out: W,
    report: &mut PruneReport,
    path: &Path,
) -> Result<(W, cubin_store::StoreSummary), PruneError> {
    let store_err = |source| {
        PruneError::Store(crate::error::StoreAt {
            path: path.to_path_buf(),
            source,
        })
    };
    if store
        .blobs()
        .any(|b| b.codec == cubin_store::Codec::ZstdSolid)
    {
        return super::solid::write_pruned_solid(store, sel, out, report, path);
    }
    let mut w = StoreWriter::new(out, WriteOptions::default()).map_err(store_err)?;
    let bytes = store.as_bytes();
    for m in store.modules() {
        let id = w.add_module(m.name()).map_err(store_err)?;
        let kept = super::kept::kept_entries(&m, sel, report)?;
        // Every kept entry is read (decompressed, length- and blake3-checked) before its
        // frame is copied as it is: nothing is compressed again.
        let mut raws = Vec::with_capacity(kept.len());
        for e in &kept {
            raws.push(store.read_entry(e).map_err(store_err)?);
        }
        let batch: Vec<_> = kept
            .iter()
            .zip(&raws)
            .map(|(e, raw)| {
                let b = e.blob();
                let frame = (b.codec == cubin_store::Codec::Zstd)
                    .then(|| bytes.get(b.offset as usize..(b.offset + b.stored_len) as usize))
                    .flatten();
                NewEntry {
                    module: id,
                    meta: e.meta(),
                    raw,
                    frame,
                }
            })
            .collect();
        let budget = crate::parallel::workers(batch.len());
        for (r, e) in w
            .add_entries(batch, budget.count())
            .map_err(store_err)?
            .iter()
            .zip(&kept)
        {
            report.entries_after += 1;
            if !r.deduplicated {
                report.bytes_after += e.stored_share();
            }
        }
    }
    w.finish().map_err(store_err)
}

/// Writes the pruned binary to `tmp_path`; for a side-file store, returns the new side file,
/// still to be committed once the binary is in place.
pub(super) fn prune_packed(
    input: &Path,
    data: &[u8],
    sel: &Selection,
    tmp_path: &Path,
    output_path: &Path,
    outs: &crate::commit::Outputs,
    report: &mut PruneReport,
) -> Result<Option<crate::commit::Staged>, PruneError> {
    let located =
        packed::locate(input, data)?.ok_or_else(|| PruneError::NotPacked(input.to_path_buf()))?;
    let (store_bytes, embedded) = (located.store.bytes(), located.store.is_section());
    if fatpack_format::split::is_manifest(store_bytes) {
        return Err(PruneError::Split(input.to_path_buf()));
    }
    let store = located.own_store(input)?;
    let present: BTreeSet<EntryId> = store
        .entries()
        .filter_map(|e| EntryId::code(e.kind(), e.arch(), e.variant()))
        .collect();
    report.absent = sel.check_present(input, &present)?;
    std::fs::write(tmp_path, data).map_err(io_at(tmp_path))?;
    let (summary, side) = if embedded {
        let s = packed::append_store(tmp_path, |w| -> Result<_, PruneError> {
            Ok(write_pruned(&store, sel, w, report, input)?.1)
        })?;
        (s, None)
    } else {
        let mut side = outs.file(&side_path(output_path))?;
        let summary = side.write_with(|w| write_pruned(&store, sel, w, report, input))?;
        (summary, Some(side))
    };
    packed::finish(tmp_path, &summary.digest, embedded)?;
    Ok(side)
}
