//! Mapping the store with the image: the program header the linker made for the glue
//! object's note (`.note.fatpack`, an alignment no other note has, so a `PT_NOTE` of its own)
//! becomes a read-only `PT_LOAD` of the `.fatpack` section, placed after the highest address
//! the output loads. The running image then reaches its store through the slot's relative
//! address: no file to find, nothing a strip tool removes (the section is allocated), no
//! relocation that could overflow whatever the store's size, and the kernel maps it lazily
//! (no memory is used until a module is read).
//!
//! Nothing else moves: the program header table keeps its place and size, every section and
//! segment the linker wrote keeps its bytes and addresses.

use object::elf::{PF_R, PT_LOAD, PT_NOTE, SHF_ALLOC, SHT_NOTE, SHT_PROGBITS};

use super::error::{malformed as bad, EditError};
use super::open::OpenElf;
use super::{Layout, Phdr, LE};
use fatpack_format::link::{SEGMENT_NOTE_SECTION, STORE_SECTION};

/// The smallest page any Linux target uses; the store is appended at a multiple of it.
const MIN_PAGE: u64 = 4096;

/// Where the store was mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// Virtual address of the store (before the load bias of a PIE or shared object).
    pub vaddr: u64,
    pub offset: u64,
    pub len: u64,
}

/// A section of the output, as [`map_store`] needs it.
struct Placed {
    index: usize,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
}

fn placed(l: &Layout, name: &str) -> Option<Placed> {
    l.section_by_name(name).map(|(index, s)| Placed {
        index,
        kind: s.sh_type.get(LE),
        flags: s.sh_flags.get(LE),
        addr: s.sh_addr.get(LE),
        offset: s.sh_offset.get(LE),
        size: s.sh_size.get(LE),
    })
}

/// The glue note has done its job once the link is over (it made the linker reserve a
/// program header). Left an `SHT_NOTE` of alignment 16 it would make note readers warn
/// ("expecting 4 or 8"), and where a linker merged it into another `PT_NOTE` (mold
/// before 2.0) that header's alignment would be 16 too: the section becomes plain data
/// and such a header gets back the alignment of the notes it really holds.
fn retire_note(l: &mut Layout, note: &Placed, converted: Option<usize>) {
    if note.kind == SHT_NOTE {
        l.sections[note.index].sh_type.set(LE, SHT_PROGBITS);
    }
    let end = note.offset + note.size;
    let notes: Vec<(u64, u64, u64)> = l
        .sections
        .iter()
        .filter(|s| s.sh_type.get(LE) == SHT_NOTE && s.sh_size.get(LE) != 0)
        .map(|s| {
            (
                s.sh_offset.get(LE),
                s.sh_size.get(LE),
                s.sh_addralign.get(LE),
            )
        })
        .collect();
    for (i, p) in l.segments.iter_mut().enumerate() {
        let (off, filesz) = (p.p_offset.get(LE), p.p_filesz.get(LE));
        let covers = off <= note.offset && end <= off + filesz;
        if Some(i) == converted || p.p_type.get(LE) != PT_NOTE || !covers {
            continue;
        }
        let align = notes
            .iter()
            .filter(|(o, n, _)| off <= *o && o + n <= off + filesz)
            .map(|(_, _, a)| *a)
            .max()
            .unwrap_or(4)
            .clamp(4, 8);
        p.p_align.set(LE, align);
    }
}

/// Gives the `.fatpack` section of the ELF file `elf` a `PT_LOAD` of its own (or moves
/// the one it has, after `fatpack prune` rewrote the section). `Ok(None)`: the output has no
/// program header to spare (its linker merged the glue note into another note's `PT_NOTE`,
/// as mold before 2.0 does); the store then stays a non-allocated section that the runtime
/// finds through the file. The file is open, its headers as they are in memory (updated).
pub fn map_store(elf: &mut OpenElf) -> Result<Option<Mapping>, EditError> {
    let path = &elf.path.clone();
    let h = &mut elf.layout;
    let store = placed(h, STORE_SECTION)
        .ok_or_else(|| bad(path, format!("no {STORE_SECTION} section to map")))?;
    if store.offset % MIN_PAGE != 0 {
        return Err(bad(
            path,
            format!("the {STORE_SECTION} section is not page-aligned in the file"),
        ));
    }
    let note = placed(h, SEGMENT_NOTE_SECTION);
    let mapped_already = store.flags & u64::from(SHF_ALLOC) != 0;
    let slot = if mapped_already {
        h.segments
            .iter()
            .position(|p| p.p_type.get(LE) == PT_LOAD && p.p_vaddr.get(LE) == store.addr)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("the allocated {STORE_SECTION} section has no PT_LOAD"),
                )
            })?
    } else {
        let found = note.as_ref().and_then(|note| {
            h.segments.iter().position(|p| {
                p.p_type.get(LE) == PT_NOTE
                    && p.p_offset.get(LE) == note.offset
                    && p.p_filesz.get(LE) == note.size
            })
        });
        match found {
            Some(i) => i,
            None => {
                if let Some(note) = &note {
                    retire_note(h, note, None);
                    elf.write_headers()?;
                }
                return Ok(None);
            }
        }
    };
    if let Some(note) = &note {
        retire_note(h, note, Some(slot));
    }
    let others = || {
        h.segments
            .iter()
            .enumerate()
            .filter(move |(i, p)| *i != slot && p.p_type.get(LE) == PT_LOAD)
            .map(|(_, p)| p)
    };
    let align = others()
        .map(|p| p.p_align.get(LE))
        .max()
        .unwrap_or(MIN_PAGE)
        .max(MIN_PAGE);
    if !align.is_power_of_two() {
        return Err(bad(
            path,
            format!("PT_LOAD alignment {align:#x} is not a power of two"),
        ));
    }
    let top = others()
        .map(|p| p.p_vaddr.get(LE).saturating_add(p.p_memsz.get(LE)))
        .max()
        .ok_or_else(|| bad(path, "no PT_LOAD segment"))?;
    let vaddr = top
        .checked_next_multiple_of(align)
        .and_then(|v| v.checked_add(store.offset % align))
        .filter(|v| v.checked_add(store.size).is_some())
        .ok_or_else(|| bad(path, "the store does not fit in the address space"))?;
    let mut seg: Phdr = crate::elf::zeroed();
    seg.p_type.set(LE, PT_LOAD);
    seg.p_flags.set(LE, PF_R);
    seg.p_offset.set(LE, store.offset);
    seg.p_vaddr.set(LE, vaddr);
    seg.p_paddr.set(LE, vaddr);
    seg.p_filesz.set(LE, store.size);
    seg.p_memsz.set(LE, store.size);
    seg.p_align.set(LE, align);
    // PT_LOAD entries must stay sorted by address: ours has the highest, so it goes right
    // after the last other PT_LOAD (the entries between move up one; their order among
    // themselves is kept, and none of them is a PT_LOAD).
    h.segments.remove(slot);
    let at = h
        .segments
        .iter()
        .rposition(|p| p.p_type.get(LE) == PT_LOAD)
        .map_or(0, |i| i + 1);
    h.segments.insert(at, seg);
    // The section says the same: allocated, at that address. Strip tools keep allocated
    // sections, which is what keeps the store in a stripped binary.
    let sh = &mut h.sections[store.index];
    sh.sh_flags.set(LE, store.flags | u64::from(SHF_ALLOC));
    sh.sh_addr.set(LE, vaddr);
    elf.write_headers()?;
    Ok(Some(Mapping {
        vaddr,
        offset: store.offset,
        len: store.size,
    }))
}
