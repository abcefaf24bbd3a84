//! What can go wrong in `fatpack split` and `fatpack join`, each naming the file it is about.

use std::path::{Path, PathBuf};

use crate::inputs::InputError;
use crate::packed::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    #[error(
        "{}: not a packed output (no {} slot); split works on what `fatpack ld` links (prune \
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
    #[error("{}: pack {}: {message}", host.display(), pack.display())]
    Pack {
        host: PathBuf,
        pack: PathBuf,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
    #[error("{}: store: {source}", path.display())]
    Store {
        path: PathBuf,
        #[source]
        source: cubin_store::StoreError,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// `map_err` for an I/O error about `path`.
pub(super) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> SplitError + '_ {
    move |source| SplitError::Io {
        path: path.to_path_buf(),
        source,
    }
}
