//! A store read from a file through a memory map.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapOptions};

use crate::error::{Result, StoreError};
use crate::format::HEADER_LEN;
use crate::reader::{Parsed, Store};

/// A store backed by a read-only memory map of a file (or of a byte range of one, e.g. the
/// `.fatpack` section of an ELF file).
///
/// Opening touches only the header, the dictionary and the index; blob pages are faulted in
/// when an entry is read. As with any mmap, the file must not be truncated or rewritten while
/// mapped (fatpack replaces stores by rename, which keeps the old inode alive).
pub struct MappedStore {
    map: Mmap,
    parsed: Parsed,
    path: PathBuf,
    offset: u64,
}

impl std::fmt::Debug for MappedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedStore")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("len", &self.map.len())
            .finish()
    }
}

impl MappedStore {
    /// Maps a whole standalone store file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Self::map(file, path, 0, len)
    }

    /// Maps `len` bytes at `offset` of `path` (need not be page aligned).
    pub fn open_range(path: impl AsRef<Path>, offset: u64, len: u64) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path)?;
        let file_len = file.metadata()?.len();
        // Mapping past EOF would turn reads into SIGBUS instead of errors.
        let end = offset.saturating_add(len);
        if end > file_len {
            return Err(StoreError::Truncated {
                what: "file range",
                need: end,
                have: file_len,
            });
        }
        Self::map(file, path, offset, len)
    }

    fn map(file: File, path: &Path, offset: u64, len: u64) -> Result<Self> {
        if len < HEADER_LEN as u64 {
            // Too small to be a store; read it plainly so the error is the same as for a slice
            // (and an empty mapping is never attempted).
            let mut buf = vec![0u8; len as usize];
            read_exact_at(&file, &mut buf, offset)?;
            Parsed::parse(&buf)?;
            return Err(StoreError::Truncated {
                what: "header",
                need: HEADER_LEN as u64,
                have: len,
            });
        }
        let map_len = usize::try_from(len).map_err(|_| StoreError::TooLarge {
            what: "mapping",
            len,
            limit: usize::MAX as u64,
        })?;
        // SAFETY: the map is read-only and private to this process. Soundness relies on the
        // file not being modified in place while mapped, which is the documented contract of
        // this type; fatpack itself only ever replaces stores by rename.
        #[allow(unsafe_code)]
        let map = unsafe { MmapOptions::new().offset(offset).len(map_len).map(&file)? };
        let parsed = Parsed::parse(&map)?;
        Ok(MappedStore {
            map,
            parsed,
            path: path.to_path_buf(),
            offset,
        })
    }

    /// The parsed store; cheap (no re-validation).
    pub fn store(&self) -> Store<'_> {
        Store::from_parsed(&self.map, &self.parsed)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset of the store within the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Length of the store (its `file_len`, which may be less than the mapped range).
    pub fn len(&self) -> u64 {
        self.parsed.file_len() as u64
    }

    /// Always false: a parsed store has at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(mut file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}
