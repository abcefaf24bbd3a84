//! Pruning a tail-mode output (`fatpack ld --fatpack-mode=tail`): its device sections are the
//! last thing the file loads, in a read-only `PT_LOAD` of their own after `.bss`, so nothing
//! else's address depends on their size. The pruned containers are packed together, the
//! segment and sections shrink, what follows in the file (symbols, section headers) moves
//! up, and every pointer to a container is redirected: the wrappers' `R_*_RELATIVE`
//! relocations (and the values at their targets), wrappers and prelinked arrays of a
//! non-PIE executable, and symbols. The file gets smaller by the bytes dropped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{elf, LittleEndian as LE};

use super::{io_at, prune_container, PruneError, PruneReport, Selection};
use crate::inputs::{self, Scanned};

const FATBIN_WRAPPER_MAGIC: u32 = 0x466243b1;

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8"))
}
fn put_u64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

pub(super) struct Segment {
    /// Index of the program header.
    index: usize,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    writable: bool,
}

/// The last loaded segment, if the device sections are exactly what it holds (tail layout).
pub(super) fn tail_segment(data: &[u8], scanned: &Scanned) -> Option<Segment> {
    let hdr = elf::FileHeader64::<LE>::parse(data).ok()?;
    let loads: Vec<Segment> = hdr
        .program_headers(LE, data)
        .ok()?
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type(LE) == elf::PT_LOAD)
        .map(|(index, p)| Segment {
            index,
            offset: p.p_offset(LE),
            vaddr: p.p_vaddr(LE),
            filesz: p.p_filesz(LE),
            writable: p.p_flags(LE) & elf::PF_W != 0,
        })
        .collect();
    let last = loads.into_iter().max_by_key(|s| s.vaddr)?;
    if last.writable || scanned.sections.is_empty() {
        return None;
    }
    let sections = hdr.sections(LE, data).ok()?;
    let end = last.offset + last.filesz;
    // Every allocated section in the segment's file range is a device section.
    for (i, s) in sections.iter().enumerate() {
        let alloc = s.sh_flags(LE) & u64::from(elf::SHF_ALLOC) != 0;
        let off = s.sh_offset(LE);
        if alloc
            && s.sh_type(LE) != elf::SHT_NOBITS
            && off >= last.offset
            && off < end
            && !scanned.sections.iter().any(|d| d.section_index == i)
        {
            return None;
        }
    }
    scanned
        .sections
        .iter()
        .all(|d| d.file_offset >= last.offset && d.file_offset + d.section_size <= end)
        .then_some(last)
}

/// Compacts the device code of `data`, whose tail segment is `seg` ([`tail_segment`]).
pub(super) fn prune_tail(
    input: &Path,
    data: &[u8],
    seg: Segment,
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<(), PruneError> {
    let bad = |m: String| PruneError::Tail {
        path: input.to_path_buf(),
        message: m,
    };
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|e| bad(e.to_string()))?;
    let sections = hdr.sections(LE, data).map_err(|e| bad(e.to_string()))?;
    let addr_of = |off: u64| seg.vaddr + (off - seg.offset);

    // The new device bytes, packed from the segment's start, and old -> new addresses of
    // every container.
    let mut secs: Vec<_> = scanned.sections.iter().collect();
    secs.sort_by_key(|d| d.file_offset);
    let mut body: Vec<u8> = Vec::new();
    let mut moved: BTreeMap<u64, u64> = BTreeMap::new();
    let mut new_sections = Vec::new(); // (section index, new offset, new size)
    let start = secs[0].file_offset;
    body.resize((start - seg.offset) as usize, 0);
    body.copy_from_slice(&data[seg.offset as usize..start as usize]);
    for d in &secs {
        let align = sections
            .section(object::SectionIndex(d.section_index))
            .map(|s| s.sh_addralign(LE).max(1))
            .unwrap_or(8);
        let at = (seg.offset + body.len() as u64).next_multiple_of(align);
        body.resize((at - seg.offset) as usize, 0);
        for (index, (fb, &(off, _))) in d.containers.iter().zip(&d.spans).enumerate() {
            let at = (seg.offset + body.len() as u64).next_multiple_of(8);
            body.resize((at - seg.offset) as usize, 0);
            moved.insert(addr_of(d.file_offset + off), addr_of(at));
            body.extend(prune_container(
                &format!("{}#{index}", d.origin),
                fb,
                sel,
                report,
            )?);
        }
        let end = seg.offset + body.len() as u64;
        new_sections.push((d.section_index, at, end - at));
    }
    let old_end = seg.offset + seg.filesz;
    let new_end = seg.offset + body.len() as u64;
    // What follows the segment in the file (non-allocated sections, section headers) moves
    // up by `delta`, a multiple of their largest alignment so each stays aligned.
    let trailing_align = sections
        .iter()
        .filter(|s| s.sh_offset(LE) >= old_end && s.sh_type(LE) != elf::SHT_NOBITS)
        .map(|s| s.sh_addralign(LE).max(1))
        .chain([8])
        .max()
        .unwrap_or(8);
    let delta = (old_end - new_end) / trailing_align * trailing_align;
    let new_end = old_end - delta;
    body.resize((new_end - seg.offset) as usize, 0);

    let mut out = Vec::with_capacity(data.len() - delta as usize);
    out.extend_from_slice(&data[..seg.offset as usize]);
    out.extend_from_slice(&body);
    out.extend_from_slice(&data[old_end as usize..]);
    let shift = |off: u64| if off >= old_end { off - delta } else { off };

    // ELF header, program header, section headers.
    let shoff = hdr.e_shoff(LE);
    put_u64(&mut out, 0x28, shift(shoff));
    let phoff = hdr.e_phoff(LE) as usize;
    let ph = phoff + seg.index * 56;
    put_u64(&mut out, ph + 32, new_end - seg.offset); // p_filesz
    put_u64(&mut out, ph + 40, new_end - seg.offset); // p_memsz
    let new_shoff = shift(shoff) as usize;
    for (i, s) in sections.iter().enumerate() {
        let h = new_shoff + i * 64;
        if let Some(&(_, off, size)) = new_sections.iter().find(|n| n.0 == i) {
            put_u64(&mut out, h + 16, addr_of(off));
            put_u64(&mut out, h + 24, off);
            put_u64(&mut out, h + 32, size);
        } else if s.sh_type(LE) != elf::SHT_NOBITS {
            put_u64(&mut out, h + 24, shift(s.sh_offset(LE)));
        }
    }

    // Pointers to containers.
    let file_of = |addr: u64| -> Option<usize> {
        hdr.program_headers(LE, data).ok()?.iter().find_map(|p| {
            let (va, fs) = (p.p_vaddr(LE), p.p_filesz(LE));
            (p.p_type(LE) == elf::PT_LOAD && addr >= va && addr + 8 <= va + fs)
                .then(|| (p.p_offset(LE) + (addr - va)) as usize)
        })
    };
    let relative = match hdr.e_machine(LE) {
        elf::EM_X86_64 => elf::R_X86_64_RELATIVE,
        elf::EM_AARCH64 => elf::R_AARCH64_RELATIVE,
        _ => u32::MAX,
    };
    let mut redirected = 0usize;
    for s in sections.iter() {
        if s.sh_type(LE) != elf::SHT_RELA {
            continue;
        }
        let (off, size) = (s.sh_offset(LE) as usize, s.sh_size(LE) as usize);
        for r in (off..off + size).step_by(24) {
            let info = u64_at(data, r + 8);
            if info as u32 != relative {
                continue;
            }
            let addend = u64_at(data, r + 16);
            if let Some(&new) = moved.get(&addend) {
                put_u64(&mut out, shift(r as u64) as usize + 16, new);
                if let Some(t) = file_of(u64_at(data, r)) {
                    if u64_at(data, t) == addend {
                        put_u64(&mut out, t, new);
                    }
                }
                redirected += 1;
            }
        }
    }
    // A non-PIE executable has no relocations for them: the wrappers (and the prelinked
    // arrays they point to) hold the addresses themselves.
    if hdr.e_type(LE) == elf::ET_EXEC {
        for s in sections.iter() {
            if sections.section_name(LE, s).ok() != Some(b".nvFatBinSegment".as_slice()) {
                continue;
            }
            let (off, size) = (s.sh_offset(LE) as usize, s.sh_size(LE) as usize);
            for w in (off..off + size.saturating_sub(23)).step_by(8) {
                if u32::from_le_bytes(data[w..w + 4].try_into().expect("4")) != FATBIN_WRAPPER_MAGIC
                {
                    continue;
                }
                if let Some(&new) = moved.get(&u64_at(data, w + 8)) {
                    put_u64(&mut out, w + 8, new);
                    redirected += 1;
                }
                let version = u32::from_le_bytes(data[w + 4..w + 8].try_into().expect("4"));
                if version == 2 {
                    if let Some(mut a) = file_of(u64_at(data, w + 16)) {
                        while a + 8 <= data.len() && u64_at(data, a) != 0 {
                            if let Some(&new) = moved.get(&u64_at(data, a)) {
                                put_u64(&mut out, a, new);
                                redirected += 1;
                            }
                            a += 8;
                        }
                    }
                }
            }
        }
    }
    if redirected < moved.len() {
        return Err(bad(format!(
            "found the pointers of {redirected} of {} fatbin containers; refusing to move them",
            moved.len()
        )));
    }
    // Symbols at a container's start follow it.
    for s in sections.iter() {
        if s.sh_type(LE) != elf::SHT_SYMTAB {
            continue;
        }
        let (off, size) = (s.sh_offset(LE) as usize, s.sh_size(LE) as usize);
        for sym in (off..off + size).step_by(24) {
            let shndx = usize::from(u16::from_le_bytes([data[sym + 6], data[sym + 7]]));
            if !new_sections.iter().any(|n| n.0 == shndx) {
                continue;
            }
            if let Some(&new) = moved.get(&u64_at(data, sym + 8)) {
                put_u64(&mut out, shift(sym as u64) as usize + 8, new);
            }
        }
    }

    // Verify before writing: the output parses, and holds exactly the pruned containers.
    let check = inputs::scan_bytes(input, &out)
        .map_err(|e| bad(format!("the compacted file does not read back: {e}")))?;
    let got: usize = check.sections.iter().map(|d| d.containers.len()).sum();
    if got != moved.len() {
        return Err(bad(format!(
            "the compacted file reads back {got} containers, not {}",
            moved.len()
        )));
    }
    let path = tmp.path().to_path_buf();
    tmp.as_file_mut().write_all(&out).map_err(io_at(&path))?;
    Ok(())
}
