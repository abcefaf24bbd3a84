//! Writing a packed output: the store appended as a non-allocated section (or replaced, by
//! prune), and the digest slot patched.
//!
//! Everything here edits a temp file in place and never fsyncs it: durability is for
//! whoever commits. The link renames its output into place without an fsync, as ld does
//! (forcing a 400 MB output of static cuBLAS to disk cost more than the rest of the store
//! step); prune, repack, split and join fsync when they commit.

use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{bad, io_err, OutputError};
use crate::elf::append_section::{append_section, append_section_in, OffsetWriter};
use crate::elf::build_id::mix_build_id;
use crate::elf::store_segment::{map_store, Mapping};
use crate::elf::EditError;
use crate::elf::OpenElf;
use fatpack_format::link::{StoreLocation, StoreSlot, DIGEST_SECTION, STORE_SECTION};

/// Alignment of the store in the file, so that it can be mapped on its own.
const STORE_ALIGN: u64 = 4096;

/// Write a store as the non-allocated section [`STORE_SECTION`] of the ELF file at `path`,
/// with contents from `write` (which may seek within them): [`crate::elf::append_section`].
pub fn append_store<T, E: From<OutputError> + From<EditError>>(
    path: &Path,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    append_section(path, STORE_SECTION, STORE_ALIGN, write)
}

/// Writes the [`StoreSlot`] of the output at `path`: [`patch_slot_in`].
pub fn patch_slot(
    path: &Path,
    digest: &[u8; 32],
    mapping: Option<Mapping>,
    location: StoreLocation,
) -> Result<(), OutputError> {
    patch_slot_in(&mut OpenElf::open(path)?, digest, mapping, location)
}

/// Writes the [`StoreSlot`] of the output: the store's digest and, when the store is mapped
/// with the image, where it is relative to the slot (the file open, its headers as they are
/// in memory).
pub fn patch_slot_in(
    elf: &mut OpenElf,
    digest: &[u8; 32],
    mapping: Option<Mapping>,
    location: StoreLocation,
) -> Result<(), OutputError> {
    let path = &elf.path;
    let (offset, size, addr) = super::slot_range_in(&elf.layout)
        .ok_or_else(|| {
            bad(
                path,
                format!("no {DIGEST_SECTION} section: the glue object was not linked"),
            )
        })?
        .map_err(|e| bad(path, format!("{e}; refusing to write the store digest")))?;
    // What the linked runtime reads is a property of the link, not of this patch.
    let mut old = vec![0u8; usize::try_from(size).unwrap_or(0).min(4096)];
    elf.file
        .read_exact_at(&mut old, offset)
        .map_err(io_err(path))?;
    let features = StoreSlot::read(&old).map_or(0, |s| s.features);
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
    elf.file
        .write_all_at(&slot.to_bytes()[..want], offset)
        .map_err(io_err(path))
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
    finish_in(&mut OpenElf::open(path)?, digest, embedded)
}

/// [`finish`] of a file already open, its headers as they are in memory: one read of the
/// headers for the whole store step of a link.
pub fn finish_in(
    elf: &mut OpenElf,
    digest: &[u8; 32],
    embedded: bool,
) -> Result<Option<Mapping>, OutputError> {
    // A side-file store wrote nothing over what the cut left past the end.
    elf.settle()?;
    let mapping = place(elf, digest, embedded, embedded)?;
    mix_build_id(elf, digest)?;
    Ok(mapping)
}

/// [`append_store`] of a file already open, its headers as they are in memory (updated).
pub fn append_store_in<T, E: From<OutputError> + From<EditError>>(
    elf: &mut OpenElf,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    append_section_in(elf, STORE_SECTION, STORE_ALIGN, write)
}

/// Maps the section (when `map` and the output allows it) and patches the slot.
fn place(
    elf: &mut OpenElf,
    digest: &[u8; 32],
    map: bool,
    embedded: bool,
) -> Result<Option<Mapping>, OutputError> {
    let mapping = if map { map_store(elf)? } else { None };
    let location = match (embedded, mapping) {
        (_, Some(_)) => StoreLocation::Mapped,
        (true, None) => StoreLocation::Section,
        (false, None) => StoreLocation::SideFile,
    };
    patch_slot_in(elf, digest, mapping, location)?;
    Ok(mapping)
}

/// Replaces what the `.fatpack` section of the packed output at `path` holds (a store, or a
/// split manifest standing for the same store), mapped again if it `was_mapped`, else left
/// a plain section as it was; the recorded `digest` and the build ID stay what they were,
/// since the device code the binary names is the same (`fatpack split` and `fatpack join`,
/// which must give back the original bytes).
pub fn replace_store<T, E: From<OutputError> + From<EditError>>(
    path: &Path,
    digest: &[u8; 32],
    was_mapped: bool,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    let mut elf = OpenElf::open(path)?;
    let r = append_store_in(&mut elf, write)?;
    place(&mut elf, digest, was_mapped, true)?;
    Ok(r)
}
