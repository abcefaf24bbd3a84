//! What can go wrong in `fatpack prune`, each naming the file it is about.

use std::path::PathBuf;

use crate::arch::ArchParseError;
use crate::elf::sections::ElfEditError;
use crate::fatbin::FatbinError;
use crate::inputs::InputError;
use crate::packed::OutputError;

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error("--keep: {0}")]
    Keep(#[from] ArchParseError),
    #[error(
        "--for {text}: want compute capabilities such as 8.9,9.0 (or 89;90, sm_89, 9.0a, \
         90a-real){}",
        fatpack_format::arch::did_you_mean(text)
    )]
    Capability { text: String },
    #[error("{option} {text}: {why}")]
    NoSuchCapability {
        option: &'static str,
        text: String,
        why: String,
    },
    #[error(
        "module {module}: --keep {keep} keeps none of its entries (it has {has}); the pruned \
         binary could not run its kernels anywhere (pass --allow-empty to do it anyway)"
    )]
    Emptied {
        module: String,
        keep: String,
        has: String,
    },
    #[error("{}: --keep names {missing} but the file has none of them, only {present}", path.display())]
    Absent {
        path: PathBuf,
        missing: String,
        present: String,
    },
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
