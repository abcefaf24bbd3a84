//! The progress line on a terminal (never in a build log): the link's steps, a package
//! prune's members.

use std::io::IsTerminal;

pub(crate) struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    pub(crate) fn new() -> Self {
        // Only for a person watching: a terminal, not a build log.
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let pb = indicatif::ProgressBar::new_spinner();
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        Progress(Some(pb))
    }
    pub(crate) fn step(&self, msg: impl Into<String>) {
        if let Some(pb) = &self.0 {
            pb.set_message(format!("fatpack: {}", msg.into()));
        }
    }
    pub(crate) fn done(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}
