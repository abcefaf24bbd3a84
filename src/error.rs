//! The error core every command shares: a file, and what went wrong reading or writing it
//! (an I/O error, or a store that does not read). Each command's error enum wraps these
//! rather than repeating them, and each message starts with the user's file.

use std::io;
use std::path::{Path, PathBuf};

/// An I/O error about `path`.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct IoError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// A store (in `path`, or beside it) that cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{}: store: {source}", path.display())]
pub struct StoreAt {
    pub path: PathBuf,
    #[source]
    pub source: cubin_store::StoreError,
}

/// `map_err` for an I/O error about `path`.
pub fn io_at(path: &Path) -> impl Fn(io::Error) -> IoError + '_ {
    move |source| IoError {
        path: path.to_path_buf(),
        source,
    }
}

/// `map_err` for a store error about `path`.
pub fn store_at(path: &Path) -> impl Fn(cubin_store::StoreError) -> StoreAt + '_ {
    move |source| StoreAt {
        path: path.to_path_buf(),
        source,
    }
}
