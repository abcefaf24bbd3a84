//! Atomic file replacement: write a temp file next to the destination, fsync, rename.

use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Result, StoreError};

/// A file that only appears at its destination when [`AtomicStoreFile::commit`] succeeds.
///
/// Writes go to a temporary file in the destination's directory (so the final rename stays on
/// one filesystem and is atomic). Dropping it without committing, or a failed commit, removes
/// the temporary file and leaves any existing destination untouched.
pub struct AtomicStoreFile {
    file: BufWriter<NamedTempFile>,
    dest: PathBuf,
}

impl AtomicStoreFile {
    pub fn create(dest: impl AsRef<Path>) -> Result<Self> {
        let dest = dest.as_ref().to_path_buf();
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let file_name = dest.file_name().ok_or_else(|| {
            StoreError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} has no file name", dest.display()),
            ))
        })?;
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(file_name);
        prefix.push(".");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // NamedTempFile defaults to 0600; the store is an ordinary build output, so let the
        // umask decide as it would for any other created file.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let tmp = builder.tempfile_in(&dir)?;
        Ok(AtomicStoreFile {
            file: BufWriter::with_capacity(1 << 20, tmp),
            dest,
        })
    }

    /// Writes into `tmp` (created by the caller, in `dest`'s folder) instead of a temp file of
    /// its own.
    pub fn with_temp(tmp: NamedTempFile, dest: PathBuf) -> Self {
        AtomicStoreFile {
            file: BufWriter::with_capacity(1 << 20, tmp),
            dest,
        }
    }

    /// The finished temp file, flushed, for the caller to put in place.
    pub fn into_temp(self) -> io::Result<NamedTempFile> {
        self.file.into_inner().map_err(|e| e.into_error())
    }

    /// Where the file will appear on commit.
    pub fn destination(&self) -> &Path {
        &self.dest
    }

    /// Where the data is being written until commit.
    pub fn temp_path(&self) -> &Path {
        self.file.get_ref().path()
    }

    /// Flushes, fsyncs and renames the file into place (replacing any existing file), then
    /// fsyncs the directory so the rename itself is durable.
    pub fn commit(self) -> Result<()> {
        let tmp = self
            .file
            .into_inner()
            .map_err(|e| StoreError::Io(e.into_error()))?;
        tmp.as_file().sync_all()?;
        tmp.persist(&self.dest)
            .map_err(|e| StoreError::Io(e.error))?;
        #[cfg(unix)]
        {
            let dir = match self.dest.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl Write for AtomicStoreFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for AtomicStoreFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file.seek(pos)
    }

    fn stream_position(&mut self) -> io::Result<u64> {
        self.file.stream_position()
    }
}
