//! Pruning a packed output: a new store with only the kept entries replaces the old one
//! (inside the file, or the side file), and the binary's recorded digest is updated.

use std::collections::BTreeSet;
use std::io::{Seek, Write};
use std::path::Path;

use cubin_store::{AtomicStoreFile, Store, StoreWriter, WriteOptions};

use super::{check_present, io_at, PruneError, PruneReport};
use crate::arch::Target;
use crate::packed::{self, side_path};

/// Copy the kept entries of `store` into a new store written to `out`.
fn write_pruned<W: Write + Seek>(
    store: &Store<'_>,
    keep: &BTreeSet<Target>,
    out: W,
    report: &mut PruneReport,
) -> Result<(W, cubin_store::StoreSummary), cubin_store::StoreError> {
    let mut w = StoreWriter::new(out, WriteOptions::default())?;
    for m in store.modules() {
        let id = w.add_module(m.name())?;
        for e in m.entries() {
            report.entries_before += 1;
            report.bytes_before += e.stored_len();
            if Target::of(e.kind(), e.arch(), e.variant()).is_some_and(|t| keep.contains(&t)) {
                let raw = store.read_entry(&e)?;
                let r = w.add_entry(id, e.meta(), &raw)?;
                report.entries_after += 1;
                if !r.deduplicated {
                    report.bytes_after += e.stored_len();
                }
            }
        }
    }
    w.finish()
}

/// Writes the pruned binary to `tmp_path`; for a side-file store, returns the new side file,
/// still to be committed once the binary is in place.
pub(super) fn prune_packed(
    input: &Path,
    data: &[u8],
    keep: &BTreeSet<Target>,
    tmp_path: &Path,
    output_path: &Path,
    report: &mut PruneReport,
) -> Result<Option<AtomicStoreFile>, PruneError> {
    let located =
        packed::locate(input, data)?.ok_or_else(|| PruneError::NotPacked(input.to_path_buf()))?;
    let (store_bytes, embedded) = (located.store.bytes(), located.store.is_section());
    let store_err = |source| PruneError::Store {
        path: input.to_path_buf(),
        source,
    };
    let store = Store::parse(store_bytes).map_err(store_err)?;
    let present: BTreeSet<Target> = store
        .entries()
        .filter_map(|e| Target::of(e.kind(), e.arch(), e.variant()))
        .collect();
    check_present(input, keep, &present)?;
    std::fs::write(tmp_path, data).map_err(io_at(tmp_path))?;
    let (summary, side) = if embedded {
        let s = packed::append_store(tmp_path, |w| -> Result<_, PruneError> {
            Ok(write_pruned(&store, keep, w, report).map_err(store_err)?.1)
        })?;
        (s, None)
    } else {
        let w = AtomicStoreFile::create(side_path(output_path)).map_err(store_err)?;
        let (w, summary) = write_pruned(&store, keep, w, report).map_err(store_err)?;
        (summary, Some(w))
    };
    packed::patch_digest(tmp_path, &summary.digest)?;
    packed::mix_build_id(tmp_path, &summary.digest)?;
    Ok(side)
}
