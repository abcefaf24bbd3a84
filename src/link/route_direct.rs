//! The direct route: the real linker links the inputs as given, with the tail script placing
//! the device sections last; each container in its output is then replaced by its module's
//! stub and the file cut short ([`super::stub_output`]). Its link may start before the scan
//! ([`Early`]).

use std::collections::BTreeMap;

use super::glue;
use super::options::{EarlyLink, Route};
use super::plan::Planned;
use super::scan::{first_object_machine, names_a_large_archive, names_cudart};
use super::session::Linking;
use super::session::{machine_of, Linked, Rewritten, RuntimeFiles, Session};
use super::stub_output::{Keys, NotStubbed};
use super::LinkError;
use crate::size::human;

/// The direct route's link, started before the scan on the guess that the scan will find
/// device code and leave the direct route open ([`Session::start_early`]). The line it runs
/// does not depend on what the scan finds, only on the link's machine, which is checked
/// against the scan's before it is used.
pub(super) struct Early {
    pub(super) r: Rewritten,
    pub(super) runtime: RuntimeFiles,
    pub(super) linking: Linking,
}

impl Session {
    /// The direct route ([`super::direct`]): the exit code of a link it finished or that
    /// failed; None where its output cannot be cut (nothing is kept of it, and the copy
    /// route follows).
    pub(super) fn direct(
        &mut self,
        planned: &[Planned],
        script: &str,
        early: Option<Early>,
    ) -> Result<Option<i32>, LinkError> {
        // The early link is the direct route's link, if it was made for the same machine.
        let early = match early {
            Some(e) if machine_of(planned).ok() == Some(e.r.machine) => {
                self.account.early_note = "started before the scan, and used";
                Some(e)
            }
            Some(_) => {
                self.account.early_note = "stopped: the scan found another machine";
                None
            }
            None => None,
        };
        let (r, runtime, linking) = match early {
            Some(Early {
                mut r,
                runtime,
                linking,
            }) => {
                self.step("name modules", |s| {
                    (r.extracted, r.sources) = super::stub_output::modules(planned, &s.maps)?;
                    Ok(())
                })?;
                (r, runtime, linking)
            }
            None => {
                let r = self.step("name modules", |s| s.direct_inputs(planned, script))?;
                let runtime = self.step("add runtime and glue", |s| {
                    s.add_runtime(&planned[0].path, &r)
                })?;
                let linking = self.start_link(&r, &runtime)?;
                (r, runtime, linking)
            }
        };
        let ready = self.prepare_store(&r);
        // What the stub step needs of the inputs, while the linker runs.
        let keys = self.step("key modules", |s| Keys::of(&r.extracted, &s.maps))?;
        let (code, mut linked) = self.step("link", |s| s.finish_link(linking))?;
        if let Some(p) = &ready {
            p.linked();
        }
        if code != 0 {
            self.progress.done();
            return Ok(Some(code));
        }
        match self.step("stub output", |s| s.stub_output(&r, keys, &mut linked))? {
            Ok(()) => {}
            Err(NotStubbed::Refused(why)) => {
                self.account.route_note =
                    format!("copy: the direct route's output could not be cut ({why})");
                return Ok(None);
            }
            // The link is still made, through copies, but this must be heard of.
            Err(NotStubbed::Failed(why)) => {
                eprintln!(
                    "fatpack: warning: {}: {why}; linking through copies of the inputs instead",
                    self.line.output.display()
                );
                self.account.route_note =
                    format!("copy: the direct route's cut failed its check ({why})");
                return Ok(None);
            }
        }
        // `finish` takes the planned inputs for its report only.
        let planned = planned
            .iter()
            .map(|p| Planned {
                id: p.id,
                within: p.within.clone(),
                path: p.path.clone(),
                kind: p.kind,
                sections: Vec::new(),
            })
            .collect();
        self.finish(planned, r, runtime, linked, ready).map(Some)
    }

    /// The direct route's inputs: the user's, as given, with the tail script `script`, and
    /// the name of every module they hold (nothing is copied).
    pub(super) fn direct_inputs(
        &mut self,
        planned: &[Planned],
        script: &str,
    ) -> Result<Rewritten, LinkError> {
        let work = self.work_folder()?;
        let machine = machine_of(planned)?;
        let path = super::tail::write_script(work.path(), script)?;
        let (extracted, sources) = super::stub_output::modules(planned, &self.maps)?;
        Ok(Rewritten {
            extracted,
            sources,
            replace: BTreeMap::new(),
            copies: Vec::new(),
            machine,
            extra: super::tail::script_args(&path),
            work,
        })
    }

    /// The direct route's link, started before the scan where it is likely to be the link
    /// made ([`Early`], [`EarlyLink`]): the route is not `copy`, this linker takes the tail
    /// script, and the first object gives the machine. Where the scan then finds no device code, or sends
    /// the link down the copy route, this link is stopped and the one made instead is
    /// exactly what it would have been without it: only the scan's time is gained or lost.
    pub(super) fn start_early(&mut self) -> Result<Option<Early>, LinkError> {
        let guess = match self.opts.early_link {
            EarlyLink::No => false,
            EarlyLink::Yes => true,
            EarlyLink::Auto => names_cudart(&self.line) && names_a_large_archive(&self.line),
        };
        if !guess || self.opts.route == Route::Copy || self.opts.save_temps || self.opts.dry_run {
            return Ok(None);
        }
        let (Ok(script), Some(machine)) = (self.direct_script(), first_object_machine(&self.line))
        else {
            return Ok(None);
        };
        if glue::architecture(machine).is_none() {
            return Ok(None);
        }
        let work = self.work_folder()?;
        let path = super::tail::write_script(work.path(), script)?;
        let r = Rewritten {
            extracted: Vec::new(),
            sources: Vec::new(),
            replace: BTreeMap::new(),
            copies: Vec::new(),
            machine,
            extra: super::tail::script_args(&path),
            work,
        };
        let runtime = self.add_runtime(&self.line.output.clone(), &r)?;
        let linking = self.start_link(&r, &runtime)?;
        self.account.early_note = "started before the scan";
        Ok(Some(Early {
            r,
            runtime,
            linking,
        }))
    }

    /// The direct route's output, its containers replaced by stubs and cut short; or why
    /// that cannot be done (the copy route is then taken).
    pub(super) fn stub_output(
        &mut self,
        r: &Rewritten,
        keys: Keys,
        linked: &mut Linked,
    ) -> Result<Result<(), NotStubbed>, LinkError> {
        let done = super::stub_output::stub_output(
            &linked.out,
            &r.extracted,
            &r.sources,
            keys,
            &self.maps,
            &mut self.account.after_link,
        )?;
        if let Ok(d) = done {
            self.linked_as_given = true;
            self.account.route_note = format!(
                "direct: the inputs linked as given, {} containers replaced by stubs in the output, {} of {} kept",
                d.containers,
                human(d.after),
                human(d.before)
            );
            linked.opened = Some(d.file);
            return Ok(Ok(()));
        }
        Ok(done.map(|_| ()))
    }
}
