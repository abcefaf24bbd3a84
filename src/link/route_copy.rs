//! The copy route: each input with device code copied with its containers replaced by
//! stubs ([`super::plan::rewrite_input`]), in a private temp folder, and the real linker
//! given the copies.

use super::plan::{numbered, rewrite_input, Names, Planned};
use super::script_copies::{replacements, Copied, Replacements};
use super::session::{machine_of, Rewritten, Session};
use super::LinkError;
use crate::error::io_at;

impl Session {
    /// A copy of each planned input with its containers replaced by stubs, in a private temp
    /// folder; the link's machine from the first of them.
    pub(super) fn rewrite_inputs(
        &mut self,
        planned: &mut [Planned],
    ) -> Result<Rewritten, LinkError> {
        let work = self.work_folder()?;
        // From the headers the scan read, before the rewrite lets them go.
        let machine = machine_of(planned)?;
        let mut names = Names::default();
        let mut extracted = Vec::new();
        let mut dests = Vec::with_capacity(planned.len());
        let count = planned.len();
        for (seq, p) in planned.iter_mut().enumerate() {
            self.progress.step(format!(
                "rewriting input {}/{}: {}",
                seq + 1,
                count,
                p.path.display()
            ));
            dests.push(rewrite_input(
                p,
                seq,
                work.path(),
                &mut names,
                &mut extracted,
                &self.maps,
                &mut self.account.rewrite_times,
            )?);
        }
        // An input named inside an implicit script is named by a copy of the script.
        let copied = planned.iter().zip(dests).map(|(p, copy)| Copied {
            id: p.id,
            within: &p.within,
            copy,
            original: &p.path,
        });
        let mut seq = count;
        let Replacements { replace, copies } = replacements(&self.line, copied, |script, text| {
            let dest = work.path().join(numbered(seq, script));
            seq += 1;
            std::fs::write(&dest, text).map_err(io_at(&dest))?;
            Ok(dest)
        })?;
        self.maps.release_all();
        Ok(Rewritten {
            work,
            extracted,
            replace,
            copies,
            machine,
            extra: Vec::new(),
            sources: Vec::new(),
        })
    }
}
