//! The human-readable table.

use std::fmt::Write;

use super::FileReport;
use crate::size::human;

fn ratio(stored: u64, raw: u64) -> String {
    if raw == 0 {
        "-".into()
    } else {
        format!("{:.1}%", stored as f64 * 100.0 / raw as f64)
    }
}

/// Draw one file's report. `kernels` adds the demangled kernel names under each entry.
pub fn render(r: &FileReport, kernels: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}: {}", r.path, r.kind.name());
    render_packed(&mut s, r);
    if r.modules.is_empty() {
        let _ = writeln!(s, "  no device code");
        return s;
    }
    render_modules(&mut s, r, kernels);
    if r.modules
        .iter()
        .flat_map(|m| &m.entries)
        .any(|e| e.relocatable)
    {
        let _ = writeln!(s, "  (* relocatable device code, -rdc=true)");
    }
    if r.sections.len() > 1 || r.sections.iter().any(|t| t.loaded_by == "program") {
        let _ = writeln!(s, "  per section:");
        for t in &r.sections {
            let who = match t.loaded_by {
                "program" => "loaded by the program itself (driver API)",
                "cudart" => "registered through cudart",
                other => other,
            };
            let _ = writeln!(
                s,
                "    {:<16} {:>6} containers {:>11} stored, {who}",
                t.section,
                t.containers,
                human(t.stored_size)
            );
        }
    }
    let _ = writeln!(s, "  per arch:");
    for t in &r.per_arch {
        let _ = writeln!(
            s,
            "    {:<11} {:<5} {:>4} entries {:>11} raw {:>11} stored ({})",
            t.arch,
            t.kind,
            t.entries,
            human(t.raw_size),
            human(t.stored_size),
            ratio(t.stored_size, t.raw_size)
        );
    }
    let t = &r.totals;
    if t.dead_entries > 0 {
        let _ = writeln!(
            s,
            "  dead: {} entries, {} stored, that no GPU would load (`fatpack prune --dead` drops them)",
            t.dead_entries,
            human(t.dead_stored_size)
        );
    }
    let _ = writeln!(
        s,
        "  total: {} modules, {} entries, {} kernels, {} raw, {} stored ({})",
        t.modules,
        t.entries,
        t.kernels,
        human(t.raw_size),
        human(t.stored_size),
        ratio(t.stored_size, t.raw_size)
    );
    s
}

/// The packed store's line and its packs', if the file is packed.
fn render_packed(s: &mut String, r: &FileReport) {
    if let Some(p) = &r.packed {
        let _ = writeln!(
            s,
            "  packed by fatpack: store in {}{} ({}), digest {} {}",
            p.store,
            if p.mapped {
                ", mapped with the image"
            } else {
                ""
            },
            human(p.store_size),
            &p.digest[..16],
            if p.digest_matches {
                "matches the binary"
            } else {
                "DOES NOT MATCH the digest the binary records"
            }
        );
        for pk in &p.packs {
            let _ = writeln!(
                s,
                "  pack {} ({}, {}): {}",
                pk.path,
                pk.holds,
                human(pk.size),
                pk.state
            );
        }
    }
}

/// Each module's entries, a row each, with what is notable about each under it.
fn render_modules(s: &mut String, r: &FileReport, kernels: bool) {
    for (i, m) in r.modules.iter().enumerate() {
        let section = if m.section.is_empty() {
            String::new()
        } else {
            format!(" [{}]", m.section)
        };
        let _ = writeln!(s, "  module {i}: {}{section}", m.origin);
        let _ = writeln!(
            s,
            "    {:<12} {:<5} {:<5} {:>11} {:>11} {:>7} {:>7}",
            "arch", "kind", "codec", "raw", "stored", "ratio", "kernels"
        );
        for e in &m.entries {
            let kind = if e.relocatable {
                format!("{}*", e.kind)
            } else {
                e.kind.clone()
            };
            let _ = writeln!(
                s,
                "    {:<12} {:<5} {:<5} {:>11} {:>11} {:>7} {:>7}",
                e.arch,
                kind,
                e.compression,
                human(e.raw_size),
                human(e.stored_size),
                ratio(e.stored_size, e.raw_size),
                e.kernel_count
            );
            if e.dead {
                let _ = writeln!(s, "        dead: no GPU would load it");
            }
            if let Some(why) = &e.not_decoded {
                let _ = writeln!(s, "        not decoded: {why}");
            }
            if kernels {
                for k in &e.kernels {
                    let _ = writeln!(s, "        {}", k.demangled);
                }
            }
        }
    }
}

/// The summary of a package: its files with device code, device code by arch summed over
/// them, and the dead entries `prune --dead` would drop.
pub fn render_package(path: &str, reports: &[FileReport]) -> String {
    let (per_arch, t) = super::summary(reports);
    let mut out = String::new();
    let files = match reports.len() {
        1 => "1 file".to_string(),
        n => format!("{n} files"),
    };
    let _ = writeln!(
        out,
        "package {path}: {files} with device code, {} modules, {} entries, {} stored ({} raw)",
        t.modules,
        t.entries,
        human(t.stored_size),
        human(t.raw_size)
    );
    let _ = writeln!(
        out,
        "  dead entries (no GPU loads them; `prune --dead` drops them): {}, {}",
        t.dead_entries,
        human(t.dead_stored_size)
    );
    let _ = writeln!(
        out,
        "  {:<12} {:<5} {:>8} {:>12}",
        "arch", "kind", "entries", "stored"
    );
    for a in &per_arch {
        let _ = writeln!(
            out,
            "  {:<12} {:<5} {:>8} {:>12}",
            a.arch,
            a.kind,
            a.entries,
            human(a.stored_size)
        );
    }
    out
}

/// What `prune --for` would keep: one line for a file or a package (`what`).
pub fn render_would_keep(what: &str, caps: &str, kept: (usize, usize, u64, u64)) -> String {
    let (k, n, kb, b) = kept;
    format!(
        "prune --for {caps} would keep of {what}: {k} of {n} entries, {} of {} stored ({})\n",
        human(kb),
        human(b),
        ratio(kb, b)
    )
}
