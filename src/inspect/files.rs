//! `fatpack inspect FILE...`: each file or package read, reported and summarised, as the
//! command prints it (a table or JSON), and the problems found, in order. main.rs only
//! parses the command line and prints what this returns.

use std::path::PathBuf;

use super::{
    inspect_package, inspect_path, kept_entries, render, render_package, render_would_keep,
    would_keep, FileReport, InspectError, WouldKeep,
};
use crate::selection::ForTargets;

/// What `fatpack inspect` is asked.
pub struct Request<'a> {
    /// Each kernel's name listed.
    pub kernels: bool,
    pub json: bool,
    /// `--for`: as written, and parsed.
    pub for_gpus: Option<(&'a str, ForTargets)>,
}

/// Something wrong with one of the files: it could not be read, or what it holds is stale
/// or damaged. The other files are still reported; the command fails at the end.
#[derive(Debug)]
pub enum Problem {
    Failed(InspectError),
    Found(String),
}

/// What `fatpack inspect` prints, and its problems.
pub struct Inspection {
    pub text: String,
    pub problems: Vec<Problem>,
}

/// Inspects `files` as `req` asks. Each file is read whole before its report is written: a
/// bad file gives a problem, not half a report. A package (folder, wheel, conda or Debian
/// package) gives one report per binary with device code in it, and a summary.
pub fn inspect_files(files: &[PathBuf], req: &Request) -> Result<Inspection, serde_json::Error> {
    let mut reports = Vec::with_capacity(files.len());
    let mut packages: Vec<(usize, usize, String)> = Vec::new();
    let mut problems = Vec::new();
    for f in files {
        match inspect_package(f) {
            Ok(Some(rs)) => {
                packages.push((reports.len(), rs.len(), f.display().to_string()));
                reports.extend(rs);
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                problems.push(Problem::Failed(e));
                continue;
            }
        }
        match inspect_path(f) {
            Ok(r) => {
                if r.packed.as_ref().is_some_and(|p| !p.digest_matches) {
                    problems.push(Problem::Found(format!(
                        "{}: the store does not match the digest the binary records (stale or \
                         replaced store)",
                        f.display()
                    )));
                }
                // A pack that is there but damaged or another build's is a problem; one that
                // is not installed is how a machine is given only its GPUs' code.
                for pk in r.packed.iter().flat_map(|p| &p.packs) {
                    if pk.state != "ok" && pk.state != crate::packed::MISSING {
                        problems.push(Problem::Found(format!(
                            "{}: pack {}: {}",
                            f.display(),
                            pk.path,
                            pk.state
                        )));
                    }
                }
                reports.push(r);
            }
            Err(e) => problems.push(Problem::Failed(e)),
        }
    }
    if let Some((text, caps)) = &req.for_gpus {
        for r in &mut reports {
            let (entries, _, stored_size, _) = would_keep(r, caps);
            let (kept, not_installed) = kept_entries(r, caps);
            r.would_keep = Some(WouldKeep {
                caps: text.to_string(),
                entries,
                stored_size,
                kept,
                not_installed,
            });
        }
    }
    let text = if req.json {
        serde_json::to_string_pretty(&reports)? + "\n"
    } else if reports.is_empty() {
        // Nothing to report is said, for a package: an empty answer would read as a failure.
        packages
            .iter()
            .map(|(_, _, path)| {
                format!("{path}: no device code (no ELF file or archive in it holds any)\n")
            })
            .collect()
    } else {
        table(&reports, &packages, req)
    };
    Ok(Inspection { text, problems })
}

/// The reports as tables, each package's summary after its last file.
fn table(reports: &[FileReport], packages: &[(usize, usize, String)], req: &Request) -> String {
    let keep_line = |what: &str, rs: &[FileReport]| match &req.for_gpus {
        Some((text, caps)) => {
            let sum = rs
                .iter()
                .map(|r| would_keep(r, caps))
                .fold((0, 0, 0, 0), |a, b| {
                    (a.0 + b.0, a.1 + b.1, a.2 + b.2, a.3 + b.3)
                });
            render_would_keep(what, text, sum)
        }
        None => String::new(),
    };
    let mut parts: Vec<String> = reports
        .iter()
        .map(|r| render(r, req.kernels) + &keep_line(&r.path, std::slice::from_ref(r)))
        .collect();
    for (start, n, path) in packages.iter().rev() {
        let rs = &reports[*start..start + n];
        parts.insert(start + n, render_package(path, rs) + &keep_line(path, rs));
    }
    parts.join("\n")
}
