//! What a prune says it did: lines for a person (each at most [`WIDTH`] columns, a long
//! clause list wrapped) and JSON for a script, from one [`PruneReport`].

use std::path::Path;

use fatpack_format::select::capability_string;

use super::{describe, PruneReport};

/// The widest line the report writes, prefix included.
pub const WIDTH: usize = 100;
const PREFIX: &str = "fatpack prune: ";

/// `line` as lines of at most [`WIDTH`] columns after [`PREFIX`], broken between words,
/// the continuations indented (a single word longer than that, a path, stays whole).
fn wrap(line: &str) -> Vec<String> {
    let room = WIDTH - PREFIX.len();
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in line.split(' ').filter(|w| !w.is_empty()) {
        if !cur.trim().is_empty() && cur.len() + 1 + word.len() > room {
            out.push(std::mem::replace(&mut cur, "  ".to_string()));
        } else if !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push(cur);
    out
}

/// The report as a person reads it, one string per line (without the `fatpack prune: `
/// prefix the caller adds).
pub fn lines(r: &PruneReport, input: &Path, output: &Path) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if r.no_device_code {
        out.push(format!(
            "{}: has no device code: copied as it is to {}",
            input.display(),
            output.display()
        ));
        return out;
    }
    for line in describe(&r.chosen) {
        out.extend(wrap(&line));
    }
    if !r.absent.is_empty() {
        let l = format!(
            "{}: has no {} (kept what it has of the list)",
            input.display(),
            r.absent.join(", ")
        );
        out.extend(wrap(&l));
    }
    for f in &r.files {
        out.push(format!(
            "{}: {} -> {} bytes ({} of {} entries kept)",
            f.path, f.size_before, f.size_after, f.report.entries_after, f.report.entries_before
        ));
        if let Some(why) = &f.report.in_place {
            out.extend(wrap(&format!(
                "  in place: {} bytes of dropped device code stay in it as zeros, which \
                 a package does not shrink ({why})",
                f.report.stays
            )));
        }
        for l in stayed(&f.report) {
            out.extend(wrap(&format!("  {l}")));
        }
    }
    if let Some(w) = &r.package {
        let what = match (&w.label, &w.version) {
            (Some(label), _) => format!("variant {label}"),
            (None, Some(version)) => format!("version {version}"),
            (None, None) => "folder".to_string(),
        };
        out.push(format!("wrote {}", w.path.display()));
        out.push(format!("  as {what}"));
        if let Some(fat) = &w.beside_fat {
            out.extend(wrap(&format!(
                "warning: it is beside the fat wheel {fat}: from a folder or index that holds \
                 both, pip and uv install it on every machine (PEP 440 ranks a local version \
                 above its public one, and `==` matches it); serve it from an index of its \
                 own (`fatpack index FOLDER -o SITE` writes one per label)"
            )));
        }
        let gpus: Vec<String> = w.claims.iter().map(|c| capability_string(*c)).collect();
        match (gpus.is_empty(), r.files.is_empty()) {
            (_, true) => out.push("no file in it holds device code: copied as it is".into()),
            (true, false) => {}
            (false, false) => out.extend(wrap(&format!(
                "serves GPUs {} as the whole build did",
                gpus.join(", ")
            ))),
        }
    }
    out.push(format!(
        "{}: kept {} of {} entries; device code {} -> {} bytes",
        output.display(),
        r.entries_after,
        r.entries_before,
        r.bytes_before,
        r.bytes_after
    ));
    for l in stayed(r) {
        out.extend(wrap(&format!("note: {l}")));
    }
    if let Some(why) = &r.in_place {
        out.extend(wrap(&format!(
            "note: {} keeps its size: the freed device code cannot be cut out of it ({why}), \
             so the {} dropped bytes are zeroed and punched out as holes (less disk use, but \
             copies, tar, zip, NAR and wheels keep the full size).",
            output.display(),
            r.stays
        )));
    }
    out
}

/// For a cut file, each device section of the program's own data that stays where it is:
/// why, and the dropped bytes that stay with it (nothing where none do).
fn stayed(r: &PruneReport) -> Vec<String> {
    if r.stay.is_empty() || r.in_place.is_some() || r.stays == 0 {
        return Vec::new();
    }
    let mut out: Vec<String> = r
        .stay
        .iter()
        .map(|(section, why)| format!("{section} stays where it is, pruned in place: {why}"))
        .collect();
    out.push(format!(
        "{} bytes of dropped device code stay in the file as zeros (holes on disk; a copy, \
         tar, zip, NAR or wheel keeps them)",
        r.stays
    ));
    out
}

/// The report for a script (`prune --json`).
pub fn json(r: &PruneReport, input: &Path, output: &Path) -> serde_json::Value {
    let chosen: serde_json::Map<String, serde_json::Value> = r
        .chosen
        .iter()
        .map(|(cap, names)| {
            (
                crate::selection::chosen_name(*cap),
                serde_json::json!(names),
            )
        })
        .collect();
    let files: Vec<serde_json::Value> = r
        .files
        .iter()
        .map(|f| {
            serde_json::json!({
                "path": f.path,
                "size_before": f.size_before,
                "size_after": f.size_after,
                "entries_before": f.report.entries_before,
                "entries_after": f.report.entries_after,
                "device_bytes_before": f.report.bytes_before,
                "device_bytes_after": f.report.bytes_after,
                "in_place": f.report.in_place,
                "stays_in_place": stay_json(&f.report),
            })
        })
        .collect();
    let package = r.package.as_ref().map(|w| {
        serde_json::json!({
            "path": w.path,
            "version": w.version,
            "label": w.label,
            "serves": w.claims.iter().map(|c| capability_string(*c)).collect::<Vec<_>>(),
        })
    });
    serde_json::json!({
        "input": input,
        "output": output,
        "entries_before": r.entries_before,
        "entries_after": r.entries_after,
        "device_bytes_before": r.bytes_before,
        "device_bytes_after": r.bytes_after,
        "chosen": chosen,
        "absent": r.absent,
        "in_place": r.in_place,
        "no_device_code": r.no_device_code,
        "stays_in_place": stay_json(r),
        "files": files,
        "package": package,
    })
}

/// What stays in place, for a script: each section and why, and the bytes.
fn stay_json(r: &PruneReport) -> serde_json::Value {
    let sections: Vec<serde_json::Value> = r
        .stay
        .iter()
        .map(|(section, why)| serde_json::json!({"section": section, "why": why}))
        .collect();
    serde_json::json!({"sections": sections, "bytes": r.stays})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_clause_boundaries() {
        let clauses: Vec<String> = (0..40).map(|i| format!("sm_{i} ({i} modules)")).collect();
        let line = format!("for 9.0: {}", clauses.join(", "));
        let out = wrap(&line);
        assert!(out.len() > 1);
        assert!(
            out.iter().all(|l| l.len() + PREFIX.len() <= WIDTH),
            "{out:?}"
        );
        assert_eq!(out.concat().matches("modules").count(), 40);
        assert_eq!(wrap("short line"), ["short line"]);
    }
}
