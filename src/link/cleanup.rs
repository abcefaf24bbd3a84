//! fatpack's temp folders never outlive a link: removed when the link ends, on SIGINT,
//! SIGTERM or SIGHUP (the real linker is stopped with the same signal first), and, for what
//! SIGKILL leaves behind, by the next run, which sweeps folders whose process is gone (their
//! names carry its pid). The mechanism is every command's: [`crate::commit::signals`].

use std::path::Path;

use super::LinkError;
use crate::commit::signals;
use crate::error::io_at;

/// Prefix of the private folder in `$TMPDIR` (the temp output beside the output is the
/// commit's: `crate::commit::Outputs::made_by_linker`), followed by the pid.
pub(super) const WORK_PREFIX: &str = "fatpack-ld-";

/// A temp folder `<dir>/<prefix><pid>-XXXXXX`, removed on drop or on a signal.
pub(super) fn temp_folder(prefix: &str, dir: &Path) -> Result<signals::TempFolder, LinkError> {
    Ok(signals::TempFolder::new(prefix, dir).map_err(io_at(dir))?)
}

/// Starts the real linker (`start` spawns it), known to the signal handler from its start
/// to its end ([`wait_linker`]); dropped unwaited, it is stopped.
pub(super) fn start_linker(
    start: impl FnOnce() -> Result<std::process::Child, crate::ld::real::RealLdError>,
) -> Result<signals::Running, LinkError> {
    Ok(signals::spawn_child(start)?)
}

/// Waits for the real linker [`start_linker`] started, and collects its output.
pub(super) fn wait_linker(running: signals::Running) -> Result<std::process::Output, LinkError> {
    running.wait().map_err(LinkError::Wait)
}
