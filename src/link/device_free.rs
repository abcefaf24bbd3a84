//! Inputs known to hold no device code, kept between links. libgcc.a, libc_nonshared.a and
//! the C library are on every gcc line, and proving them free of device code maps and
//! searches their megabytes on every link: on the dev machine that was about a fifth of what
//! `fatpack ld` added to a small link.
//!
//! An entry is an empty file under `<cache>/no-device-code/` (the cache of
//! [`crate::ld::defaults::cache`]: `$FATPACK_CACHE_DIR`, empty for none) named by a 128-bit
//! digest of the input's identity: its path, device, inode, size, and modification and
//! change times. A file rewritten in place gets a new change time, which no one can set back,
//! and a file renamed over it a new inode, so an entry never outlives what it says. Only the
//! answer "no device code" is kept (an input that has some is read anyway), and only for
//! inputs of [`MIN_LEN`] bytes and more (a smaller one is searched faster than looked up).
//! Nothing here is ever an error: a cache that is off, unreadable or read-only only means
//! the search runs.

use std::fs::Metadata;
use std::hash::{Hash, Hasher};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::ld::InputFileKind;

/// Below this an input is searched rather than looked up.
pub(super) const MIN_LEN: u64 = 64 << 10;

/// The entries' folder, if the cache is on.
pub(super) struct DeviceFree {
    dir: Option<PathBuf>,
}

impl DeviceFree {
    pub(super) fn new() -> Self {
        DeviceFree {
            dir: crate::ld::defaults::cache::cache_dir().map(|d| d.join("no-device-code")),
        }
    }

    /// The entry `path` would have, if the cache is on, the input large enough, and not a
    /// thin archive (its members are files of their own, which its identity does not
    /// follow).
    fn entry(&self, path: &Path, m: &Metadata, kind: Option<InputFileKind>) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        if kind == Some(InputFileKind::ThinArchive) {
            return None;
        }
        if m.len() < MIN_LEN {
            return None;
        }
        let digest = |salt: u8| {
            let mut h = std::hash::DefaultHasher::new();
            (
                salt,
                "fatpack no-device-code 1",
                path.as_os_str().as_bytes(),
            )
                .hash(&mut h);
            (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()).hash(&mut h);
            (m.ctime(), m.ctime_nsec()).hash(&mut h);
            h.finish()
        };
        Some(dir.join(format!("{:016x}{:016x}", digest(0), digest(1))))
    }

    /// Whether an earlier link found `path`, as it is now (`m`, its metadata), free of device
    /// code.
    pub(super) fn known(&self, path: &Path, m: &Metadata, kind: Option<InputFileKind>) -> bool {
        self.entry(path, m, kind)
            .is_some_and(|e| std::fs::symlink_metadata(e).is_ok())
    }

    /// Notes that `path`, as it was when read (`m`), holds no device code.
    pub(super) fn remember(&self, path: &Path, m: &Metadata, kind: Option<InputFileKind>) {
        let (Some(dir), Some(e)) = (&self.dir, self.entry(path, m, kind)) else {
            return;
        };
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(e);
    }
}
