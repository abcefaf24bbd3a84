//! The entries of a store's module that a selection keeps, counted: shared by the prune of
//! a packed binary ([`super::packed`]) and of a solid store ([`super::solid`]).

use super::{PruneError, PruneReport, Selection};
use crate::arch::EntryId;

/// The entries of module `m` that `sel` keeps, counted in `report` (entries and bytes before;
/// the caller counts what it writes).
pub(super) fn kept_entries<'s>(
    m: &cubin_store::ModuleView<'s>,
    sel: &Selection,
    report: &mut PruneReport,
) -> Result<Vec<cubin_store::EntryView<'s>>, PruneError> {
    let entries: Vec<_> = m.entries().collect();
    let cands: Vec<EntryId> = entries
        .iter()
        .map(|e| EntryId::new(e.kind(), e.arch(), e.variant()))
        .collect();
    let sizes: Vec<u64> = entries.iter().map(|e| e.stored_share()).collect();
    let keep = sel.choose(m.name(), &cands, &sizes, &mut report.chosen)?;
    report.runs.note(&cands, &keep);
    report.entries_before += entries.len();
    report.bytes_before += sizes.iter().sum::<u64>();
    Ok(entries
        .into_iter()
        .zip(keep)
        .filter_map(|(e, k)| k.then_some(e))
        .collect())
}
