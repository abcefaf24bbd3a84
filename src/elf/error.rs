//! What can go wrong transforming an ELF file, each naming the file. A layout a transform
//! cannot handle is not an error but a refusal with the reason (`cut::Refused`): the
//! caller takes another way.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    /// The file's headers do not allow the transform (a damaged or foreign file).
    #[error("{}: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    /// The transformed file failed the transform's own check: nothing is written.
    #[error(
        "{}: cutting the freed device code out of the file: {message} (damage fatpack did \
         not detect, or a fatpack bug)",
        path.display()
    )]
    Unsound { path: PathBuf, message: String },
    #[error("{}: a rewritten container is larger than the one it replaces (a fatpack bug)", .0.display())]
    Grew(PathBuf),
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    #[error(transparent)]
    Input(#[from] crate::inputs::InputError),
}

/// A [`TransformError::Malformed`] about `path`.
pub(crate) fn malformed(path: &std::path::Path, message: impl Into<String>) -> TransformError {
    TransformError::Malformed {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// `map_err` for an I/O error about `path`, as a [`TransformError`].
pub(crate) fn io_err(path: &std::path::Path) -> impl Fn(std::io::Error) -> TransformError + '_ {
    move |e| crate::error::io_at(path)(e).into()
}
