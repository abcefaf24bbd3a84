//! `fatpack inspect` of a package (a folder, a wheel, a conda package): one report per
//! binary in it that holds device code, named `package!member` (a folder's files by their
//! path), and a summary of the whole: device code by arch and dead entries, summed.

use std::collections::BTreeMap;
use std::path::Path;

use super::report::{inspect_path, ArchTotal, FileReport, InspectError, Totals};
use crate::prune::{for_each_binary, PackageKind};

/// The reports of the binaries with device code in `path`, or `None` if it is no package.
pub fn inspect_package(path: &Path) -> Result<Option<Vec<FileReport>>, InspectError> {
    let Some(kind) = PackageKind::of(path) else {
        return Ok(None);
    };
    let scratch = tempfile::tempdir().map_err(|e| InspectError::Package {
        path: path.display().to_string(),
        message: format!("a scratch folder: {e}"),
    })?;
    let mut reports = Vec::new();
    let mut failed = None;
    let mut each = |name: &str, file: &Path| {
        let shown = match kind {
            PackageKind::Folder => path.join(name).display().to_string(),
            _ => format!("{}!{name}", path.display()),
        };
        match inspect_path(file) {
            Ok(mut r) if !r.modules.is_empty() || r.packed.is_some() => {
                r.path = shown;
                reports.push(r);
            }
            Ok(_) => {}
            Err(e) => failed = Some(format!("{shown}: {e}")),
        }
        Ok(())
    };
    for_each_binary(path, scratch.path(), &mut each).map_err(|e| InspectError::Package {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    if let Some(message) = failed {
        return Err(InspectError::Package {
            path: path.display().to_string(),
            message,
        });
    }
    Ok(Some(reports))
}

/// A package's totals: per arch and in all, over every file in it.
pub fn summary(reports: &[FileReport]) -> (Vec<ArchTotal>, Totals) {
    let mut per_arch: BTreeMap<(String, String), ArchTotal> = BTreeMap::new();
    let mut totals = Totals::default();
    for r in reports {
        for a in &r.per_arch {
            let t = per_arch
                .entry((a.arch.clone(), a.kind.clone()))
                .or_insert_with(|| ArchTotal {
                    arch: a.arch.clone(),
                    kind: a.kind.clone(),
                    entries: 0,
                    raw_size: 0,
                    stored_size: 0,
                });
            t.entries += a.entries;
            t.raw_size += a.raw_size;
            t.stored_size += a.stored_size;
        }
        let s = &r.totals;
        totals.modules += s.modules;
        totals.entries += s.entries;
        totals.raw_size += s.raw_size;
        totals.stored_size += s.stored_size;
        totals.kernels += s.kernels;
        totals.dead_entries += s.dead_entries;
        totals.dead_stored_size += s.dead_stored_size;
    }
    let mut per_arch: Vec<ArchTotal> = per_arch.into_values().collect();
    per_arch.sort_by_key(|a| (crate::arch::EntryId::parse(&a.arch), a.arch.clone()));
    (per_arch, totals)
}

/// What `fatpack prune --for caps` would keep of a file's device code, by the selection
/// prune itself runs: (entries kept, entries, stored bytes kept, stored bytes). Entries of
/// kinds prune never drops (NVVM IR) count as kept.
pub fn would_keep(report: &FileReport, caps: &[u32]) -> (usize, usize, u64, u64) {
    use crate::arch::EntryId;
    let sel = crate::prune::Selection::For(caps.to_vec());
    let mut chosen = crate::prune::Chosen::new();
    let (mut kept, mut all, mut kept_bytes, mut bytes) = (0, 0, 0, 0);
    for m in &report.modules {
        all += m.entries.len();
        bytes += m.entries.iter().map(|e| e.stored_size).sum::<u64>();
        let code: Vec<(EntryId, u64)> = m
            .entries
            .iter()
            .filter(|e| e.kind == "sass" || e.kind == "ptx")
            .filter_map(|e| Some((EntryId::parse(&e.arch)?, e.stored_size)))
            .collect();
        let others = m.entries.len() - code.len();
        let other_bytes: u64 = m
            .entries
            .iter()
            .filter(|e| e.kind != "sass" && e.kind != "ptx")
            .map(|e| e.stored_size)
            .sum();
        // A module the program hands its own JIT along with NVVM stays whole, as in prune.
        if m.loaded_by == "program" && others > 0 {
            kept += m.entries.len();
            kept_bytes += m.entries.iter().map(|e| e.stored_size).sum::<u64>();
            continue;
        }
        let cands: Vec<EntryId> = code.iter().map(|c| c.0).collect();
        let sizes: Vec<u64> = code.iter().map(|c| c.1).collect();
        let keep = match m.loaded_by {
            "program" => sel.choose_unregistered(&cands, &mut chosen),
            _ => sel
                .choose(&m.origin, &cands, &sizes, &mut chosen)
                .unwrap_or_else(|_| vec![true; cands.len()]),
        };
        kept += others + keep.iter().filter(|k| **k).count();
        kept_bytes += other_bytes
            + keep
                .iter()
                .zip(&sizes)
                .filter(|(k, _)| **k)
                .map(|(_, s)| s)
                .sum::<u64>();
    }
    (kept, all, kept_bytes, bytes)
}
