//! The store step: made ready on the CPUs the real linker leaves idle ([`Preparing`]), then
//! written from the modules the link used, into the output's `.fatpack` section or the side
//! file, with its digest in the slot.

use std::collections::HashMap;

use cubin_store::WriteOptions;

use super::session::{Linked, Rewritten, Session};
use super::LinkError;
use crate::packed;
use crate::rewrite::Extracted;
use crate::size::human;

/// The store being made ready beside the real linker ([`Session::prepare_store`]).
pub(super) struct Preparing {
    pub(super) signals: std::sync::Arc<crate::store::ready::Signals>,
    pub(super) handle: Option<
        std::thread::JoinHandle<Result<crate::store::ready::Ready, crate::store::StoreBuildError>>,
    >,
}

impl Preparing {
    /// The real linker is done: the rest of the work may take every CPU.
    pub(super) fn linked(&self) {
        self.signals
            .linking
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// The linker used `names`: only those are still to be made ready.
    pub(super) fn use_only(&self, names: &[String]) {
        let _ = self.signals.used.set(names.iter().cloned().collect());
    }

    /// Waits for it.
    pub(super) fn finish(
        mut self,
    ) -> Result<crate::store::ready::Ready, crate::store::StoreBuildError> {
        match self.handle.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            // A panic there is a bug; the store is then written after the link.
            Some(Err(_)) | None => Err(crate::store::StoreBuildError::Cancelled),
        }
    }
}

impl Drop for Preparing {
    /// A link that failed, or an error before the store: the work stops at its next window.
    fn drop(&mut self) {
        self.signals
            .cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// What the store step wrote.
pub(super) struct Stored {
    pub(super) summary: cubin_store::StoreSummary,
    /// A side-file store written but not yet in place (it goes with the binary).
    pub(super) pending_side: Option<crate::commit::Staged>,
    /// Where the store was mapped with the image (None: side file, or no header to spare).
    pub(super) mapping: Option<packed::Mapping>,
}

impl Session {
    /// Starts making the store ready on the CPUs the real linker leaves idle
    /// ([`crate::store::ready`]): every module the rewrite took out, before the linker says
    /// which it uses. Not for a release store (its groups are made from the used modules).
    pub(super) fn prepare_store(&self, r: &Rewritten) -> Option<Preparing> {
        if self.opts.release.is_some() {
            return None;
        }
        let signals = std::sync::Arc::new(crate::store::ready::Signals::default());
        signals
            .linking
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (maps, modules, dir) = (
            self.maps.clone(),
            r.extracted.clone(),
            r.work.path().to_path_buf(),
        );
        let (level, frames, sig) = (self.opts.level, self.opts.frames, signals.clone());
        let handle = std::thread::Builder::new()
            .name("fatpack-store".into())
            .spawn(move || crate::store::ready::prepare(&modules, &maps, level, frames, &dir, &sig))
            .ok()?;
        Some(Preparing {
            signals,
            handle: Some(handle),
        })
    }

    /// The store of the modules the link really used (read back from the output's stubs),
    /// into the output's `.fatpack` section or the side file, and its digest into the slot:
    /// from what [`Session::prepare_store`] made ready, or, where that failed (a module the
    /// link may not use could not be read), from the inputs now.
    pub(super) fn write_store(
        &mut self,
        r: &Rewritten,
        linked: &mut Linked,
        ready: Option<Preparing>,
    ) -> Result<Stored, LinkError> {
        // The output's headers, read once for the whole step (or kept from the cut).
        let mut out = match linked.opened.take() {
            Some(o) => o,
            None => crate::elf::OpenElf::open(&linked.out)?,
        };
        let parts = &mut self.account.after_link;
        let used = parts
            .time("modules used", || packed::linked_modules_in(&out))
            .map_err(|e| with_likely_cause(&self.line, e))?;
        let ready = match parts.time("store made ready", || {
            ready.map(|r| {
                r.use_only(&used);
                r.finish()
            })
        }) {
            Some(Ok(ready)) => {
                self.account.store_note = format!(
                    "made ready beside the linker in {:.2}s ({} of {} modules, {} of blobs kept)",
                    ready.seconds,
                    ready.module_count(),
                    r.extracted.len(),
                    human(ready.kept_bytes),
                );
                Some(ready)
            }
            Some(Err(e)) => {
                self.account.store_note = format!("written after the link (made ready: {e})");
                None
            }
            None => {
                self.account.store_note = "written after the link (release store)".into();
                None
            }
        };
        let by_name: HashMap<&str, &Extracted> =
            r.extracted.iter().map(|e| (e.module.as_str(), e)).collect();
        let mut modules = Vec::with_capacity(used.len());
        for s in &used {
            let m = by_name
                .get(s.as_str())
                .ok_or_else(|| LinkError::ForeignModule {
                    output: self.line.output.clone(),
                    module: s.clone(),
                })?;
            modules.push(*m);
        }
        let wopts = WriteOptions {
            level: self.opts.level,
            dictionary: None,
            frames: self.opts.frames,
        };
        let maps = &self.maps;
        // On a terminal: modules and bytes stored so far.
        let total: u64 = modules.iter().map(|m| m.len).sum();
        let (progress, mut done) = (&self.progress, 0u64);
        let mut before = |i: usize| {
            progress.step(format!(
                "storing module {}/{} ({} of {} of fatbins)",
                i + 1,
                modules.len(),
                human(done),
                human(total)
            ));
            done += modules[i].len;
        };
        let from = match &ready {
            Some(ready) => crate::store::Source::Ready(ready),
            None => crate::store::Source::Inputs {
                maps,
                release: self.opts.release,
            },
        };
        let parts = &mut self.account.after_link;
        let (summary, pending_side) = parts.time("store written", || {
            if self.opts.side_file {
                let mut side = self.outs.file(&packed::side_path(&self.line.output))?;
                let summary = side.write_with(|w| -> Result<_, LinkError> {
                    Ok(crate::store::write_link_store(
                        w,
                        &modules,
                        wopts,
                        &from,
                        &mut before,
                    )?)
                })?;
                // Put in place with the binary, in commit, never before.
                Ok::<_, LinkError>((summary, Some(side)))
            } else {
                let summary = packed::append_store_in(&mut out, |w| -> Result<_, LinkError> {
                    Ok(crate::store::write_link_store(w, &modules, wopts, &from, &mut before)?.1)
                })?;
                Ok((summary, None))
            }
        })?;
        let mapping = parts.time("digest and mapping", || {
            packed::finish_in(&mut out, &summary.digest, !self.opts.side_file)
        })?;
        Ok(Stored {
            summary,
            pending_side,
            mapping,
        })
    }
}

/// `e`, an output holding device code no stub replaced, said with its likely cause: the
/// line's `-T` or `-dT` script names files itself (those are not scanned; an implicit
/// script's are, [`crate::ld::LinkLine::files`]), or libraries fatpack did not find were found
/// by the real linker (its command searches directories fatpack was not told of).
fn with_likely_cause(line: &crate::ld::LinkLine, e: packed::OutputError) -> LinkError {
    if !matches!(e, packed::OutputError::Bad { .. }) {
        return e.into();
    }
    let script = line
        .scripts
        .iter()
        .find(|s| s.info.as_ref().is_some_and(|i| !i.entries.is_empty()));
    if let Some(s) = script {
        return LinkError::UnscannedScriptInputs {
            script: s.resolved.clone().unwrap_or_else(|| s.name.clone().into()),
            source: Box::new(e),
        };
    }
    let unfound: Vec<String> = line
        .inputs
        .iter()
        .filter(|i| i.file_kind == Some(crate::ld::InputFileKind::Missing))
        .filter_map(crate::ld::Input::library_spelling)
        .collect();
    if unfound.is_empty() {
        return e.into();
    }
    LinkError::UnfoundLibraries {
        libraries: unfound,
        source: Box::new(e),
    }
}
