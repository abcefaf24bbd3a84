//! What can go wrong in `fatpack ld` beyond what the real linker reports itself.

use std::path::PathBuf;

use crate::inputs::InputError;
use crate::ld::{real::RealLdError, ArgsError, SearchError};
use crate::packed::OutputError;
use crate::rewrite::RewriteError;
use crate::store::StoreBuildError;

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// A `--fatpack-*` option or variable with a value fatpack cannot use.
    #[error("{0}")]
    Option(String),
    #[error(
        "--fatpack-mode=tail needs GNU ld or lld: {linker} {why} (the default packed mode \
         works with {linker})"
    )]
    TailUnsupported {
        linker: &'static str,
        why: &'static str,
    },
    /// ld's own check, made before the real link (which writes into a temp file).
    #[error("input file '{}' is the same as output file", .0.display())]
    InputIsOutput(PathBuf),
    #[error("{}: cannot tell its architecture", .0.display())]
    UnknownMachine(PathBuf),
    #[error("{}: unsupported machine {machine}", path.display())]
    UnsupportedMachine {
        path: PathBuf,
        machine: &'static str,
    },
    #[error(
        "{}: links a fatpack module `{module}` that this link did not pack (a packed object \
         from another link?)",
        output.display()
    )]
    ForeignModule { output: PathBuf, module: String },
    /// A copy of an implicit linker script naming a rewritten input cannot be written.
    #[error("{}: cannot write a copy of this linker script that names its rewritten inputs: {source}", script.display())]
    ScriptCopy {
        script: PathBuf,
        source: crate::ld::UnquotablePath,
    },
    /// Device code no stub replaced, in a link whose `-T` script names files itself.
    #[error(
        "{source}: the linker script {} names files (INPUT, GROUP), which fatpack does not \
         read for device code; name them on the command line instead",
        script.display()
    )]
    UnscannedScriptInputs {
        script: PathBuf,
        source: Box<crate::packed::OutputError>,
    },
    /// Device code no stub replaced, in a link with libraries fatpack did not find where
    /// the real linker did.
    #[error(
        "{source}: fatpack could not find {} where the real linker did: its command adds \
         library directories that it does not say (a wrapper around lld or mold, say); name \
         them on the line with -L",
        libraries.join(", ")
    )]
    UnfoundLibraries {
        libraries: Vec<String>,
        source: Box<crate::packed::OutputError>,
    },
    #[error("waiting for the real linker: {0}")]
    Wait(#[source] std::io::Error),
    #[error(transparent)]
    Args(#[from] ArgsError),
    #[error(transparent)]
    RealLd(#[from] RealLdError),
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    #[error(transparent)]
    Glue(#[from] super::glue::GlueError),
    #[error(transparent)]
    Runtime(#[from] super::runtime::RuntimeError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error(transparent)]
    StoreBuild(#[from] StoreBuildError),
    #[error(transparent)]
    Commit(#[from] crate::commit::CommitError),
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    /// The direct route's cut of the output could not read or write it.
    #[error(transparent)]
    Cut(#[from] crate::transform::TransformError),
    /// An edit of an ELF file's headers or sections failed.
    #[error(transparent)]
    ElfEdit(#[from] crate::elf::EditError),
    /// The direct route's output holds a container that none of the inputs read holds: it
    /// cannot be stubbed, and the copy route links instead.
    #[error("{}: the container at offset {at:#x} ({len} bytes) is in none of the inputs read", path.display())]
    ForeignContainer { path: PathBuf, at: u64, len: usize },
}
