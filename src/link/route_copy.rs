//! The copy route: each input with device code copied with its containers replaced by
//! stubs ([`super::plan::rewrite_input`]), in a private temp folder, and the real linker
//! given the copies.

use std::collections::BTreeMap;

use super::plan::{rewrite_input, Names, Planned};
use super::session::{machine_of, Rewritten, Session};
use super::LinkError;

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
        let (mut extracted, mut replace) = (Vec::new(), BTreeMap::new());
        let count = planned.len();
        for (seq, p) in planned.iter_mut().enumerate() {
            self.progress.step(format!(
                "rewriting input {}/{}: {}",
                seq + 1,
                count,
                p.path.display()
            ));
            let dest = rewrite_input(
                p,
                seq,
                work.path(),
                &mut names,
                &mut extracted,
                &self.maps,
                &mut self.account.rewrite_times,
            )?;
            replace.insert(p.id, dest);
        }
        self.maps.release_all();
        Ok(Rewritten {
            work,
            extracted,
            replace,
            machine,
            extra: Vec::new(),
            sources: Vec::new(),
        })
    }
}
