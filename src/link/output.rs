//! The last steps: the finished output put in place through [`crate::commit`] under ld's
//! policy, and the report of what was packed (`--fatpack-verbose`).

use std::path::{Path, PathBuf};

use super::account::usage;
use super::plan::Planned;
use super::session::{Linked, Session};
use super::LinkError;
use crate::packed;
use crate::size::human;

impl Session {
    /// The finished output put in place as ld puts its own ([`crate::commit::Outputs::for_link`]):
    /// with its side file, if any, the old pair or the new pair. The old output was unlinked
    /// beside the real link ([`super::old_output`]); the commit unlinks again whatever came
    /// since. Returns what is left of `linked` (its temp folder, removed as it drops).
    pub(super) fn commit(
        &mut self,
        linked: Linked,
        pending_side: Option<crate::commit::Staged>,
    ) -> Result<PathBuf, LinkError> {
        self.old_output.settle();
        let side = pending_side.is_some();
        let mut set: Vec<crate::commit::Staged> = pending_side.into_iter().collect();
        set.push(linked.staged);
        std::mem::replace(&mut self.outs, crate::commit::Outputs::for_link()).commit(set)?;
        if !side {
            remove_stale_side_file(&self.line.output);
        }
        Ok(linked.out)
    }
}

/// An earlier side-file link's `<output>.fatpack`, now that the output keeps its store
/// inside: left there it would be read as this binary's store by tools and people. Only a
/// file that is a fatpack store is removed.
pub(super) fn remove_stale_side_file(output: &Path) {
    let side = packed::side_path(output);
    let mut magic = [0u8; 8];
    let is_store = std::fs::File::open(&side)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && (magic == cubin_store::MAGIC || fatpack_format::split::is_manifest(&magic));
    if is_store {
        let _ = std::fs::remove_file(&side);
    }
}

impl Session {
    /// What was packed, and where the time went (`--fatpack-verbose`).
    pub(super) fn report(
        &self,
        planned: &[Planned],
        summary: &cubin_store::StoreSummary,
        mapping: Option<&packed::Mapping>,
    ) {
        if !self.opts.verbose {
            return;
        }
        let steps = &self.account.steps;
        let link_s = steps
            .iter()
            .find(|s| s.name == "link")
            .map_or(0.0, |s| s.seconds);
        eprintln!(
            "fatpack: {}: packed {} modules ({} entries, {} unique blobs): {} of device code stored in {}{}; link {:.3}s, total {:.3}s",
            self.line.output.display(),
            summary.modules,
            summary.entries,
            summary.blobs,
            human(summary.raw_bytes),
            human(summary.file_len),
            if self.opts.side_file { " (side file)" } else { "" },
            link_s,
            self.started.elapsed().as_secs_f64()
        );
        let times: Vec<String> = steps
            .iter()
            .map(|s| format!("{} {:.3}s", s.name, s.seconds))
            .collect();
        eprintln!("fatpack:   steps: {}", times.join(", "));
        // The peak only grows, so the step where it jumps is the one that set it.
        let peaks: Vec<String> = steps
            .iter()
            .map(|s| format!("{} {:.0}", s.name, s.peak_rss_mib))
            .collect();
        let linker = usage(libc::RUSAGE_CHILDREN);
        eprintln!(
            "fatpack:   peak RSS (MiB) after each step: {}; while the linker ran this process held {:.0}, the linker's own peak {:.0}",
            peaks.join(", "),
            self.account.rss_during_link,
            linker.peak_rss_mib
        );
        // Beside the steps' walls: whether the work fatpack does beside the linker slows it
        // (CPU time it spends waiting on memory shows as user time).
        eprintln!(
            "fatpack:   linker CPU: user {:.3}s, sys {:.3}s",
            linker.user_s, linker.sys_s
        );
        eprintln!(
            "fatpack:   inputs: {} ELF files read (archive members included), their headers parsed {} times by the scan and the rewrite",
            self.account.elf_files,
            self.account.parses_in(&["scan inputs", "rewrite inputs"])
        );
        let after = match self.account.parses_in(&["stub output", "write store"]) {
            1 => "once".to_string(),
            2 => "twice".to_string(),
            n => format!("{n} times"),
        };
        eprintln!(
            "fatpack:   output: its headers parsed {after} by the steps after the real link (the direct route's cut counts its check of what it wrote)"
        );
        if let Some(parts) = self.account.after_link.line() {
            eprintln!("fatpack:   after the link, part by part: {parts}");
        }
        eprintln!("fatpack:   runtime: {}", self.runtime.what());
        eprintln!("fatpack:   store: {}", self.account.store_note);
        let rt = &self.account.rewrite_times;
        if !self.linked_as_given {
            eprintln!(
                "fatpack:   rewrite: archive members read {:.2}s, stubs made {:.2}s, archives indexed and written {:.2}s",
                rt.members, rt.stubs, rt.write
            );
        }
        match (mapping, self.opts.side_file) {
            (Some(m), _) => eprintln!(
                "fatpack:   store mapped with the image: PT_LOAD at {:#x}, {} bytes",
                m.vaddr, m.len
            ),
            (None, true) => {}
            (None, false) => eprintln!(
                "fatpack:   store not mapped (the linker gave the glue note no program \
                 header of its own): the runtime reads it from the file"
            ),
        }
        eprintln!("fatpack:   route: {}", self.account.route_note);
        eprintln!("fatpack:   early link: {}", self.account.early_note);
        eprintln!("fatpack:   process: {}", self.account.fork_note);
        let done = match self.linked_as_given {
            true => "linked as given",
            false => "rewrote",
        };
        for p in planned {
            eprintln!("fatpack:   {done} {}", p.path.display());
        }
    }
}
