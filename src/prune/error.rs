//! What can go wrong in `fatpack prune`, each naming the file it is about.

use std::path::PathBuf;

use crate::elf::sections::ElfEditError;
use crate::fatbin::FatbinError;
use crate::inputs::InputError;
use crate::packed::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// What `--keep`, `--for` or `--dead` asked for cannot be done.
    #[error(transparent)]
    Selection(#[from] crate::selection::SelectionError),
    #[error("{}: the selection leaves no device code at all", .0.display())]
    NothingLeft(PathBuf),
    #[error(
        "{}: has no device code (prune copies such a file as it is)",
        .0.display()
    )]
    NoDeviceCode(PathBuf),
    #[error("{}: prune takes ELF files, archives, fatbins and packed outputs, not this ({kind})", path.display())]
    Unsupported { path: PathBuf, kind: &'static str },
    #[error("{}: not a packed output (no {} slot)", .0.display(), crate::packed::DIGEST_SECTION)]
    NotPacked(PathBuf),
    #[error(
        "{}: is split into packs; prune the packed binary before splitting, `fatpack join` it \
         first, or simply install only the packs a machine needs",
        .0.display()
    )]
    Split(PathBuf),
    #[error("{}: {source}", path.display())]
    Fatbin {
        path: PathBuf,
        #[source]
        source: FatbinError,
    },
    #[error("{origin}: {source}")]
    Edit {
        origin: String,
        #[source]
        source: ElfEditError,
    },
    #[error(transparent)]
    Store(#[from] crate::error::StoreAt),
    #[error("{origin}: entry {arch} is damaged ({message}); prune keeps only entries it can read")]
    BadEntry {
        origin: String,
        arch: String,
        message: String,
    },
    #[error(transparent)]
    Transform(#[from] crate::transform::TransformError),
    /// An edit of an ELF file's headers or sections failed.
    #[error(transparent)]
    ElfEdit(#[from] crate::elf::EditError),
    #[error("{}: {message}", path.display())]
    Package { path: PathBuf, message: String },
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    #[error(transparent)]
    Commit(#[from] crate::commit::CommitError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Output(#[from] OutputError),
}

pub(super) use crate::error::io_at;
