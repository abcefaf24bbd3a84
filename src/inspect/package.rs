//! `fatpack inspect` of a package (a folder, a wheel, a conda package): one report per
//! binary in it that holds device code, named `package!member` (a folder's files by their
//! path), and a summary of the whole: device code by arch and dead entries, summed.

use std::path::Path;

use super::file::inspect_path;
use super::report::{summarise, ArchTotal, FileReport, InspectError, Totals};
use crate::inputs::FileKind;
use crate::package::{for_each_binary, PackageKind};

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
                // Modules are named after the file read, a spooled copy: named after the
                // member instead (a scratch path means nothing to the user).
                let spooled = file.display().to_string();
                for m in &mut r.modules {
                    if let Some(rest) = m.origin.strip_prefix(&spooled) {
                        m.origin = format!("{shown}{rest}");
                    }
                }
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

/// A package's totals: per arch and in all, over every file in it, summed as one file's
/// report sums its modules (one kernel built into two files counts once; a packed file's
/// shared blobs as its own report counts them).
pub fn summary(reports: &[FileReport]) -> (Vec<ArchTotal>, Totals) {
    let modules = reports
        .iter()
        .flat_map(|r| r.modules.iter().cloned())
        .collect();
    let stored = reports.iter().map(|r| r.totals.stored_size).sum();
    let all = summarise(String::new(), FileKind::Other, modules, Some(stored));
    (all.per_arch, all.totals)
}

/// What `fatpack prune --for caps` would keep of a file's device code, by the selection
/// prune itself runs: (entries kept, entries, stored bytes kept, stored bytes). Entries of
/// kinds prune never drops (NVVM IR) count as kept.
pub fn would_keep(
    report: &FileReport,
    targets: &crate::selection::ForTargets,
) -> (usize, usize, u64, u64) {
    let (mut kept, mut all, mut kept_bytes, mut bytes) = (0, 0, 0, 0);
    for_each_kept(report, targets, &mut |_, e, k| {
        all += 1;
        bytes += e.stored_size;
        if k {
            kept += 1;
            kept_bytes += e.stored_size;
        }
    });
    (kept, all, kept_bytes, bytes)
}

/// The entries `fatpack prune --for caps` would keep of a file, as `module:arch` (the
/// entries a GPU of those capabilities loads), and those of them that cannot be read here
/// (a split binary's pack that is not installed).
pub fn kept_entries(
    report: &FileReport,
    targets: &crate::selection::ForTargets,
) -> (Vec<String>, Vec<String>) {
    let (mut kept, mut unreadable) = (Vec::new(), Vec::new());
    for_each_kept(report, targets, &mut |origin, e, k| {
        if k && (e.kind == "sass" || e.kind == "ptx") {
            let name = format!("{origin}:{}", e.arch);
            if e.not_decoded
                .as_deref()
                .is_some_and(|why| why.starts_with("its pack"))
            {
                unreadable.push(name.clone());
            }
            kept.push(name);
        }
    });
    (kept, unreadable)
}

/// Calls `f(module, entry, kept)` for every entry of `report`, by the selection prune runs.
fn for_each_kept(
    report: &FileReport,
    targets: &crate::selection::ForTargets,
    f: &mut dyn FnMut(&str, &super::EntryReport, bool),
) {
    use crate::arch::EntryId;
    let sel = crate::selection::Selection::For(targets.clone());
    let mut chosen = crate::selection::Chosen::new();
    for m in &report.modules {
        let entries: Vec<(Option<EntryId>, u64)> = m
            .entries
            .iter()
            .map(|e| {
                let code = e.kind == "sass" || e.kind == "ptx";
                (
                    code.then(|| EntryId::parse(&e.arch)).flatten(),
                    e.stored_size,
                )
            })
            .collect();
        let registered = m.loaded_by != "program";
        let keep =
            crate::selection::keep_in_container(&m.origin, &entries, &sel, registered, &mut chosen)
                .map_or_else(|_| vec![true; entries.len()], |k| k.keep);
        for (e, k) in m.entries.iter().zip(keep) {
            f(&m.origin, e, k);
        }
    }
}
