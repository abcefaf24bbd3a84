//! Device code inside host ELF files.

use object::{Object, ObjectKind, ObjectSection};

use std::path::Path;

use super::{read_containers, Depth, DeviceSection, FileKind, InputError};

/// Where nvcc puts a whole-program fatbin.
pub const FATBIN_SECTION: &str = ".nv_fatbin";
/// Where nvcc puts relocatable device code (`-rdc=true`), for nvlink to consume.
pub const RELFATBIN_SECTION: &str = "__nv_relfatbin";
pub const DEVICE_SECTIONS: [&str; 2] = [FATBIN_SECTION, RELFATBIN_SECTION];

pub(super) fn host_kind(data: &[u8]) -> FileKind {
    match object::File::parse(data).map(|f| f.kind()) {
        Ok(ObjectKind::Relocatable) => FileKind::Object,
        Ok(ObjectKind::Dynamic) => {
            // A PIE is ET_DYN too; an interpreter request tells it apart from a library.
            if has_interp(data) {
                FileKind::Executable
            } else {
                FileKind::SharedLibrary
            }
        }
        Ok(ObjectKind::Executable) => FileKind::Executable,
        _ => FileKind::Other,
    }
}

fn has_interp(data: &[u8]) -> bool {
    object::File::parse(data)
        .map(|f| f.section_by_name(".interp").is_some())
        .unwrap_or(false)
}

/// Every device-code section of one ELF file, parsed.
pub(crate) fn device_sections(
    origin: &str,
    file: &Path,
    base: u64,
    data: &[u8],
    depth: Depth,
) -> Result<Vec<DeviceSection>, InputError> {
    let elf = object::File::parse(data).map_err(|e| InputError::Malformed {
        origin: origin.to_string(),
        message: format!("unreadable ELF: {e}"),
    })?;
    let mut out = Vec::new();
    for section in elf.sections() {
        let Ok(name) = section.name() else { continue };
        if !DEVICE_SECTIONS.contains(&name) {
            continue;
        }
        let bytes = section.data().map_err(|e| InputError::Malformed {
            origin: origin.to_string(),
            message: format!("section {name}: {e}"),
        })?;
        let (spans, containers) =
            read_containers(bytes, depth).map_err(|source| InputError::Fatbin {
                origin: origin.to_string(),
                section: name.to_string(),
                source,
            })?;
        let file_offset = section.file_range().map_or(0, |r| r.0);
        out.push(DeviceSection {
            origin: origin.to_string(),
            section: name.to_string(),
            section_index: section.index().0,
            section_size: bytes.len() as u64,
            file: file.to_path_buf(),
            file_offset: base + file_offset,
            spans,
            containers,
        });
    }
    Ok(out)
}
