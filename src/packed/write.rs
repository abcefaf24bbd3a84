//! Writing a packed output: the store appended as a non-allocated section (or replaced, by
//! prune), and the digest slot patched.
//!
//! Everything here edits a temp file in place and never fsyncs it: durability is for
//! whoever commits. The link renames its output into place without an fsync, as ld does
//! (forcing a 400 MB output of static cuBLAS to disk cost more than the rest of the store
//! step); prune, repack, split and join fsync when they commit.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

use object::elf;

use super::{bad, io_err, OutputError};
use crate::elf::build_id::mix_build_id;
use crate::elf::store_segment::{map_store, read_layout, Mapping};
use crate::elf::{Shdr, LE};
use crate::inputs::map_file;
use fatpack_format::link::{StoreLocation, StoreSlot, DIGEST_SECTION, STORE_SECTION};
/// Alignment of the store in the file, so that it can be mapped on its own.
const STORE_ALIGN: u64 = 4096;

/// Writes relative to a base offset, so the store writer (which seeks to 0 to patch its
/// header) can write straight into the output file.
pub struct OffsetWriter {
    file: File,
    base: u64,
}

impl Write for OffsetWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for OffsetWriter {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let abs = match pos {
            SeekFrom::Start(n) => self.file.seek(SeekFrom::Start(self.base + n))?,
            other => self.file.seek(other)?,
        };
        abs.checked_sub(self.base)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the store"))
    }
}

/// Write a store as the non-allocated section [`STORE_SECTION`] of the ELF file at `path`,
/// with contents from `write` (which may seek within them). A new section goes at the end
/// of the file; an existing one (`fatpack prune`) is replaced: in place of the old bytes
/// when nothing but the section tables follows them (as after `fatpack ld`), else at the
/// end. The section-name and section-header tables are rewritten after the store. Nothing
/// loaded moves.
pub fn append_store<T, E: From<OutputError>>(
    path: &Path,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    let mut f = File::options()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    let mut lay = read_layout(path, &f).map_err(OutputError::from)?;
    let shstrndx = lay.names_index();
    let shoff = lay.header.e_shoff.get(LE);
    let existing = lay.section_by_name(STORE_SECTION).map(|(i, _)| i);
    let end = f.seek(SeekFrom::End(0)).map_err(io_err(path))?;
    // Where the bytes that may be overwritten start: the old store if it is last, else the
    // tables if they are last, else the end of the file.
    let data_end_except = |skip: Option<usize>| -> u64 {
        lay.sections
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                Some(*i) != skip && *i != shstrndx && s.sh_type.get(LE) != elf::SHT_NOBITS
            })
            .map(|(_, s)| s.sh_offset.get(LE) + s.sh_size.get(LE))
            .max()
            .unwrap_or(0)
    };
    let shstr_off = lay.sections[shstrndx].sh_offset.get(LE);
    let tables_last = shoff + lay.section_table().len() as u64 == end;
    let mut tail_start = end;
    if tables_last && shstr_off < shoff && data_end_except(existing) <= shstr_off {
        tail_start = shstr_off.min(shoff);
    }
    if let Some(i) = existing {
        let old = lay.sections[i].sh_offset.get(LE);
        if tables_last && data_end_except(existing) <= old && old <= shstr_off {
            tail_start = old;
        }
    }
    let base = tail_start.div_ceil(STORE_ALIGN) * STORE_ALIGN;
    f.set_len(base).map_err(io_err(path))?;
    f.seek(SeekFrom::Start(base)).map_err(io_err(path))?;
    let mut w = OffsetWriter { file: f, base };
    let result = write(&mut w)?;
    let mut f = w.file;
    let store_end = f.seek(SeekFrom::End(0)).map_err(io_err(path))?;
    let store_len = store_end - base;
    match existing {
        Some(i) => {
            let s = &mut lay.sections[i];
            s.sh_offset.set(LE, base);
            s.sh_size.set(LE, store_len);
        }
        None => {
            let mut s: Shdr = crate::elf::zeroed();
            s.sh_name.set(LE, lay.names.len() as u32);
            s.sh_type.set(LE, elf::SHT_PROGBITS);
            // flags 0: not allocated, so in no segment; address 0.
            s.sh_offset.set(LE, base);
            s.sh_size.set(LE, store_len);
            s.sh_addralign.set(LE, STORE_ALIGN);
            lay.names.extend_from_slice(STORE_SECTION.as_bytes());
            lay.names.push(0);
            lay.sections.push(s);
            lay.set_section_count()
                .map_err(|e| bad(path, e.to_string()))?;
        }
    }
    // The section names, then the section header table, after the store.
    let strtab_off = store_end;
    let pos = strtab_off + lay.names.len() as u64;
    let shoff = pos.div_ceil(8) * 8;
    let names = &mut lay.sections[shstrndx];
    names.sh_offset.set(LE, strtab_off);
    names.sh_size.set(LE, lay.names.len() as u64);
    lay.header.e_shoff.set(LE, shoff);
    f.write_all(&lay.names).map_err(io_err(path))?;
    f.write_all(&vec![0u8; (shoff - pos) as usize])
        .map_err(io_err(path))?;
    f.write_all(lay.section_table()).map_err(io_err(path))?;
    f.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
    f.write_all(object::pod::bytes_of(&lay.header))
        .map_err(io_err(path))?;
    Ok(result)
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
pub fn replace_store<T, E: From<OutputError>>(
    path: &Path,
    digest: &[u8; 32],
    was_mapped: bool,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    let r = append_store(path, write)?;
    place(path, digest, was_mapped, true)?;
    Ok(r)
}
