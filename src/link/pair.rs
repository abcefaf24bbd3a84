//! A side-file output is two files, the binary and `<binary>.fatpack`, that must change
//! together or not at all: a binary next to another build's store cannot run its kernels.
//!
//! Both are written completely to temp names first. Then, holding an exclusive lock on their
//! folder (so that concurrent links of the same output take turns and the last one wins both
//! files), the store is renamed into place and then the binary; if the binary cannot be (its
//! path is a folder, a disk error), the previous store is put back. What a reader can see is
//! the instant between the two renames, which the runtime's digest check turns into a clear
//! error instead of wrong code.

use std::path::Path;

use cubin_store::AtomicStoreFile;

use super::error::io_at;
use super::LinkError;

/// Puts `side` (the finished store) and `tmp_out` (the finished binary) in place as the pair
/// `output` + `<output>.fatpack`.
pub(super) fn commit(
    side: AtomicStoreFile,
    tmp_out: &Path,
    output: &Path,
) -> Result<(), LinkError> {
    let dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let _lock =
        crate::commit::lock::FolderLock::take(dir).map_err(|e| io_at("locking", dir)(e.source))?;
    if output.is_dir() {
        return Err(io_at("renaming the output to", output)(
            std::io::Error::from_raw_os_error(libc::EISDIR),
        ));
    }
    let side_path = side.destination().to_path_buf();
    // The previous store, kept under a temp name to be put back if the binary cannot move.
    let backup = if side_path.is_file() {
        let b = tempfile::Builder::new()
            .prefix(&format!(
                "{}{}-",
                crate::commit::TEMP_PREFIX,
                std::process::id()
            ))
            .tempfile_in(dir)
            .map_err(io_at("creating a temp file in", dir))?
            .into_temp_path();
        std::fs::rename(&side_path, &b).map_err(io_at("moving aside", &side_path))?;
        Some(b)
    } else {
        None
    };
    let put_back = |b: Option<tempfile::TempPath>| match b {
        Some(b) => {
            let _ = std::fs::rename(&b, &side_path);
        }
        None => {
            let _ = std::fs::remove_file(&side_path);
        }
    };
    if let Err(e) = side.commit() {
        put_back(backup);
        return Err(e.into());
    }
    if let Err(e) = std::fs::rename(tmp_out, output) {
        put_back(backup);
        return Err(io_at("renaming the output to", output)(e));
    }
    // `backup` (the previous store) is removed as it drops.
    drop(backup);
    Ok(())
}
