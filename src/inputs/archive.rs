//! Device code inside `ar` archives, regular and thin.

use std::path::Path;

use object::read::archive::ArchiveFile;

use super::{elf, map_file, sniff, Depth, DeviceSection, FileKind, InputError};

pub(super) fn device_sections(
    path: &Path,
    data: &[u8],
    depth: Depth,
) -> Result<Vec<DeviceSection>, InputError> {
    let shown = path.display().to_string();
    let malformed = |message: String| InputError::Malformed {
        origin: shown.clone(),
        message,
    };
    let archive = ArchiveFile::parse(data).map_err(|e| malformed(format!("bad archive: {e}")))?;
    let mut out = Vec::new();
    for member in archive.members() {
        let member = member.map_err(|e| malformed(format!("bad archive member: {e}")))?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let origin = format!("{shown}({name})");
        if member.is_thin() {
            // Thin members name their file relative to the archive's directory.
            let member_path = path.parent().unwrap_or(Path::new(".")).join(&name);
            let map = map_file(&member_path)?;
            scan_member(&origin, &member_path, 0, &map, depth, &mut out)?;
        } else {
            let bytes = member
                .data(data)
                .map_err(|e| malformed(format!("member {name}: {e}")))?;
            let base = member.file_range().0;
            scan_member(&origin, path, base, bytes, depth, &mut out)?;
        }
    }
    Ok(out)
}

fn scan_member(
    origin: &str,
    file: &Path,
    base: u64,
    bytes: &[u8],
    depth: Depth,
    out: &mut Vec<DeviceSection>,
) -> Result<(), InputError> {
    if matches!(
        sniff(bytes),
        FileKind::Object | FileKind::SharedLibrary | FileKind::Executable
    ) {
        out.extend(elf::device_sections(origin, file, base, bytes, depth)?);
    }
    Ok(())
}
