//! Tail mode: no store, no runtime; the fatbin sections move past `.bss` by a linker script.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::LinkError;
use crate::error::io_at;

use super::options::{TAIL_SCRIPT, TAIL_SCRIPT_LLD};
use crate::ld::{real as real_ld, LinkLine};

/// Tail mode: the same link plus the script that moves the fatbin sections past `.bss`.
pub(super) fn tail_link(line: &LinkLine, real: &Path) -> Result<i32, LinkError> {
    let text = script_for(real)?;
    let work = super::cleanup::temp_folder(super::cleanup::WORK_PREFIX, &std::env::temp_dir())?;
    let script = write_script(work.path(), text)?;
    let argv = line.render(&BTreeMap::new(), &[], &script_args(&script))?;
    Ok(real_ld::exit_code(real_ld::run(real, &argv)?))
}

/// The tail script for the linker `real`: GNU ld's default script names .ldata (the last
/// section it loads); lld has no default script, and INSERT must name a section the output
/// has. gold and mold cannot read it: an error that says so, before a link fails on it.
pub(super) fn script_for(real: &Path) -> Result<&'static str, LinkError> {
    let version = real_ld::capture(real, &["--version"])?;
    let banner = String::from_utf8_lossy(&version.stdout);
    let unsupported = if banner.contains("GNU gold") {
        Some(("gold", "does not support INSERT in linker scripts"))
    } else if banner.starts_with("mold ") {
        Some(("mold", "does not read SECTIONS commands in linker scripts"))
    } else {
        None
    };
    if let Some((linker, why)) = unsupported {
        return Err(LinkError::TailUnsupported { linker, why });
    }
    Ok(if banner.contains("LLD") {
        TAIL_SCRIPT_LLD
    } else {
        TAIL_SCRIPT
    })
}

/// Writes the tail script `text` into `dir`; returns its path.
pub(super) fn write_script(dir: &Path, text: &str) -> Result<PathBuf, LinkError> {
    let script = dir.join("fatbin-tail.ld");
    std::fs::write(&script, text).map_err(io_at(&script))?;
    Ok(script)
}

/// The linker arguments that add the script at `path`.
pub(super) fn script_args(path: &Path) -> Vec<OsString> {
    vec!["-T".into(), path.as_os_str().to_owned()]
}
