//! What can go wrong editing an ELF file's headers and sections, each naming the file. The
//! device-code transforms above this layer ([`crate::transform`]) add their own.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The file's headers do not allow the edit (a damaged or foreign file).
    #[error("{}: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
}

/// An [`EditError::Malformed`] about `path`.
pub(crate) fn malformed(path: &std::path::Path, message: impl Into<String>) -> EditError {
    EditError::Malformed {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// `map_err` for an I/O error about `path`, as an [`EditError`].
pub(crate) fn io_err(path: &std::path::Path) -> impl Fn(std::io::Error) -> EditError + '_ {
    move |e| crate::error::io_at(path)(e).into()
}
