//! The first steps: where ld would find each input, and which of them hold device code
//! (read with [`crate::inputs`], the one scanner of device code).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::plan::Planned;
use super::session::Session;
use super::LinkError;
use crate::inputs::{self, DeviceSection};
use crate::ld::{self, InputFileKind, LinkLine};

impl Session {
    /// Where ld would find each input (`-l` search, scripts), as ld does.
    pub(super) fn resolve_inputs(&mut self) -> Result<(), LinkError> {
        let mut cache = ld::DefaultsCache::new();
        ld::resolve_with(&mut self.line, &self.real, &mut cache)?;
        Ok(())
    }

    /// Locate the device code of every object and archive the link may read. A shared
    /// library's device code belongs to it (packed when it was linked, or not): it is not
    /// read at all.
    pub(super) fn scan_inputs(&mut self) -> Result<Vec<Planned>, LinkError> {
        let mut planned = Vec::new();
        // A library named twice (`-lgcc ... -lgcc`) is looked at once.
        let mut device_free: std::collections::HashSet<PathBuf> = Default::default();
        let known = super::device_free::DeviceFree::new();
        // The line's inputs and the files their implicit scripts name (`libdev.so` holding
        // `INPUT(libdevreal.a)`): ld links both.
        for file in self.line.files() {
            let path = file.path;
            if !file.may_hold_linked_device_code() || device_free.contains(path) {
                continue;
            }
            // What the search saw of it (a regular file only: anything else is refused by
            // the map below, naming it).
            let meta = file.meta();
            if let Some(m) = meta {
                let free = if m.len() < super::device_free::MIN_LEN {
                    // crt1.o, a user's small object: searched whole, as the search read it or
                    // read now (a map of its own costs more than the read); one with device
                    // code is mapped below.
                    match file.whole() {
                        Some(bytes) => cannot_hold_device_code(file.kind, bytes),
                        None => inputs::read_small(path)
                            .is_ok_and(|bytes| cannot_hold_device_code(file.kind, &bytes)),
                    }
                } else {
                    known.known(path, m, file.kind)
                };
                if free {
                    device_free.insert(path.to_path_buf());
                    continue;
                }
            }
            let map = self.maps.get(path)?;
            if cannot_hold_device_code(file.kind, &map) {
                if let Some(m) = meta {
                    known.remember(path, m, file.kind);
                }
                device_free.insert(path.to_path_buf());
                continue;
            }
            // Identifies the file, and reads the device code of an object or archive.
            let scanned = inputs::locate(path, &map, &self.maps)?;
            if scanned.kind == inputs::FileKind::Other {
                refuse_unknown_elf_with_device_code(path, &map)?;
            }
            self.account.elf_files += scanned.elf_files;
            // Reading entry headers maps whole runs of the file (fault-around, large
            // folios): let them go before the next input, or the scan alone would hold
            // every input resident.
            self.maps.release(path, 0, map.len() as u64);
            let sections: Vec<DeviceSection> = scanned
                .sections
                .into_iter()
                .filter(|s| !s.spans.is_empty())
                .collect();
            if sections.is_empty() {
                if let Some(m) = meta {
                    known.remember(path, m, file.kind);
                }
                continue;
            }
            planned.push(Planned {
                id: file.input.id,
                within: file.within,
                path: path.to_path_buf(),
                kind: scanned.kind,
                sections,
            });
        }
        Ok(planned)
    }
}

/// Whether an input cannot hold device code a link rewrites: an object or regular archive
/// with no device section has no section name `.nv_fatbin` or `__nv_relfatbin` anywhere in
/// its bytes. A look for them is far quicker than walking the members' headers (libgcc.a
/// and libc_nonshared.a are in every link); above 16 MiB the walk, which reads less of a
/// large archive, is left to decide. A thin archive's members are files of their own. A
/// shared library's device code is its own (its cudart registers it when it is loaded): it
/// is never looked through (libstdc++.so and libm.so are in every C++ link).
pub(super) fn cannot_hold_device_code(kind: Option<InputFileKind>, data: &[u8]) -> bool {
    const LOOK_BELOW: usize = 16 << 20;
    if kind == Some(InputFileKind::Elf)
        && crate::elf::file_type_of(data) == Some(object::elf::ET_DYN)
    {
        return true;
    }
    // One pass for what both names hold; a stray `fatbin` only means the walk decides.
    const BOTH: &[u8] = b"fatbin";
    debug_assert!(inputs::DEVICE_SECTIONS
        .iter()
        .all(|n| memchr::memmem::find(n.as_bytes(), BOTH).is_some()));
    if !matches!(kind, Some(InputFileKind::Elf | InputFileKind::Archive))
        || data.len() >= LOOK_BELOW
    {
        return false;
    }
    // Below 64 KiB (crt1.o, a user's small object) a plain loop: memchr's SIMD search first
    // asks the CPU what it has, and in a VM that probe costs more than the search.
    let found = if data.len() < 64 << 10 {
        data.windows(BOTH.len()).any(|w| w == BOTH)
    } else {
        memchr::memmem::find(data, BOTH).is_some()
    };
    !found
}

/// An ELF input of a type that is neither an object, a shared library nor an executable
/// (a damaged `e_type`): the real linker may still take it, but its device code cannot be
/// packed as either, so one with device-code sections is refused, naming it (otherwise the
/// output's check would blame the output for code no stub replaced).
pub(super) fn refuse_unknown_elf_with_device_code(
    path: &Path,
    data: &[u8],
) -> Result<(), LinkError> {
    let Ok(layout) = crate::elf::Layout::parse(data) else {
        return Ok(());
    };
    let device = (0..layout.sections.len()).find(|&i| {
        let name = layout.section_name(i);
        inputs::DEVICE_SECTIONS.iter().any(|d| d.as_bytes() == name)
    });
    match device {
        Some(i) => Err(inputs::InputError::Malformed {
            origin: path.display().to_string(),
            message: format!(
                "an ELF file of type {:#x} (not a relocatable object, a shared library or an \
                 executable) holds device code in {}: fatpack cannot tell how to pack it",
                layout.file_type(),
                String::from_utf8_lossy(layout.section_name(i))
            ),
        }
        .into()),
        None => Ok(()),
    }
}

/// Whether the line links cudart or cudadevrt (static or shared): a link likely to hold
/// device code.
pub(super) fn names_cudart(line: &LinkLine) -> bool {
    line.inputs.iter().any(|i| {
        i.resolved
            .as_deref()
            .and_then(Path::file_name)
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.starts_with("libcudart") || n.starts_with("libcudadevrt"))
    })
}

/// Whether the line names an archive of 16 MiB or more (a static CUDA library; cudart's own
/// is about 1 MB): one whose scan is worth overlapping with the real link, and whose device
/// code is usually less than its other bytes, so the route is likely to be direct. A small
/// program's objects are scanned in milliseconds and are mostly device code (the copy
/// route): a link started early for it would only be stopped.
pub(super) fn names_a_large_archive(line: &LinkLine) -> bool {
    const LARGE: u64 = 16 << 20;
    line.inputs.iter().any(|i| {
        matches!(
            i.file_kind,
            Some(InputFileKind::Archive | InputFileKind::ThinArchive)
        ) && i.meta().is_some_and(|m| m.len() >= LARGE)
    })
}

/// The ELF machine of the line's first object file (`e_machine`, read from its header as
/// the scan reads it), as the link's machine before the scan has read any input.
pub(super) fn first_object_machine(line: &LinkLine) -> Option<u16> {
    let path = line
        .inputs
        .iter()
        .filter(|i| !i.binary && i.file_kind == Some(InputFileKind::Elf))
        .find_map(|i| i.resolved.as_deref())?;
    let mut head = [0u8; 24];
    std::io::Read::read_exact(&mut std::fs::File::open(path).ok()?, &mut head).ok()?;
    inputs::elf_machine(&head)
}
