//! Pruning a release store (solid groups, cubin-store format 1.1) without losing what made it
//! small: a group whose blobs are all kept is copied as it is (its frame, no compression
//! again); the kept blobs of a group kept in part become one group of their own, compressed
//! again at level 19 (the release level). Blobs outside any group are compressed again
//! likewise. Groups are written in the input's order, so the output does not depend on the
//! number of threads.

use std::io::{Seek, Write};

use cubin_store::{BlobView, EntryView, Store, StoreError, StoreWriter, WriteOptions};

use super::{PruneReport, Selection};

/// The release level partial groups are compressed at.
const LEVEL: i32 = cubin_store::RELEASE_LEVEL;

/// The store's blobs as its groups: runs of solid blobs sharing a frame, every other blob on
/// its own; in storage order.
fn input_groups(store: &Store<'_>) -> Vec<Vec<BlobView>> {
    let mut out: Vec<Vec<BlobView>> = Vec::new();
    for b in store.blobs() {
        match out.last_mut() {
            Some(g) if g.last().is_some_and(|p| b.shares_frame_with(p)) => g.push(b),
            _ => out.push(vec![b]),
        }
    }
    out
}

/// Writes the kept entries of `store` (a store with solid groups) into `out`.
pub(super) fn write_pruned_solid<W: Write + Seek>(
    store: &Store<'_>,
    sel: &Selection,
    out: W,
    report: &mut PruneReport,
    path: &std::path::Path,
) -> Result<(W, cubin_store::StoreSummary), crate::prune::PruneError> {
    // Which entries stay, module by module, as for any store.
    let mut kept: Vec<Vec<EntryView<'_>>> = Vec::with_capacity(store.module_count());
    let mut kept_blob = vec![false; store.blob_count()];
    for m in store.modules() {
        let mine = super::kept::kept_entries(&m, sel, report)?;
        for e in &mine {
            if let Some(k) = kept_blob.get_mut(e.blob_id() as usize) {
                *k = true;
            }
        }
        report.entries_after += mine.len();
        kept.push(mine);
    }
    let (out, summary) = write_kept(store, &kept, &kept_blob, out).map_err(|source| {
        crate::prune::PruneError::Store(crate::error::StoreAt {
            path: path.to_path_buf(),
            source,
        })
    })?;
    report.bytes_after += summary.stored_bytes;
    Ok((out, summary))
}

/// The kept blobs, then the modules and their kept entries.
fn write_kept<W: Write + Seek>(
    store: &Store<'_>,
    kept: &[Vec<EntryView<'_>>],
    kept_blob: &[bool],
    out: W,
) -> Result<(W, cubin_store::StoreSummary), StoreError> {
    let mut w = StoreWriter::new(
        out,
        WriteOptions {
            level: LEVEL,
            dictionary: None,
            frames: cubin_store::FrameUse::Keep,
        },
    )?;
    let new_ids = write_blobs(store, kept_blob, &mut w)?;
    for (m, mine) in store.modules().zip(kept) {
        let id = w.add_module(m.name())?;
        for e in mine {
            let blob = new_ids
                .get(e.blob_id() as usize)
                .copied()
                .unwrap_or(u32::MAX);
            w.add_entry_for_blob(id, e.meta(), blob)?;
        }
    }
    w.finish()
}

/// The kept blobs, group by group; returns each input blob's new id (`u32::MAX` if dropped).
fn write_blobs<W: Write + Seek>(
    store: &Store<'_>,
    kept_blob: &[bool],
    w: &mut StoreWriter<W>,
) -> Result<Vec<u32>, StoreError> {
    let mut new_ids = vec![u32::MAX; store.blob_count()];
    let bytes = store.as_bytes();
    // Groups kept in part, compressed together a batch at a time (on every core).
    let mut pending: Vec<Vec<BlobView>> = Vec::new();
    let flush = |pending: &mut Vec<Vec<BlobView>>,
                 w: &mut StoreWriter<W>,
                 new_ids: &mut Vec<u32>|
     -> Result<(), StoreError> {
        if pending.is_empty() {
            return Ok(());
        }
        let raws: Vec<Vec<Vec<u8>>> = pending
            .iter()
            .map(|g| g.iter().map(|b| store.read_blob(b.id)).collect())
            .collect::<Result<_, _>>()?;
        let refs: Vec<Vec<&[u8]>> = raws
            .iter()
            .map(|g| g.iter().map(Vec::as_slice).collect())
            .collect();
        let budget = crate::parallel::workers(refs.len());
        let ids = w.add_groups(&refs, budget.count())?;
        for (g, got) in pending.iter().zip(ids) {
            for (b, id) in g.iter().zip(got) {
                new_ids[b.id as usize] = id;
            }
        }
        pending.clear();
        Ok(())
    };
    for group in input_groups(store) {
        let keep: Vec<BlobView> = group
            .iter()
            .filter(|b| kept_blob.get(b.id as usize).copied().unwrap_or(false))
            .cloned()
            .collect();
        if keep.is_empty() {
            continue;
        }
        let whole = keep.len() == group.len() && group.len() > 1;
        if !whole {
            pending.push(keep);
            if pending.len() >= 16 {
                flush(&mut pending, w, &mut new_ids)?;
            }
            continue;
        }
        // Kept whole: every blob read (decoded, checked), then the frame copied.
        flush(&mut pending, w, &mut new_ids)?;
        let raws: Vec<Vec<u8>> = group
            .iter()
            .map(|b| store.read_blob(b.id))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&[u8]> = raws.iter().map(Vec::as_slice).collect();
        let first = &group[0];
        let frame = usize::try_from(first.offset)
            .ok()
            .and_then(|o| bytes.get(o..o.checked_add(first.stored_len as usize)?))
            .ok_or(StoreError::ForeignEntry)?;
        for (b, id) in group.iter().zip(w.add_solid_frame(frame, &refs)?) {
            new_ids[b.id as usize] = id;
        }
    }
    flush(&mut pending, w, &mut new_ids)?;
    Ok(new_ids)
}
