//! One file inspected, whatever it is: a packed binary (its store), a store, or anything
//! holding fatbins or a cubin (scanned). Above [`super::report`] (the report's types) and
//! [`super::store`] (what a store holds), which both stay below it.

use std::path::Path;

use super::report::{
    entry_report, kernels_of, summarise, EntryReport, FileReport, InspectError, ModuleReport,
};
use super::store;
use crate::fatbin::EntryKind;
use crate::inputs::{self, FileKind};

/// Inspect the file at `path`, whatever it is.
pub fn inspect_path(path: &Path) -> Result<FileReport, InspectError> {
    let shown = path.display().to_string();
    // Mapped, not read: only the headers and the device code are touched, so a file with
    // gigabytes of debug info or data is inspected in memory that follows its device code.
    let map = inputs::map_file(path)?;
    let data: &[u8] = &map;
    let kind = inputs::sniff(data);
    if matches!(
        kind,
        FileKind::Object | FileKind::SharedLibrary | FileKind::Executable
    ) {
        if let Some(r) = store::inspect_packed(path, &shown, kind, data)? {
            return Ok(r);
        }
    }
    let modules = if kind == FileKind::Store {
        store::modules(&shown, data)?
    } else {
        let scanned = inputs::scan_bytes(path, data)?;
        let mut modules = Vec::new();
        if let (Some(info), Some(bytes)) = (&scanned.cubin, &scanned.cubin_bytes) {
            modules.push(ModuleReport {
                origin: shown.clone(),
                section: String::new(),
                index: 0,
                loaded_by: "-",
                entries: vec![EntryReport {
                    arch: info.arch.sm_name(),
                    kind: "sass".into(),
                    relocatable: info.relocatable,
                    compression: "none".into(),
                    raw_size: bytes.len() as u64,
                    stored_size: bytes.len() as u64,
                    kernel_count: info.kernels.len(),
                    kernels: kernels_of(info.kernels.clone()),
                    options: None,
                    identifier: None,
                    not_decoded: None,
                    dead: false,
                }],
            });
        }
        for sec in &scanned.sections {
            for (index, fb) in sec.containers.iter().enumerate() {
                let mut entries = Vec::with_capacity(fb.entries.len());
                for e in &fb.entries {
                    match e.payload() {
                        Ok(payload) => entries.push(entry_report(e, &payload)),
                        // Kinds fatpack does not run are reported, not decoded: cuFFT's
                        // NVVM entries are obfuscated (cuobjdump cannot read them either).
                        Err(err) if matches!(e.kind(), EntryKind::Other(_)) => {
                            let mut r = entry_report(e, &[]);
                            r.raw_size = e.raw_len();
                            r.not_decoded = Some(format!("obfuscated or unknown encoding ({err})"));
                            entries.push(r);
                        }
                        Err(source) => {
                            return Err(InspectError::Payload {
                                origin: sec.origin.clone(),
                                module: index,
                                source,
                            })
                        }
                    }
                }
                modules.push(ModuleReport {
                    origin: sec.origin.clone(),
                    section: sec.section.clone(),
                    index,
                    loaded_by: match (sec.embedded, &sec.elf) {
                        (true, _) => "program",
                        (false, Some(_)) => "cudart",
                        (false, None) => "-",
                    },
                    entries,
                });
            }
        }
        modules
    };
    let unique_stored = if kind == FileKind::Store {
        Some(store::unique_stored_bytes(&shown, data)?)
    } else {
        None
    };
    Ok(summarise(shown, kind, modules, unique_stored))
}
