//! Rewriting one relocatable ELF object: each device-code section's containers are replaced by
//! stubs. The wrapper in `.nvFatBinSegment` and its relocation stay; [`crate::elf::sections`]
//! remaps the relocation so that each wrapper points at its container's stub.

use crate::elf::sections::{relocatable, replace_sections_parts, ElfEditError, Parts, Replacement};
use fatpack_format::stub::{self, FLAG_RELOCATABLE};
use std::path::PathBuf;

use crate::inputs::{DeviceSection, RELFATBIN_SECTION};

#[derive(Debug, thiserror::Error)]
#[error("{origin}: cannot rewrite object: {source}")]
pub struct RewriteError {
    pub origin: String,
    #[source]
    pub source: ElfEditError,
}

/// One container taken out of an object, under the module name its stub carries: where it
/// is on disk, so it can be read again when the store is written (device code is never
/// held in memory all at once).
#[derive(Debug, Clone)]
pub struct Extracted {
    pub module: String,
    pub origin: String,
    pub section: String,
    pub file: PathBuf,
    pub file_offset: u64,
    pub len: u64,
}

/// Rewrite `data` (an ELF relocatable). `name_for(origin, index)` gives each container its
/// unique module name. Returns the new object bytes and what was taken out.
pub fn rewrite_object(
    origin: &str,
    data: &[u8],
    sections: &[DeviceSection],
    name_for: &mut dyn FnMut(&str, usize) -> String,
) -> Result<(Vec<u8>, Vec<Extracted>), RewriteError> {
    let (parts, extracted) = rewrite_object_parts(origin, data, sections, name_for)?;
    Ok((parts.to_vec(data), extracted))
}

/// [`rewrite_object`] as parts: what it keeps of `data` as ranges of it, for a writer that
/// copies them from the input file.
pub fn rewrite_object_parts(
    origin: &str,
    data: &[u8],
    sections: &[DeviceSection],
    name_for: &mut dyn FnMut(&str, usize) -> String,
) -> Result<(Parts, Vec<Extracted>), RewriteError> {
    let mut extracted = Vec::new();
    let mut reps = Vec::new();
    for sec in sections {
        let mut stub_bytes = Vec::new();
        let mut offsets = Vec::new();
        for (i, &(old, len)) in sec.spans.iter().enumerate() {
            let module = name_for(origin, i);
            let flags = if sec.section == RELFATBIN_SECTION {
                FLAG_RELOCATABLE
            } else {
                0
            };
            offsets.push((old, stub_bytes.len() as u64));
            stub::encode_into(&module, flags, &mut stub_bytes);
            extracted.push(Extracted {
                module,
                origin: origin.to_string(),
                section: sec.section.clone(),
                file: sec.file.clone(),
                file_offset: sec.file_offset + old,
                len,
            });
        }
        reps.push(Replacement {
            index: sec.section_index,
            data: stub_bytes,
            offsets,
            old_size: sec.section_size,
        });
    }
    let err = |source| RewriteError {
        origin: origin.to_string(),
        source,
    };
    // The headers as the scan read them; parsed here only for sections from elsewhere.
    let out = match sections.iter().find_map(|s| s.elf.as_deref()) {
        Some(layout) => replace_sections_parts(data, layout, &reps),
        None => relocatable(data).and_then(|layout| replace_sections_parts(data, &layout, &reps)),
    }
    .map_err(err)?;
    Ok((out, extracted))
}
