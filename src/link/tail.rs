//! Tail mode: no store, no runtime; the fatbin sections move past `.bss` by a linker script.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::io_at;
use super::LinkError;

use super::options::{TAIL_SCRIPT, TAIL_SCRIPT_LLD};
use crate::ld::{real as real_ld, LinkLine};

/// Tail mode: the same link plus the script that moves the fatbin sections past `.bss`.
pub(super) fn tail_link(line: &LinkLine, real: &Path) -> Result<i32, LinkError> {
    let version = real_ld::capture(real, &["--version"])?;
    let banner = String::from_utf8_lossy(&version.stdout);
    // The script moves sections with INSERT AFTER; say so before a linker that cannot
    // read it fails on it.
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
    let work = super::cleanup::temp_folder(super::cleanup::WORK_PREFIX, &std::env::temp_dir())?;
    let script = work.path().join("fatbin-tail.ld");
    // GNU ld's default script names .ldata (the last section it loads); lld has no default
    // script, and INSERT must name a section the output has.
    let text = if banner.contains("LLD") {
        TAIL_SCRIPT_LLD
    } else {
        TAIL_SCRIPT
    };
    std::fs::write(&script, text).map_err(io_at("writing", &script))?;
    let argv = line.render(
        &BTreeMap::new(),
        &[],
        &["-T".into(), script.into_os_string()],
    )?;
    Ok(real_ld::exit_code(real_ld::run(real, &argv)?))
}
