//! What can go wrong in `fatpack split` and `fatpack join`, each naming the file it is about.

use std::path::PathBuf;

use crate::inputs::InputError;
use crate::packed::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(
        "{}: not a packed output (no {} slot: a plain build, or a link `fatpack ld` left to \
         the real linker); join works on what `fatpack split` made of a packed output (prune \
         ordinary files with `fatpack prune --for`)",
        .0.display(),
        crate::packed::DIGEST_SECTION
    )]
    NotPacked(PathBuf),
    #[error("{}: already split (its store is a manifest of packs); `fatpack join` it first", .0.display())]
    AlreadySplit(PathBuf),
    #[error("{}: not split (its store is whole); nothing to join", .0.display())]
    NotSplit(PathBuf),
    #[error(
        "{}: linked by a fatpack whose runtime cannot load packs; relink it with this fatpack \
         before splitting",
        .0.display()
    )]
    OldRuntime(PathBuf),
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
    #[error(transparent)]
    Store(#[from] crate::error::StoreAt),
    #[error(transparent)]
    Read(#[from] crate::packed::SplitReadError),
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    #[error(transparent)]
    Commit(#[from] crate::commit::CommitError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    Transform(#[from] crate::transform::TransformError),
    /// An edit of an ELF file's headers or sections failed.
    #[error(transparent)]
    ElfEdit(#[from] crate::elf::EditError),
}

pub(super) use crate::error::io_at;
