//! Device code inside host ELF files.

use std::path::Path;
use std::sync::Arc;

use object::elf as abi;

use super::{read_containers, Depth, DeviceSection, FileKind, InputError};
use crate::elf::Layout;

/// Where nvcc puts a whole-program fatbin.
pub const FATBIN_SECTION: &str = ".nv_fatbin";
/// Where nvcc puts relocatable device code (`-rdc=true`), for nvlink to consume.
pub const RELFATBIN_SECTION: &str = "__nv_relfatbin";
pub const DEVICE_SECTIONS: [&str; 2] = [FATBIN_SECTION, RELFATBIN_SECTION];

/// What a host ELF file is, from its headers.
pub(super) fn host_kind(layout: &Layout) -> FileKind {
    match layout.file_type() {
        abi::ET_REL => FileKind::Object,
        // A PIE is ET_DYN too; an interpreter request tells it apart from a library.
        abi::ET_DYN if layout.section_by_name(".interp").is_some() => FileKind::Executable,
        abi::ET_DYN => FileKind::SharedLibrary,
        abi::ET_EXEC => FileKind::Executable,
        _ => FileKind::Other,
    }
}

/// Every device-code section of one ELF file (whose headers are `layout`), parsed; they
/// keep the headers for whatever edits the file next. A link's scan ([`Depth::Spans`])
/// drops the section names, which its rewrite does not read: an object built with
/// `-ffunction-sections` names thousands of sections, and the link holds the headers of
/// every member with device code until it is rewritten.
pub(crate) fn device_sections(
    origin: &str,
    file: &Path,
    base: u64,
    data: &[u8],
    mut layout: Layout,
    depth: Depth,
) -> Result<Vec<DeviceSection>, InputError> {
    let found: Vec<(usize, &'static str)> = (0..layout.sections.len())
        .filter_map(|index| {
            let name = layout.section_name(index);
            DEVICE_SECTIONS
                .into_iter()
                .find(|d| d.as_bytes() == name)
                .map(|d| (index, d))
        })
        .collect();
    if found.is_empty() {
        return Ok(Vec::new());
    }
    if depth == Depth::Spans {
        layout.names = Vec::new();
    }
    let layout = Arc::new(layout);
    let mut out = Vec::new();
    for (index, name) in found {
        let bytes = layout
            .section_data(data, index)
            .map_err(|e| InputError::Malformed {
                origin: origin.to_string(),
                message: format!("section {name}: {e}"),
            })?;
        let (spans, containers) =
            read_containers(bytes, depth).map_err(|source| InputError::Fatbin {
                origin: origin.to_string(),
                section: name.to_string(),
                source,
            })?;
        let s = &layout.sections[index];
        let file_offset = match s.sh_type.get(crate::elf::LE) {
            abi::SHT_NOBITS => 0,
            _ => s.sh_offset.get(crate::elf::LE),
        };
        out.push(DeviceSection {
            origin: origin.to_string(),
            section: name.to_string(),
            section_index: index,
            section_size: bytes.len() as u64,
            file: file.to_path_buf(),
            file_offset: base + file_offset,
            elf: Some(Arc::clone(&layout)),
            spans,
            containers,
        });
    }
    Ok(out)
}
