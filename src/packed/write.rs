//! Writing a packed output: the store appended as a non-allocated section (or replaced, by
//! prune), and the digest slot patched.
//!
//! Everything here edits a temp file in place and never fsyncs it: durability is for
//! whoever commits. The link renames its output into place without an fsync, as ld does
//! (forcing a 400 MB output of static cuBLAS to disk cost more than the rest of the store
//! step); prune, repack, split and join fsync when they commit.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use super::{bad, io_err, OutputError};
use crate::elf::append_section::{append_section, OffsetWriter};
use crate::elf::build_id::mix_build_id;
use crate::elf::store_segment::{map_store, Mapping};
use crate::elf::TransformError;
use crate::inputs::map_file;
use fatpack_format::link::{StoreLocation, StoreSlot, DIGEST_SECTION, STORE_SECTION};

/// Alignment of the store in the file, so that it can be mapped on its own.
const STORE_ALIGN: u64 = 4096;

/// Write a store as the non-allocated section [`STORE_SECTION`] of the ELF file at `path`,
/// with contents from `write` (which may seek within them): [`crate::elf::append_section`].
pub fn append_store<T, E: From<OutputError> + From<TransformError>>(
    path: &Path,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    append_section(path, STORE_SECTION, STORE_ALIGN, write)
}

/// Writes the [`StoreSlot`] of the output: the store's digest and, when the store is mapped
/// with the image, where it is relative to the slot.
pub fn patch_slot(
    path: &Path,
    digest: &[u8; 32],
    mapping: Option<Mapping>,
    location: StoreLocation,
) -> Result<(), OutputError> {
    let (offset, size, addr, features) = {
        let map = map_file(path).map_err(|e| bad(path, e.to_string()))?;
        let (offset, size, addr) = super::slot_range(&map)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("no {DIGEST_SECTION} section: the glue object was not linked"),
                )
            })?
            .map_err(|e| bad(path, format!("{e}; refusing to write the store digest")))?;
        // What the linked runtime reads is a property of the link, not of this patch.
        let features = super::slot_at(&map, offset, size).map_or(0, |s| s.features);
        (offset, size, addr, features)
    };
    // An output linked before the slot grew (prune of an old output) keeps its 32 bytes.
    let want = if mapping.is_some() || size >= StoreSlot::LEN as u64 {
        StoreSlot::LEN
    } else {
        StoreSlot::LEGACY_LEN
    };
    if size < want as u64 {
        return Err(bad(
            path,
            format!("{DIGEST_SECTION} is {size} bytes, want {want}"),
        ));
    }
    let slot = StoreSlot {
        digest: *digest,
        store_rel: match mapping {
            // Two's complement difference: the store may lie below the slot only in a
            // hand-made layout, and the runtime adds it back with the same wrapping.
            Some(m) => m.vaddr.wrapping_sub(addr) as i64,
            None => 0,
        },
        store_len: mapping.map_or(0, |m| m.len),
        location,
        features,
    };
    let bytes = slot.to_bytes();
    let mut f = File::options()
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    f.seek(SeekFrom::Start(offset)).map_err(io_err(path))?;
    f.write_all(&bytes[..want]).map_err(io_err(path))
}

/// After the store was written (into the output's section when `embedded`, else the side
/// file): maps the section with the image where the output allows it, patches the slot and
/// mixes the store into the build ID. Returns the mapping, None when the store stays
/// unmapped (side file, or no program header to spare).
pub fn finish(
    path: &Path,
    digest: &[u8; 32],
    embedded: bool,
) -> Result<Option<Mapping>, OutputError> {
    let mapping = place(path, digest, embedded, embedded)?;
    mix_build_id(path, digest)?;
    Ok(mapping)
}

/// Maps the section (when `map` and the output allows it) and patches the slot.
fn place(
    path: &Path,
    digest: &[u8; 32],
    map: bool,
    embedded: bool,
) -> Result<Option<Mapping>, OutputError> {
    let mapping = if map { map_store(path)? } else { None };
    let location = match (embedded, mapping) {
        (_, Some(_)) => StoreLocation::Mapped,
        (true, None) => StoreLocation::Section,
        (false, None) => StoreLocation::SideFile,
    };
    patch_slot(path, digest, mapping, location)?;
    Ok(mapping)
}

/// Replaces what the `.fatpack` section of the packed output at `path` holds (a store, or a
/// split manifest standing for the same store), mapped again if it `was_mapped`, else left
/// a plain section as it was; the recorded `digest` and the build ID stay what they were,
/// since the device code the binary names is the same (`fatpack split` and `fatpack join`,
/// which must give back the original bytes).
pub fn replace_store<T, E: From<OutputError> + From<TransformError>>(
    path: &Path,
    digest: &[u8; 32],
    was_mapped: bool,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    let r = append_store(path, write)?;
    place(path, digest, was_mapped, true)?;
    Ok(r)
}
