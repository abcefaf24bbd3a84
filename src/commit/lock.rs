//! Concurrent writers of one output set take turns: each holds an exclusive `flock` on the
//! folders it renames into while it renames, so that the last writer wins every file of the
//! set, never some of them.

use std::fs::File;
use std::path::Path;

use crate::error::{io_at, IoError};

/// An exclusive `flock` on a folder, released when dropped (with the descriptor).
pub struct FolderLock(#[allow(dead_code)] File);

impl FolderLock {
    pub fn take(dir: &Path) -> Result<FolderLock, IoError> {
        use std::os::unix::io::AsRawFd;
        let f = File::open(dir).map_err(io_at(dir))?;
        loop {
            // SAFETY: flock on a descriptor this function owns; no memory is involved.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(FolderLock(f));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io_at(dir)(e));
            }
        }
    }
}
