//! `fatpack run -- COMMAND ARGS...`: one step to make fatpack the linker of a whole build
//! (`fatpack run -- make -j8`, `fatpack run -- cmake --build build`, `fatpack run -- pip
//! wheel .`), with no change to the build's files or flags.
//!
//! It makes a folder of `ld`, `ld.bfd`, `ld.gold`, `ld.lld` and `ld.mold` links to this
//! fatpack and runs the command with the folder at the head of `COMPILER_PATH`, the list of
//! `-B`-like folders gcc, g++ and clang search for their subprograms (and so nvcc, which
//! links through the host compiler): every link a compiler driver does in that build, at
//! any depth, goes through `fatpack ld`, `-fuse-ld=gold|lld|mold` included, already
//! configured CMake trees included (CMake caches flags, not this). Links that call a linker
//! directly (not through a compiler driver) are not seen. The folder is removed when the
//! command ends, or on a signal, which the command gets too.
//!
//! Where the links' cache ([`crate::ld::defaults::cache`]) has no folder it can write (a build
//! sandbox's home: Debian's sbuild, Guix, Nix) and `FATPACK_CACHE_DIR` is not set, the build
//! gets one in that folder: what a link learns of the real linker and of inputs free of
//! device code is then learnt once per build, not once per link.

use std::ffi::OsString;
use std::path::Path;

use crate::commit::signals;
use crate::error::{io_at, IoError};

/// The names a compiler driver runs its linker by (`-fuse-ld=NAME` → `ld.NAME`).
pub const LINKER_NAMES: [&str; 5] = ["ld", "ld.bfd", "ld.gold", "ld.lld", "ld.mold"];

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("run: no command given (fatpack run -- COMMAND ARGS...)")]
    NoCommand,
    #[error("run: {}: {source}", command.to_string_lossy())]
    Start {
        command: OsString,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Makes `dir`'s linker links to `fatpack`.
pub fn wrapper_folder(dir: &Path, fatpack: &Path) -> Result<(), IoError> {
    for name in LINKER_NAMES {
        let link = dir.join(name);
        std::os::unix::fs::symlink(fatpack, &link).map_err(io_at(&link))?;
    }
    Ok(())
}

/// Whether a file can be made in `dir` (made, if it is not there yet).
fn writable(dir: &Path) -> bool {
    std::fs::create_dir_all(dir).is_ok() && tempfile::tempfile_in(dir).is_ok()
}

/// Runs `command` with fatpack as the linker of every compiler driver it starts; its exit
/// code (128 + N if a signal ended it).
pub fn run(command: &[OsString]) -> Result<i32, RunError> {
    let (program, args) = command.split_first().ok_or(RunError::NoCommand)?;
    let me = std::env::current_exe().map_err(io_at(Path::new("/proc/self/exe")))?;
    let tmp = std::env::temp_dir();
    let folder = signals::TempFolder::new("fatpack-run-", &tmp).map_err(io_at(&tmp))?;
    wrapper_folder(folder.path(), &me)?;
    let mut path = OsString::from(folder.path());
    if let Some(old) = std::env::var_os("COMPILER_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let cache = folder.path().join("cache");
    let own_cache = std::env::var_os(crate::ld::defaults::cache::CACHE_DIR_ENV).is_none()
        && !crate::ld::defaults::cache::cache_dir().is_some_and(|d| writable(&d));
    let out = signals::run_child(|| {
        let mut c = std::process::Command::new(program);
        if own_cache {
            c.env(crate::ld::defaults::cache::CACHE_DIR_ENV, &cache);
        }
        c.args(args)
            .env("COMPILER_PATH", &path)
            .spawn()
            .map_err(|source| RunError::Start {
                command: program.clone(),
                source,
            })
    })?
    .map_err(io_at(Path::new(program)))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(out
        .status
        .code()
        .or_else(|| out.status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}
