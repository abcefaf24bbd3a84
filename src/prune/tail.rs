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

use object::elf;
use object::{LittleEndian, U64};

use super::{io_at, prune_container, PruneError, PruneReport, Selection};
use crate::elf::{file_range, records, records_mut, Layout, Rela, Sym, LE};
use crate::inputs::{self, Scanned};
use fatpack_format::fatbin::{WrapperRecord, WRAPPER_MAGIC};

pub(super) struct Segment {
    /// Index of the program header.
    index: usize,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    writable: bool,
}

/// The last loaded segment, if the device sections are exactly what it holds (tail layout).
pub(super) fn tail_segment(layout: &Layout, scanned: &Scanned) -> Option<Segment> {
    let last = layout
        .segments
        .iter()
        .enumerate()
        .filter(|(_, p)| p.p_type.get(LE) == elf::PT_LOAD)
        .map(|(index, p)| Segment {
            index,
            offset: p.p_offset.get(LE),
            vaddr: p.p_vaddr.get(LE),
            filesz: p.p_filesz.get(LE),
            writable: p.p_flags.get(LE) & elf::PF_W != 0,
        })
        .max_by_key(|s| s.vaddr)?;
    if last.writable || scanned.sections.is_empty() {
        return None;
    }
    let end = last.offset.checked_add(last.filesz)?;
    // Every allocated section in the segment's file range is a device section.
    for (i, s) in layout.sections.iter().enumerate() {
        let off = s.sh_offset.get(LE);
        if layout.allocated(i)
            && s.sh_type.get(LE) != elf::SHT_NOBITS
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

/// The pruned device code, packed from the segment's start.
struct Compacted {
    /// The segment's new bytes.
    body: Vec<u8>,
    /// Old address -> new address of every container.
    moved: BTreeMap<u64, u64>,
    /// (section index, new offset, new size) of every device section.
    sections: Vec<(usize, u64, u64)>,
}

fn compact(
    data: &[u8],
    layout: &Layout,
    seg: &Segment,
    scanned: &Scanned,
    sel: &Selection,
    report: &mut PruneReport,
) -> Result<Compacted, PruneError> {
    let addr_of = |off: u64| seg.vaddr + (off - seg.offset);
    let mut secs: Vec<_> = scanned.sections.iter().collect();
    secs.sort_by_key(|d| d.file_offset);
    let mut c = Compacted {
        body: data[seg.offset as usize..secs[0].file_offset as usize].to_vec(),
        moved: BTreeMap::new(),
        sections: Vec::new(),
    };
    let body = &mut c.body;
    for d in &secs {
        let align = layout
            .sections
            .get(d.section_index)
            .map_or(8, |s| s.sh_addralign.get(LE).max(1));
        let at = (seg.offset + body.len() as u64).next_multiple_of(align);
        body.resize((at - seg.offset) as usize, 0);
        for (index, (fb, &(off, _))) in d.containers.iter().zip(&d.spans).enumerate() {
            let to = (seg.offset + body.len() as u64).next_multiple_of(8);
            body.resize((to - seg.offset) as usize, 0);
            c.moved.insert(addr_of(d.file_offset + off), addr_of(to));
            body.extend(prune_container(
                &format!("{}#{index}", d.origin),
                fb,
                sel,
                report,
            )?);
        }
        let end = seg.offset + body.len() as u64;
        c.sections.push((d.section_index, at, end - at));
    }
    Ok(c)
}

/// The 8-byte word at `offset` of `buf`.
fn word(buf: &[u8], offset: usize) -> Option<u64> {
    let b = buf.get(offset..offset.checked_add(8)?)?;
    Some(
        object::pod::from_bytes::<U64<LittleEndian>>(b)
            .ok()?
            .0
            .get(LE),
    )
}

fn set_word(buf: &mut [u8], offset: usize, value: u64) {
    if let Some(b) = buf.get_mut(offset..offset + 8) {
        b.copy_from_slice(&value.to_le_bytes());
    }
}

/// Compacts the device code of `data`, whose headers are `layout` and whose tail segment
/// is `seg` ([`tail_segment`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn prune_tail(
    input: &Path,
    data: &[u8],
    layout: &Layout,
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
    let Compacted {
        mut body,
        moved,
        sections: new_sections,
    } = compact(data, layout, &seg, scanned, sel, report)?;
    let addr_of = |off: u64| seg.vaddr + (off - seg.offset);
    let old_end = seg.offset + seg.filesz;
    let new_end = seg.offset + body.len() as u64;
    // What follows the segment in the file (non-allocated sections, section headers) moves
    // up by `delta`, a multiple of their largest alignment so each stays aligned.
    let trailing_align = layout
        .sections
        .iter()
        .filter(|s| s.sh_offset.get(LE) >= old_end && s.sh_type.get(LE) != elf::SHT_NOBITS)
        .map(|s| s.sh_addralign.get(LE).max(1))
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
    let mut new = layout.clone();
    let h = &mut new.header;
    h.e_shoff.set(LE, shift(h.e_shoff.get(LE)));
    h.e_phoff.set(LE, shift(h.e_phoff.get(LE)));
    let p = &mut new.segments[seg.index];
    p.p_filesz.set(LE, new_end - seg.offset);
    p.p_memsz.set(LE, new_end - seg.offset);
    for (i, s) in new.sections.iter_mut().enumerate() {
        if let Some(&(_, off, size)) = new_sections.iter().find(|n| n.0 == i) {
            s.sh_addr.set(LE, addr_of(off));
            s.sh_offset.set(LE, off);
            s.sh_size.set(LE, size);
        } else if s.sh_type.get(LE) != elf::SHT_NOBITS {
            s.sh_offset.set(LE, shift(s.sh_offset.get(LE)));
        }
    }
    new.write_into(&mut out)
        .map_err(|e| bad(format!("the compacted headers do not fit: {e}")))?;

    let redirected = redirect(data, layout, &moved, &shift, &mut out);
    if redirected < moved.len() {
        return Err(bad(format!(
            "found the pointers of {redirected} of {} fatbin containers; refusing to move them",
            moved.len()
        )));
    }
    // Symbols at a container's start follow it.
    for s in &layout.sections {
        if s.sh_type.get(LE) != elf::SHT_SYMTAB {
            continue;
        }
        let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
        let Some(range) = file_range(&out, shift(off), size).map(|b| b.len()) else {
            continue;
        };
        let at = shift(off) as usize;
        for sym in records_mut::<Sym>(&mut out[at..at + range]) {
            let shndx = usize::from(sym.st_shndx.get(LE));
            if !new_sections.iter().any(|n| n.0 == shndx) {
                continue;
            }
            if let Some(&new) = moved.get(&sym.st_value.get(LE)) {
                sym.st_value.set(LE, new);
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

/// Points every pointer to a moved container at its new address: the wrappers'
/// `R_*_RELATIVE` relocations (and the values at their targets) and, in a non-PIE
/// executable, the wrappers and prelinked arrays themselves. Returns how many it redirected.
fn redirect(
    data: &[u8],
    layout: &Layout,
    moved: &BTreeMap<u64, u64>,
    shift: &dyn Fn(u64) -> u64,
    out: &mut [u8],
) -> usize {
    // The file offset of a loaded address (8 bytes of it in the file), in `data`.
    let file_of = |addr: u64| -> Option<usize> {
        layout.segments.iter().find_map(|p| {
            let (va, fs) = (p.p_vaddr.get(LE), p.p_filesz.get(LE));
            (p.p_type.get(LE) == elf::PT_LOAD && addr >= va && addr + 8 <= va + fs)
                .then(|| (p.p_offset.get(LE) + (addr - va)) as usize)
        })
    };
    let relative = match layout.machine() {
        elf::EM_X86_64 => elf::R_X86_64_RELATIVE,
        elf::EM_AARCH64 => elf::R_AARCH64_RELATIVE,
        _ => u32::MAX,
    };
    let mut redirected = 0usize;
    for s in &layout.sections {
        if s.sh_type.get(LE) != elf::SHT_RELA {
            continue;
        }
        let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
        let Some(relas) = file_range(data, off, size) else {
            continue;
        };
        for (n, r) in records::<Rela>(relas).iter().enumerate() {
            if r.r_info.get(LE) as u32 != relative {
                continue;
            }
            let addend = r.r_addend.get(LE) as u64;
            let Some(&new) = moved.get(&addend) else {
                continue;
            };
            let at = shift(off) as usize + n * std::mem::size_of::<Rela>();
            if let Some(rel) = out.get_mut(at..at + std::mem::size_of::<Rela>()) {
                records_mut::<Rela>(rel)[0].r_addend.set(LE, new as i64);
            }
            if let Some(t) = file_of(r.r_offset.get(LE)) {
                if word(data, t) == Some(addend) {
                    set_word(out, t, new);
                }
            }
            redirected += 1;
        }
    }
    // A non-PIE executable has no relocations for them: the wrappers (and the prelinked
    // arrays they point to) hold the addresses themselves.
    if layout.file_type() == elf::ET_EXEC {
        redirected += redirect_wrappers(data, layout, moved, &file_of, out);
    }
    redirected
}

fn redirect_wrappers(
    data: &[u8],
    layout: &Layout,
    moved: &BTreeMap<u64, u64>,
    file_of: &dyn Fn(u64) -> Option<usize>,
    out: &mut [u8],
) -> usize {
    let mut redirected = 0;
    let Some((_, s)) = layout.section_by_name(".nvFatBinSegment") else {
        return 0;
    };
    let (off, size) = (s.sh_offset.get(LE) as usize, s.sh_size.get(LE) as usize);
    for w in (off..off + size.saturating_sub(WrapperRecord::LEN - 1)).step_by(8) {
        let Some(rec) = data.get(w..).and_then(WrapperRecord::read) else {
            break;
        };
        if rec.magic != WRAPPER_MAGIC {
            continue;
        }
        if let Some(&new) = moved.get(&rec.data) {
            set_word(out, w + 8, new);
            redirected += 1;
        }
        if rec.version == 2 {
            if let Some(mut a) = file_of(rec.filename_or_fatbins) {
                while let Some(p) = word(data, a).filter(|&p| p != 0) {
                    if let Some(&new) = moved.get(&p) {
                        set_word(out, a, new);
                        redirected += 1;
                    }
                    a += 8;
                }
            }
        }
    }
    redirected
}
