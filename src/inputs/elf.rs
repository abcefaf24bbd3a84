//! Device code inside host ELF files.

use std::path::Path;
use std::sync::Arc;

use object::elf as abi;

use super::{read_containers, Depth, DeviceSection, FileKind, InputError};
use crate::elf::Layout;
use crate::fatbin;

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
/// every member with device code until it is rewritten. `release(offset, len)`: done with
/// that range of `file` (a walk of headers lets its pages go as it goes: [`super::WalkRelease`]).
pub(crate) fn device_sections(
    origin: &str,
    file: &Path,
    base: u64,
    data: &[u8],
    mut layout: Layout,
    depth: Depth,
    release: &dyn Fn(u64, u64),
) -> Result<Vec<DeviceSection>, InputError> {
    // Fatbins in a program's own data: in any linked file, and in relocatable objects when
    // their device code is read whole (inspect, prune, extract; never a link's scan, which
    // only rewrites what cudart registers).
    let search_data = match host_kind(&layout) {
        FileKind::SharedLibrary | FileKind::Executable => depth != Depth::Registered,
        FileKind::Object => depth == Depth::Full,
        _ => false,
    };
    let mut found: Vec<(usize, Option<&'static str>)> = Vec::new();
    for index in 0..layout.sections.len() {
        let name = layout.section_name(index);
        if let Some(d) = DEVICE_SECTIONS.into_iter().find(|d| d.as_bytes() == name) {
            found.push((index, Some(d)));
        } else if search_data && may_embed(&layout, index, name) {
            found.push((index, None));
        }
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    if depth == Depth::Spans {
        layout.names = Vec::new();
    }
    let layout = Arc::new(layout);
    let mut out = Vec::new();
    for (index, device) in found {
        let name = match device {
            Some(d) => d.to_string(),
            None => String::from_utf8_lossy(layout.section_name(index)).into_owned(),
        };
        let bytes = layout
            .section_data(data, index)
            .map_err(|e| InputError::Malformed {
                origin: origin.to_string(),
                message: format!("section {name}: {e}"),
            })?;
        let fatbin_error = |source| InputError::Fatbin {
            origin: origin.to_string(),
            section: name.clone(),
            source,
        };
        let s = &layout.sections[index];
        let file_offset = match s.sh_type.get(crate::elf::LE) {
            abi::SHT_NOBITS => 0,
            _ => s.sh_offset.get(crate::elf::LE),
        };
        let mut walk = super::WalkRelease::new(base + file_offset, release);
        let (spans, containers) = match device {
            Some(_) => {
                read_containers(bytes, depth, &mut |p| walk.walked(p)).map_err(fatbin_error)?
            }
            None => {
                let address = layout.sections[index].sh_addr.get(crate::elf::LE);
                let spans = fatbin::find_embedded(bytes, address);
                if spans.is_empty() {
                    continue;
                }
                let mut containers = Vec::new();
                if depth == Depth::Full {
                    for &(off, _) in &spans {
                        containers.push(
                            fatbin::parse_one(&bytes[off..], off)
                                .map_err(fatbin_error)?
                                .0,
                        );
                    }
                }
                let spans = spans
                    .into_iter()
                    .map(|(o, l)| (o as u64, l as u64))
                    .collect();
                (spans, containers)
            }
        };
        out.push(DeviceSection {
            origin: origin.to_string(),
            section: name,
            section_index: index,
            section_size: bytes.len() as u64,
            file: file.to_path_buf(),
            file_offset: base + file_offset,
            elf: Some(Arc::clone(&layout)),
            spans,
            containers,
            embedded: device.is_none(),
        });
    }
    Ok(out)
}

/// Whether section `index` may hold fatbins its program loads itself: a loaded section of
/// data (not code, not the wrappers) with room for one.
fn may_embed(layout: &Layout, index: usize, name: &[u8]) -> bool {
    let s = &layout.sections[index];
    let le = crate::elf::LE;
    s.sh_type.get(le) == abi::SHT_PROGBITS
        && layout.allocated(index)
        && s.sh_flags.get(le) & u64::from(abi::SHF_EXECINSTR) == 0
        && s.sh_size.get(le) >= (fatbin::CONTAINER_HEADER_LEN + fatbin::EntryHeader::LEN) as u64
        && name != b".nvFatBinSegment"
}
