//! What can go wrong transforming a file's device code, each naming the file. A layout a
//! transform cannot handle is not an error but a refusal with the reason
//! ([`super::cut::Refused`]): the caller takes another way.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TransformError {
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
    Edit(#[from] crate::elf::EditError),
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    #[error(transparent)]
    Input(#[from] crate::inputs::InputError),
}
