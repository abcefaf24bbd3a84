//! The file a link replaces, treated as ld treats it. ld refuses a line whose output is one
//! of its inputs (by real path: `ld -r a.o -o ./a.o`, or an output that is a symlink to an
//! input) before it touches anything; fatpack's real link writes into a temp file, so the
//! real linker cannot see that and fatpack checks it itself ([`refuse_an_input`]).
//!
//! ld unlinks an old regular output (or symlink) when it opens its own, before it reads any
//! input (bfd's `unlink_if_ordinary`), so a failed link leaves none. fatpack unlinks it on a
//! thread while its real link runs ([`OldOutput`]), not after: unlinking a file of hundreds
//! of MB frees its blocks, 0.03-0.1 s that otherwise lay between the link and the rename.

use std::path::Path;
use std::thread::JoinHandle;

use super::LinkError;
use crate::ld::LinkLine;

/// The error ld gives where the output is one of the inputs it opens (compared by real
/// path, as ld compares them: a hard link is another file to it, a symlink is not).
pub(super) fn refuse_an_input(line: &LinkLine) -> Result<(), LinkError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(out) = std::fs::metadata(&line.output) else {
        // An output that does not exist yet (or cannot be resolved) is no input.
        return Ok(());
    };
    // The inputs' metadata as the search saw it (a stat only where it has none); a real
    // path (a lookup per component) only for the file itself.
    let same = line
        .inputs
        .iter()
        .filter_map(|i| Some((i.resolved.as_deref()?, i.meta())))
        .filter(|(p, meta)| {
            let id = |m: &std::fs::Metadata| (m.dev(), m.ino());
            match meta {
                Some(m) => id(m) == id(&out),
                None => std::fs::metadata(p).is_ok_and(|m| id(&m) == id(&out)),
            }
        })
        .map(|(p, _)| p)
        .find(|p| {
            let real = |p: &Path| std::fs::canonicalize(p).ok();
            real(p).is_some_and(|p| Some(p) == real(&line.output))
        });
    match same {
        Some(input) => Err(LinkError::InputIsOutput(input.to_path_buf())),
        None => Ok(()),
    }
}

/// The old output being unlinked beside the real link; joined before anything else may
/// write the output's name (the rename into place, or a plain link into it), and on drop.
#[derive(Default)]
pub(super) struct OldOutput(Option<JoinHandle<()>>);

impl OldOutput {
    /// Starts unlinking `output` if it is a regular file or a symlink (a device or a FIFO is
    /// written into, as ld writes into it). Once only: a second call does nothing. An error
    /// is not reported here: the rename into place unlinks again and reports it there.
    pub(super) fn start(&mut self, output: &Path) {
        if self.0.is_some() {
            return;
        }
        let ordinary = std::fs::symlink_metadata(output)
            .is_ok_and(|m| m.is_file() || m.file_type().is_symlink());
        if !ordinary {
            return;
        }
        let path = output.to_path_buf();
        self.0 = std::thread::Builder::new()
            .name("fatpack-unlink".into())
            .spawn(move || {
                let _ = std::fs::remove_file(path);
            })
            .ok();
    }

    /// Waits until the unlink started, if any, is done.
    pub(super) fn settle(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

impl Drop for OldOutput {
    fn drop(&mut self) {
        self.settle();
    }
}
