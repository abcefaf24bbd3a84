//! The cut file's headers, and every pointer and symbol that named a moved container
//! pointed at its new place.

use std::collections::BTreeMap;

use object::elf;

use super::compact::Compacted;
use super::plan::Plan;
use super::{addr_in, load, word, Rebuilt, Shift};
use crate::elf::{file_range, records, records_mut, Layout, Phdr, Rela, Sym, LE};
use fatpack_format::fatbin::{WrapperRecord, WRAPPER_MAGIC};

/// The headers of the cut file.
pub(super) fn cut_headers(
    layout: &Layout,
    cut: &Plan,
    c: &Compacted,
    phdrs: Option<u64>,
    shift: Shift,
) -> Layout {
    let moved = |off: u64| shift.apply(off);
    let mut new = layout.clone();
    let h = &mut new.header;
    h.e_shoff.set(LE, moved(h.e_shoff.get(LE)));
    h.e_phoff.set(LE, moved(h.e_phoff.get(LE)));
    let p = layout.segments[cut.seg];
    let addr_of = |off: u64| addr_in(&p, off);
    for (i, s) in new.sections.iter_mut().enumerate() {
        if let Some(p) = c.placed(i) {
            s.sh_addr.set(LE, addr_of(p.offset));
            s.sh_offset.set(LE, p.offset);
            s.sh_size.set(LE, p.size);
        } else if s.sh_offset.get(LE) >= cut.resume {
            s.sh_offset.set(LE, moved(s.sh_offset.get(LE)));
        }
    }
    for q in new.segments.iter_mut() {
        if q.p_offset.get(LE) >= cut.resume {
            q.p_offset.set(LE, moved(q.p_offset.get(LE)));
        }
    }
    // The first part keeps the segment's start and ends where the moved part begins in
    // the file (the freed bytes before it load as zeros).
    let first_len = cut.resume - shift.by - p.p_offset.get(LE);
    let p1 = &mut new.segments[cut.seg];
    p1.p_filesz.set(LE, first_len);
    let memsz = p.p_memsz.get(LE);
    p1.p_memsz.set(
        LE,
        if cut.tail.is_some() || memsz == p.p_filesz.get(LE) {
            first_len
        } else {
            memsz
        },
    );
    // Each part is executable only if it holds code (eu-elflint checks; the tail of a
    // `-z noseparate-code` text segment is unwind data).
    let exec_between = |lo: u64, hi: u64| {
        layout.sections.iter().any(|s| {
            let a = s.sh_addr.get(LE);
            s.sh_flags.get(LE) & u64::from(elf::SHF_EXECINSTR) != 0 && a >= lo && a < hi
        })
    };
    let flags = p.p_flags.get(LE);
    let part_flags = |lo, hi| match exec_between(lo, hi) {
        true => flags,
        false => flags & !elf::PF_X,
    };
    let p_vaddr = p.p_vaddr.get(LE);
    if let Some(tail) = cut.tail {
        new.segments[cut.seg]
            .p_flags
            .set(LE, part_flags(p_vaddr, tail));
    }
    if let (Some(tail), Some(at)) = (cut.tail, phdrs) {
        let mut p2 = p;
        p2.p_flags.set(LE, part_flags(tail, p_vaddr + memsz));
        let skipped = tail - p.p_vaddr.get(LE);
        p2.p_offset.set(LE, cut.resume - shift.by);
        p2.p_vaddr.set(LE, tail);
        p2.p_paddr.set(LE, p.p_paddr.get(LE) + skipped);
        p2.p_filesz.set(LE, p.p_filesz.get(LE) - skipped);
        p2.p_memsz.set(LE, memsz - skipped);
        new.segments.insert(cut.seg + 1, p2);
        let len = new.segments.len() as u64 * std::mem::size_of::<Phdr>() as u64;
        new.header.e_phoff.set(LE, at);
        new.header.e_phnum.set(LE, new.segments.len() as u16);
        for q in new.segments.iter_mut() {
            if q.p_type.get(LE) == elf::PT_PHDR {
                q.p_offset.set(LE, at);
                q.p_vaddr.set(LE, addr_of(at));
                q.p_paddr.set(LE, addr_of(at));
                q.p_filesz.set(LE, len);
                q.p_memsz.set(LE, len);
            }
        }
    }
    new
}

/// Symbols in a compacted device section follow it ([`Compacted::new_address`]).
pub(super) fn move_symbols(layout: &Layout, c: &Compacted, r: &mut Rebuilt) {
    let sym_len = std::mem::size_of::<Sym>();
    for s in &layout.sections {
        if !matches!(s.sh_type.get(LE), elf::SHT_SYMTAB | elf::SHT_DYNSYM) {
            continue;
        }
        let old_off = s.sh_offset.get(LE);
        let (off, size) = (r.new_offset(old_off), s.sh_size.get(LE));
        let Some(len) = file_range(r.out, off, size).map(<[u8]>::len) else {
            continue;
        };
        let at = off as usize;
        let mut patched = Vec::new();
        for (n, sym) in records_mut::<Sym>(&mut r.out[at..at + len])
            .iter_mut()
            .enumerate()
        {
            let shndx = usize::from(sym.st_shndx.get(LE));
            let (old, old_size) = (sym.st_value.get(LE), sym.st_size.get(LE));
            let Some(new) = c.new_address(shndx, old) else {
                continue;
            };
            let size = c.new_size(shndx, old, new, old_size);
            if (new, size) != (old, old_size) {
                sym.st_value.set(LE, new);
                sym.st_size.set(LE, size);
                // The cut's check allows this change of an allocated `.dynsym`, and no other.
                patched.push((old_off + (n * sym_len) as u64, sym_len as u64));
            }
        }
        r.patched.extend(patched);
    }
}

/// A place that holds the address of a container.
pub(super) enum Site {
    /// An `R_*_RELATIVE` relocation (file offset of the record) whose addend is the
    /// address, and the file offset of the word it relocates, if that word holds it too.
    Rela { at: u64, word: Option<usize> },
    /// A word that holds the address itself (a non-PIE executable's wrappers and prelinked
    /// arrays).
    Word(usize),
}

/// Every place that points at an address `wanted` accepts (a container's, or one in a
/// moved embedded section): the `R_*_RELATIVE` relocations and, in a non-PIE executable,
/// the wrappers and the prelinked arrays they point to.
pub(super) fn pointer_sites(
    data: &[u8],
    layout: &Layout,
    wanted: &dyn Fn(u64) -> bool,
) -> Vec<(u64, Site)> {
    let relative = match layout.machine() {
        elf::EM_X86_64 => elf::R_X86_64_RELATIVE,
        elf::EM_AARCH64 => elf::R_AARCH64_RELATIVE,
        _ => u32::MAX,
    };
    let rela_len = std::mem::size_of::<Rela>() as u64;
    let mut sites = Vec::new();
    for s in &layout.sections {
        if s.sh_type.get(LE) != elf::SHT_RELA {
            continue;
        }
        let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
        let Some(relas) = file_range(data, off, size) else {
            continue;
        };
        for (n, rel) in records::<Rela>(relas).iter().enumerate() {
            let addend = rel.r_addend.get(LE) as u64;
            if rel.r_info.get(LE) as u32 != relative || !wanted(addend) {
                continue;
            }
            let word =
                file_of(layout, rel.r_offset.get(LE)).filter(|&t| word(data, t) == Some(addend));
            let at = off + n as u64 * rela_len;
            sites.push((addend, Site::Rela { at, word }));
        }
    }
    if layout.file_type() == elf::ET_EXEC {
        wrapper_sites(data, layout, wanted, &mut sites);
    }
    sites
}

pub(super) fn wrapper_sites(
    data: &[u8],
    layout: &Layout,
    wanted: &dyn Fn(u64) -> bool,
    sites: &mut Vec<(u64, Site)>,
) {
    let Some((_, s)) = layout.section_by_name(".nvFatBinSegment") else {
        return;
    };
    let (off, size) = (s.sh_offset.get(LE) as usize, s.sh_size.get(LE) as usize);
    for w in (off..off + size.saturating_sub(WrapperRecord::LEN - 1)).step_by(8) {
        let Some(rec) = data.get(w..).and_then(WrapperRecord::read) else {
            break;
        };
        if rec.magic != WRAPPER_MAGIC {
            continue;
        }
        if wanted(rec.data) {
            sites.push((rec.data, Site::Word(w + 8)));
        }
        if rec.version == 2 {
            if let Some(mut a) = file_of(layout, rec.filename_or_fatbins) {
                while let Some(p) = word(data, a).filter(|&p| p != 0) {
                    if wanted(p) {
                        sites.push((p, Site::Word(a)));
                    }
                    a += 8;
                }
            }
        }
    }
}

/// Points every site at its container's new address; returns how many containers it
/// redirected.
pub(super) fn redirect(
    sites: &[(u64, Site)],
    moved: &BTreeMap<u64, u64>,
    r: &mut Rebuilt,
) -> usize {
    let rela_len = std::mem::size_of::<Rela>();
    let mut done = std::collections::BTreeSet::new();
    for (target, site) in sites {
        let Some(&new) = moved.get(target) else {
            continue;
        };
        match *site {
            Site::Rela { at, word } => {
                let to = r.new_offset(at) as usize;
                if let Some(b) = r.out.get_mut(to..to + rela_len) {
                    records_mut::<Rela>(b)[0].r_addend.set(LE, new as i64);
                    r.patched.push((at, rela_len as u64));
                }
                if let Some(t) = word {
                    r.set_word(t, new);
                }
            }
            Site::Word(at) => r.set_word(at, new),
        }
        done.insert(*target);
    }
    done.len()
}

/// The file offset of the loaded address `addr` (8 bytes of it in the file), in the input.
pub(super) fn file_of(layout: &Layout, addr: u64) -> Option<usize> {
    layout.segments.iter().find_map(|p| {
        let (va, fs) = (p.p_vaddr.get(LE), p.p_filesz.get(LE));
        (load(p) && addr >= va && addr + 8 <= va + fs)
            .then(|| (p.p_offset.get(LE) + (addr - va)) as usize)
    })
}
