//! Pruning a linked executable or shared library so that the file really shrinks.
//!
//! The pruned containers are packed together from the start of the first device section,
//! and every pointer to a container is redirected (the wrappers' `R_*_RELATIVE`
//! relocations and the values at their targets; the wrappers and prelinked arrays of a
//! non-PIE executable; symbols). The loaded segment that holds the device code is then cut
//! where the kept code ends:
//!
//! ```text
//!   before: | P: .rodata .nv_fatbin(all archs) .eh_frame ... | later segments, sections
//!   after:  | P1: .rodata .nv_fatbin(kept) [phdrs] | P2: .eh_frame ... | later ...
//! ```
//!
//! What followed the device code in that segment (the "tail", if any) gets a `PT_LOAD` of
//! its own at the same addresses and a lower file offset, and everything after it in the
//! file moves down by the same amount, a multiple of every moved segment's and section's
//! alignment, so each stays congruent to its address. No loaded address changes: the host
//! code, its symbols, relocations, unwind tables, notes and build ID are the same bytes at
//! the same addresses, and separate debug info still matches. With a tail the program
//! header table gains an entry; it moves to the end of the first part (the freed space),
//! where the loader and the kernel find it, as patchelf does. fatpack's own tail layout
//! (device code in the last segment, after `.bss`) is the case without a tail.
//!
//! A layout this cannot cut safely is refused with the reason ([`Refused`]), and the caller
//! prunes in place instead.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use object::elf;
use object::{LittleEndian, U64};

use super::embedded_move::embedded_moves;
use super::{io_at, prune_container, PruneError, PruneReport, Selection};
use crate::elf::{file_range, records, records_mut, Layout, Phdr, Rela, Sym, LE};
use crate::inputs::{self, DeviceSection, Scanned};
use fatpack_format::fatbin::{WrapperRecord, WRAPPER_MAGIC};

/// Why a layout is not cut (the file is pruned in place instead).
#[derive(Debug)]
pub(crate) struct Refused(pub String);

/// Where the file is cut: `[from, resume)` of the file is replaced by the compacted device
/// code and zeros, and everything from `resume` on moves down.
struct Plan {
    /// Index of the loaded segment that holds the device sections.
    seg: usize,
    /// File offset of the first device section: the compacted code starts here.
    from: u64,
    /// File offset of what follows the device code: the tail's first section, or the
    /// segment's file end when it has no tail.
    resume: u64,
    /// Address of the tail (what follows the device code in the segment), if any.
    tail: Option<u64>,
    /// Every moved segment and section stays aligned: the shift is a multiple of this.
    align: u64,
    /// The device sections packed together ([`last_run`]); the others are pruned in place.
    run: Vec<usize>,
    /// The embedded sections that stay where they are, and why (for the report).
    stay: Vec<(String, String)>,
}

/// The device sections the cut packs together (`run`, section indices).
fn movable<'a>(scanned: &'a Scanned, run: &'a [usize]) -> impl Iterator<Item = &'a DeviceSection> {
    scanned
        .sections
        .iter()
        .filter(|d| run.contains(&d.section_index))
}

/// The device sections to pack together: those registered through wrappers and the
/// fatbins embedded in the program's own data that may move with them (`can_move`,
/// [`embedded_moves`]), and of those the last run with no other section between them
/// (libtorch_nvshmem.so has a `.nvHRCE` between two): the ones before it are pruned where
/// they are.
fn last_run(layout: &Layout, scanned: &Scanned, can_move: &BTreeSet<usize>) -> Vec<usize> {
    let packs = |d: &DeviceSection| !d.embedded || can_move.contains(&d.section_index);
    let mut secs: Vec<&DeviceSection> = scanned.sections.iter().filter(|d| packs(d)).collect();
    secs.sort_by_key(|d| d.file_offset);
    let between = |lo: u64, hi: u64| {
        layout.sections.iter().enumerate().any(|(i, s)| {
            let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
            !scanned
                .sections
                .iter()
                .any(|d| d.section_index == i && packs(d))
                && s.sh_type.get(LE) != elf::SHT_NOBITS
                && size > 0
                && off < hi
                && off + size > lo
        })
    };
    let mut start = secs.len();
    while start > 0 {
        if start < secs.len() {
            let (a, b) = (secs[start - 1], secs[start]);
            if between(a.file_offset + a.section_size, b.file_offset) {
                break;
            }
        }
        start -= 1;
    }
    secs[start..].iter().map(|d| d.section_index).collect()
}

/// The address at which loaded segment `p` maps file offset `off`.
fn addr_in(p: &Phdr, off: u64) -> u64 {
    p.p_vaddr.get(LE) + (off - p.p_offset.get(LE))
}

/// Old file offset -> new one: everything from `resume` on moves down `by` bytes.
#[derive(Debug, Clone, Copy)]
struct Shift {
    resume: u64,
    by: u64,
}

impl Shift {
    fn apply(self, off: u64) -> u64 {
        if off >= self.resume {
            off - self.by
        } else {
            off
        }
    }
}

fn load(p: &Phdr) -> bool {
    p.p_type.get(LE) == elf::PT_LOAD
}

fn file_end(p: &Phdr) -> u64 {
    p.p_offset.get(LE).saturating_add(p.p_filesz.get(LE))
}

/// Decides where to cut `layout` (a linked ELF file whose device sections are `scanned`),
/// and which embedded sections stay where they are and why.
fn plan(data: &[u8], layout: &Layout, scanned: &Scanned) -> Result<Plan, Refused> {
    let refuse = |m: String| Err(Refused(m));
    let moves = embedded_moves(data, layout, scanned);
    let run = last_run(layout, scanned, &moves.can_move);
    let Some(from) = movable(scanned, &run).map(|d| d.file_offset).min() else {
        let why: Vec<String> = moves
            .stay
            .iter()
            .map(|(section, why)| format!("{section}: {why}"))
            .collect();
        return refuse(format!(
            "its device code is in the program's own data, which cannot move ({})",
            why.join("; ")
        ));
    };
    let dev_end = movable(scanned, &run)
        .map(|d| d.file_offset + d.section_size)
        .max()
        .unwrap_or(from);
    let Some((seg, p)) = layout
        .segments
        .iter()
        .enumerate()
        .find(|(_, p)| load(p) && p.p_offset.get(LE) <= from && dev_end <= file_end(p))
    else {
        return refuse("its device sections are not in one loaded segment".into());
    };
    let (p_off, p_vaddr) = (p.p_offset.get(LE), p.p_vaddr.get(LE));
    // The tail: the allocated sections of the segment after the device code.
    let mut resume = file_end(p);
    for (i, s) in layout.sections.iter().enumerate() {
        let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
        if run.contains(&i) || s.sh_type.get(LE) == elf::SHT_NOBITS || size == 0 {
            continue;
        }
        if off < dev_end && off + size > from {
            let name = String::from_utf8_lossy(layout.section_name(i)).into_owned();
            return refuse(format!("section {name} lies between its device sections"));
        }
        if layout.allocated(i) && off >= dev_end && off < resume {
            resume = off;
        }
    }
    let tail = (resume < file_end(p)).then(|| p_vaddr + (resume - p_off));
    // Nothing else (another segment, a header table) may lie in the part that goes.
    for (i, q) in layout.segments.iter().enumerate() {
        let (off, end) = (q.p_offset.get(LE), file_end(q));
        if i != seg && q.p_filesz.get(LE) > 0 && off < resume && end > from {
            return refuse(format!(
                "segment {i} (type {:#x}) overlaps its device code",
                q.p_type.get(LE)
            ));
        }
    }
    let h = &layout.header;
    let phdrs = h.e_phoff.get(LE);
    let phdrs_end = phdrs + u64::from(h.e_phnum.get(LE)) * std::mem::size_of::<Phdr>() as u64;
    let shdrs = h.e_shoff.get(LE);
    if (phdrs < resume && phdrs_end > from) || (shdrs >= from && shdrs < resume) {
        return refuse("a header table lies in its device code".into());
    }
    if tail.is_some() && moves_phdrs_off_the_first_segment(layout, p) {
        return refuse(
            "the program header table cannot move into the device code's segment (its \
             address and file offset differ from the first segment's)"
                .into(),
        );
    }
    // The shift keeps every moved segment and section aligned; a new segment is cut at a
    // page boundary (the largest page a loader may use is the segment's own alignment).
    let mut align = 8u64;
    for q in layout.segments.iter().filter(|q| load(q)) {
        if q.p_offset.get(LE) >= resume {
            align = align.max(q.p_align.get(LE));
        }
    }
    for s in &layout.sections {
        if s.sh_offset.get(LE) >= resume && s.sh_type.get(LE) != elf::SHT_NOBITS {
            align = align.max(s.sh_addralign.get(LE));
        }
    }
    if tail.is_some() {
        align = align.max(p.p_align.get(LE)).max(4096);
    }
    if !align.is_power_of_two() {
        return refuse(format!("an alignment of {align:#x} is not a power of two"));
    }
    let mut stay = moves.stay;
    for d in scanned.sections.iter().filter(|d| d.embedded) {
        if moves.can_move.contains(&d.section_index) && !run.contains(&d.section_index) {
            stay.push((
                d.section.clone(),
                "other sections lie between it and the device code that moves".into(),
            ));
        }
    }
    Ok(Plan {
        seg,
        from,
        resume,
        tail,
        align,
        run,
        stay,
    })
}

/// The kernel's `AT_PHDR` was, before Linux 5.18, the first segment's load address plus
/// `e_phoff`: a table moved into another segment is found there only if that segment maps
/// the file at the same distance from its addresses.
fn moves_phdrs_off_the_first_segment(layout: &Layout, p: &Phdr) -> bool {
    let delta = |q: &Phdr| q.p_vaddr.get(LE).wrapping_sub(q.p_offset.get(LE));
    let loaded = layout.file_type() == elf::ET_EXEC
        || layout
            .segments
            .iter()
            .any(|q| q.p_type.get(LE) == elf::PT_PHDR);
    let first = layout.segments.iter().find(|q| load(q));
    loaded && first.is_some_and(|f| delta(f) != delta(p))
}

/// What becomes of container `index` of a device section (whose bytes are given): its new
/// bytes.
pub(crate) type Replace<'a> =
    dyn FnMut(&DeviceSection, usize, &[u8]) -> Result<Vec<u8>, PruneError> + 'a;

/// The pruned device code, packed from the first device section's start.
struct Compacted {
    /// The new bytes from `Plan::from`.
    body: Vec<u8>,
    /// Old address -> new address of every container.
    moved: BTreeMap<u64, u64>,
    /// Every device section, in file order.
    sections: Vec<Placed>,
    /// Every container, moved or pinned, and the data between the containers of a moved
    /// embedded section, in address order.
    spans: Vec<Span>,
}

/// A device section after the cut.
struct Placed {
    index: usize,
    /// New file offset and size.
    offset: u64,
    size: u64,
    /// Old address and size; new address.
    old_addr: u64,
    old_size: u64,
    addr: u64,
}

/// A container (or, in an embedded section, the data between two) before and after the
/// cut: address and length.
#[derive(Clone, Copy)]
struct Span {
    old: u64,
    old_len: u64,
    new: u64,
    new_len: u64,
    /// The program's data, copied as it is (the cut's check compares it).
    copied: bool,
}

impl Compacted {
    fn placed(&self, shndx: usize) -> Option<&Placed> {
        self.sections.iter().find(|p| p.index == shndx)
    }

    /// The container whose old bytes hold `addr`, if any.
    fn span_at(&self, addr: u64) -> Option<Span> {
        let i = self
            .spans
            .partition_point(|s| s.old <= addr)
            .checked_sub(1)?;
        let s = self.spans[i];
        (addr < s.old + s.old_len).then_some(s)
    }

    /// Where an address in device section `shndx` now is: a place inside a container the
    /// same offset in the pruned one (clamped to its end; its start is its new start), any
    /// other place (padding, the section's end) the same offset from the section's start,
    /// clamped to its new end. No symbol is left pointing past what the section now holds.
    fn new_address(&self, shndx: usize, value: u64) -> Option<u64> {
        let p = self.placed(shndx)?;
        if !(p.old_addr..=p.old_addr + p.old_size).contains(&value) {
            return None;
        }
        Some(match self.span_at(value) {
            Some(s) => s.new + (value - s.old).min(s.new_len),
            None => p.addr + (value - p.old_addr).min(p.size),
        })
    }

    /// A symbol's size at its new place: a container's whole length becomes the pruned
    /// one's; no size runs past the section's new end.
    fn new_size(&self, shndx: usize, old_value: u64, new_value: u64, size: u64) -> u64 {
        let size = match self.span_at(old_value) {
            Some(s) if s.old == old_value && s.old_len == size => s.new_len,
            _ => size,
        };
        match self.placed(shndx) {
            Some(p) => size.min((p.addr + p.size).saturating_sub(new_value)),
            None => size,
        }
    }
}

/// Packs the pruned containers from the first device section's start. A container no
/// wrapper or relocation points to (`pointed` lacks its address: code names it; nvcc's
/// device-link stub `fatbinData`, and cuSPARSE 12.6 keeps one at the start of its
/// `.nv_fatbin`) stays at its address; the others pack around it. An embedded section that
/// moves ([`super::embedded_move`]) moves whole: its containers shrunk, the data between
/// them copied as they are, each piece congruent to its old address modulo the section's
/// alignment.
fn compact(
    data: &[u8],
    layout: &Layout,
    cut: &Plan,
    scanned: &Scanned,
    pointed: &BTreeSet<u64>,
    replace: &mut Replace<'_>,
) -> Result<Compacted, PruneError> {
    let addr_of = |off: u64| addr_in(&layout.segments[cut.seg], off);
    let mut secs: Vec<_> = movable(scanned, &cut.run).collect();
    secs.sort_by_key(|d| d.file_offset);
    let mut c = Compacted {
        body: Vec::new(),
        moved: BTreeMap::new(),
        sections: Vec::new(),
        spans: Vec::new(),
    };
    for d in &secs {
        let align = layout
            .sections
            .get(d.section_index)
            .map_or(8, |s| s.sh_addralign.get(LE).max(1));
        let at = (cut.from + c.body.len() as u64).next_multiple_of(align);
        c.body.resize((at - cut.from) as usize, 0);
        for piece in pieces(d) {
            let old = d.file_offset + piece.off;
            let registered = d.embedded || pointed.contains(&addr_of(old));
            let here = cut.from + c.body.len() as u64;
            // Packed containers only move down, so a pinned one's place is still ahead.
            let to = match (d.embedded, registered) {
                (true, _) => here + (old + align - here % align) % align,
                (false, true) => here.next_multiple_of(8),
                (false, false) => old,
            };
            c.body.resize((to - cut.from) as usize, 0);
            let bytes = file_range(data, old, piece.len).unwrap_or_default();
            let new = match piece.container {
                Some(index) => {
                    if registered {
                        c.moved.insert(addr_of(old), addr_of(to));
                    }
                    replace(d, index, bytes)?
                }
                None => bytes.to_vec(),
            };
            c.spans.push(Span {
                old: addr_of(old),
                old_len: piece.len,
                new: addr_of(to),
                new_len: new.len() as u64,
                copied: piece.container.is_none(),
            });
            c.body.extend(new);
        }
        let end = cut.from + c.body.len() as u64;
        let old = layout.sections.get(d.section_index);
        let (old_addr, old_size) = old.map_or((0, 0), |s| (s.sh_addr.get(LE), s.sh_size.get(LE)));
        c.sections.push(Placed {
            index: d.section_index,
            offset: at,
            size: end - at,
            old_addr,
            old_size,
            addr: addr_of(at),
        });
    }
    // Sections come in file order, containers in each in order: sorted already, but the
    // lookup must not depend on it.
    c.spans.sort_by_key(|s| s.old);
    Ok(c)
}

/// A piece of a device section the cut places: a container (its index), or, in an
/// embedded section, the program's data between two containers.
struct Piece {
    off: u64,
    len: u64,
    container: Option<usize>,
}

/// The containers of `d`, and in an embedded section the data around them, in order.
fn pieces(d: &DeviceSection) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut pos = 0;
    for (index, &(off, len)) in d.spans.iter().enumerate() {
        if d.embedded && off > pos {
            out.push(Piece {
                off: pos,
                len: off - pos,
                container: None,
            });
        }
        out.push(Piece {
            off,
            len,
            container: Some(index),
        });
        pos = off + len;
    }
    if d.embedded && d.section_size > pos {
        out.push(Piece {
            off: pos,
            len: d.section_size - pos,
            container: None,
        });
    }
    out
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

/// The file after the cut, built in memory, and the (old) file ranges whose bytes changed
/// on purpose: pointers to moved containers.
struct Rebuilt<'a> {
    out: &'a mut [u8],
    patched: Vec<(u64, u64)>,
    shift: Shift,
}

impl Rebuilt<'_> {
    fn new_offset(&self, off: u64) -> u64 {
        self.shift.apply(off)
    }

    /// Writes `value` at old file offset `old`, recording it as a deliberate change.
    fn set_word(&mut self, old: usize, value: u64) {
        let at = self.new_offset(old as u64) as usize;
        if let Some(b) = self.out.get_mut(at..at + 8) {
            b.copy_from_slice(&value.to_le_bytes());
            self.patched.push((old as u64, 8));
        }
    }
}

/// A cut worked out (nothing written yet): where, the new device code, and the pointers to
/// redirect.
struct Prepared {
    cut: Plan,
    c: Compacted,
    sites: Vec<(u64, Site)>,
    /// With a tail: where the program header table (one entry longer) goes.
    phdrs: Option<u64>,
    shift: Shift,
}

/// Works out the cut of `data` (a linked ELF file whose headers are `layout` and whose device
/// sections are `scanned`), each container of the packed run becoming what `replace` makes of
/// it. `Ok(Err(_))`: the layout cannot be cut.
fn prepare(
    data: &[u8],
    layout: &Layout,
    scanned: &Scanned,
    replace: &mut Replace<'_>,
) -> Result<Result<Prepared, Refused>, PruneError> {
    let cut = match plan(data, layout, scanned) {
        Ok(cut) => cut,
        Err(r) => return Ok(Err(r)),
    };
    let addr_of = |off: u64| addr_in(&layout.segments[cut.seg], off);
    let containers: BTreeSet<u64> = movable(scanned, &cut.run)
        .flat_map(|d| {
            d.spans
                .iter()
                .map(move |&(off, _)| addr_of(d.file_offset + off))
        })
        .collect();
    // A moved embedded section: any address in it, up to its end, may be pointed at.
    let whole: Vec<(usize, u64, u64)> = movable(scanned, &cut.run)
        .filter(|d| d.embedded)
        .map(|d| {
            let lo = addr_of(d.file_offset);
            (d.section_index, lo, lo + d.section_size)
        })
        .collect();
    let in_whole = |a: u64| whole.iter().find(|&&(_, lo, hi)| (lo..=hi).contains(&a));
    let sites = pointer_sites(data, layout, &|a| {
        containers.contains(&a) || in_whole(a).is_some()
    });
    let pointed: BTreeSet<u64> = sites.iter().map(|s| s.0).collect();
    if pointed.is_empty() {
        return Ok(Err(Refused(format!(
            "nothing points at any of its {} fatbin containers (the program loads them itself)",
            containers.len()
        ))));
    }
    let mut c = compact(data, layout, &cut, scanned, &pointed, replace)?;
    for &t in &pointed {
        if let Some(&(shndx, _, _)) = in_whole(t).filter(|_| !c.moved.contains_key(&t)) {
            if let Some(new) = c.new_address(shndx, t) {
                c.moved.insert(t, new);
            }
        }
    }
    let phdr_len = std::mem::size_of::<Phdr>() as u64;
    let phdrs = cut
        .tail
        .map(|_| (cut.from + c.body.len() as u64).next_multiple_of(8));
    let kept_end = match phdrs {
        Some(at) => at + (layout.segments.len() as u64 + 1) * phdr_len,
        None => cut.from + c.body.len() as u64,
    };
    let freed = cut.resume.saturating_sub(kept_end);
    let by = freed / cut.align * cut.align;
    if by == 0 {
        return Ok(Err(Refused(format!(
            "the bytes it frees ({freed}) hold no whole alignment unit ({:#x} bytes)",
            cut.align
        ))));
    }
    let shift = Shift {
        resume: cut.resume,
        by,
    };
    Ok(Ok(Prepared {
        cut,
        c,
        sites,
        phdrs,
        shift,
    }))
}

/// Writes the new headers into the cut file `r` and points every pointer and symbol at
/// the containers' new places.
fn finish_cut(
    layout: &Layout,
    p: &Prepared,
    r: &mut Rebuilt<'_>,
    bad: &dyn Fn(String) -> PruneError,
) -> Result<(), PruneError> {
    let new = cut_headers(layout, &p.cut, &p.c, p.phdrs, p.shift);
    new.write_into(r.out)
        .map_err(|e| bad(format!("the cut file's headers do not fit: {e}")))?;
    let redirected = redirect(&p.sites, &p.c.moved, r);
    if redirected < p.c.moved.len() {
        return Err(bad(format!(
            "redirected the pointers of {redirected} of {} moved containers",
            p.c.moved.len()
        )));
    }
    move_symbols(layout, &p.c, r);
    Ok(())
}

/// Prunes `data` (a linked ELF file whose headers are `layout` and whose device sections
/// are `scanned`) into `tmp`, cutting the freed bytes out of the file. `Ok(Err(_))`: the
/// layout cannot be cut (nothing is written and `report` is untouched).
#[allow(clippy::too_many_arguments)]
pub(super) fn prune_cut(
    input: &Path,
    data: &[u8],
    layout: &Layout,
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<Result<(), Refused>, PruneError> {
    let mut trial = PruneReport::default();
    // Whatever loads a pinned container (code that names it), it may register it through
    // cudart: each is pruned as a registered module (never emptied). A container of the
    // program's own data is pruned as it is in place: emptied where none of the GPUs runs it.
    let mut prune = |d: &DeviceSection, index: usize, _: &[u8]| {
        let module = format!("{}#{index}", d.origin);
        prune_container(&module, &d.containers[index], sel, !d.embedded, &mut trial)
    };
    let p = match prepare(data, layout, scanned, &mut prune)? {
        Ok(p) => p,
        Err(r) => return Ok(Err(r)),
    };
    let (cut, c, shift) = (&p.cut, &p.c, p.shift);
    let mut out = Vec::with_capacity(data.len() - shift.by as usize);
    out.extend_from_slice(&data[..cut.from as usize]);
    out.extend_from_slice(&c.body);
    out.resize((cut.resume - shift.by) as usize, 0);
    out.extend_from_slice(&data[cut.resume as usize..]);
    let mut r = Rebuilt {
        out: &mut out,
        patched: Vec::new(),
        shift,
    };
    let bad = |m: String| PruneError::Cut {
        path: input.to_path_buf(),
        message: m,
    };
    finish_cut(layout, &p, &mut r, &bad)?;
    // Fatbins embedded in the program's data stay where its code expects them, and so do
    // device sections before the packed run.
    let embedded: Vec<&DeviceSection> = scanned
        .sections
        .iter()
        .filter(|d| !cut.run.contains(&d.section_index))
        .collect();
    for d in &embedded {
        r.patched
            .extend(d.spans.iter().map(|&(off, len)| (d.file_offset + off, len)));
    }
    let at = move |o: u64| shift.apply(o);
    let zeroed = super::elf_inplace::prune_in_place(
        input,
        r.out,
        embedded.iter().copied(),
        &at,
        sel,
        &mut trial,
    )?;
    let containers = scanned
        .sections
        .iter()
        .map(|d| d.spans.len())
        .sum::<usize>();
    verify(input, data, layout, &r, c, containers).map_err(&bad)?;
    copied_as_they_were(data, r.out, c, &layout.segments[cut.seg]).map_err(&bad)?;
    let path = tmp.path().to_path_buf();
    tmp.as_file_mut().write_all(&out).map_err(io_at(&path))?;
    super::elf_inplace::punch_holes(tmp.as_file(), &zeroed);
    let stays: u64 = zeroed.iter().map(|&(s, e)| (e - s) as u64).sum();
    *report = PruneReport {
        absent: std::mem::take(&mut report.absent),
        stay: cut.stay.clone(),
        stays,
        ..trial
    };
    Ok(Ok(()))
}

/// What [`InPlace::apply`] did to a file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CutDone {
    /// Containers replaced.
    pub containers: usize,
    /// The file's length before and after.
    pub before: u64,
    pub after: u64,
}

/// A cut of a linked file made in the file itself (`fatpack ld`'s own output, whose device
/// code its tail script placed last): worked out first, from the file's bytes as they are
/// ([`InPlace::plan`]), so that the caller can check what it read before anything is
/// written; then written, and the file truncated ([`InPlace::apply`]). Only a layout with
/// nothing after the device code in its segment is cut this way: what follows it in the
/// file (symbols, debug info, section headers) moves down, nothing that loads does.
pub(crate) struct InPlace {
    path: std::path::PathBuf,
    file: std::fs::File,
    map: memmap2::MmapMut,
    layout: Layout,
    scanned: Scanned,
    p: Prepared,
}

impl InPlace {
    /// Works out the cut of the file at `path`, each container of `.nv_fatbin` and
    /// `__nv_relfatbin` becoming what `replace` makes of it (given the section and the
    /// container's index in it). `Ok(Err(_))`: the file cannot be cut in place.
    pub(crate) fn plan(
        path: &Path,
        replace: &mut Replace<'_>,
    ) -> Result<Result<InPlace, Refused>, PruneError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_at(path))?;
        // SAFETY: the file is fatpack's own temp output, which no other process has open
        // (the real linker has exited); a shared writable mapping of it stays valid while
        // `map` lives, and the file is truncated only after the mapping is dropped.
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(io_at(path))?;
        let scanned = inputs::scan_at(path, &map, inputs::Depth::Registered)?;
        let Some(layout) = scanned.sections.iter().find_map(|d| d.elf.clone()) else {
            return Ok(Err(Refused("it has no device sections".into())));
        };
        let layout = (*layout).clone();
        let p = match prepare(&map, &layout, &scanned, replace)? {
            Ok(p) => p,
            Err(r) => return Ok(Err(r)),
        };
        if p.cut.tail.is_some() {
            return Ok(Err(Refused(
                "its device code is not the last thing its segment loads".into(),
            )));
        }
        Ok(Ok(InPlace {
            path: path.to_path_buf(),
            file,
            map,
            layout,
            scanned,
            p,
        }))
    }

    /// The file's bytes before the cut.
    pub(crate) fn data(&self) -> &[u8] {
        &self.map
    }

    /// Makes the cut: the new device code at the first device section's start, what
    /// followed the device code moved down, new headers, pointers and symbols; checks the
    /// result (its layout, then `check` on the cut file's bytes: what its device sections
    /// now hold); truncates the file.
    pub(crate) fn apply(
        mut self,
        check: &dyn Fn(&[u8]) -> Result<(), String>,
    ) -> Result<CutDone, PruneError> {
        let (from, resume, by) = (
            self.p.cut.from as usize,
            self.p.cut.resume as usize,
            self.p.shift.by as usize,
        );
        let before = self.map.len();
        let new_len = before - by;
        let map = &mut self.map[..];
        map.copy_within(resume.., resume - by);
        let body = &self.p.c.body;
        map[from..from + body.len()].copy_from_slice(body);
        map[from + body.len()..resume - by].fill(0);
        let mut r = Rebuilt {
            out: &mut map[..new_len],
            patched: Vec::new(),
            shift: self.p.shift,
        };
        let path = self.path.clone();
        let bad = |m: String| PruneError::Cut {
            path: path.clone(),
            message: m,
        };
        finish_cut(&self.layout, &self.p, &mut r, &bad)?;
        let containers = movable(&self.scanned, &self.p.cut.run)
            .map(|d| d.spans.len())
            .sum::<usize>();
        loads_in_place(r.out).map_err(&bad)?;
        check(r.out).map_err(&bad)?;
        drop(self.map);
        self.file
            .set_len(new_len as u64)
            .map_err(io_at(&self.path))?;
        Ok(CutDone {
            containers,
            before: before as u64,
            after: new_len as u64,
        })
    }
}

/// The headers of the cut file.
fn cut_headers(
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
fn move_symbols(layout: &Layout, c: &Compacted, r: &mut Rebuilt) {
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
enum Site {
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
fn pointer_sites(data: &[u8], layout: &Layout, wanted: &dyn Fn(u64) -> bool) -> Vec<(u64, Site)> {
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

fn wrapper_sites(
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
fn redirect(sites: &[(u64, Site)], moved: &BTreeMap<u64, u64>, r: &mut Rebuilt) -> usize {
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
fn file_of(layout: &Layout, addr: u64) -> Option<usize> {
    layout.segments.iter().find_map(|p| {
        let (va, fs) = (p.p_vaddr.get(LE), p.p_filesz.get(LE));
        (load(p) && addr >= va && addr + 8 <= va + fs)
            .then(|| (p.p_offset.get(LE) + (addr - va)) as usize)
    })
}

/// Checks the cut file before it is written: it parses; every loaded segment is congruent
/// to its address, inside the file and apart from the others; every loaded section other
/// than the device code is, through the new segments, the same bytes at the same address
/// (but for the redirected pointers); and it holds exactly the pruned containers.
fn verify(
    input: &Path,
    data: &[u8],
    old: &Layout,
    r: &Rebuilt,
    c: &Compacted,
    containers: usize,
) -> Result<(), String> {
    let new = loads_in_place(r.out)?;
    let mut patched = r.patched.clone();
    patched.sort_unstable();
    for (i, s) in old.sections.iter().enumerate() {
        if !old.allocated(i) || s.sh_type.get(LE) == elf::SHT_NOBITS || c.placed(i).is_some() {
            continue;
        }
        let (addr, off, size) = (s.sh_addr.get(LE), s.sh_offset.get(LE), s.sh_size.get(LE));
        let Some(at) = new.segments.iter().find_map(|p| {
            let va = p.p_vaddr.get(LE);
            (load(p) && addr >= va && addr + size <= va + p.p_filesz.get(LE))
                .then(|| p.p_offset.get(LE) + (addr - va))
        }) else {
            return Err(format!("section {i} is no longer loaded at its address"));
        };
        if at != new.sections[i].sh_offset.get(LE)
            || !same_bytes(data, r.out, off, at, size, &patched)
        {
            return Err(format!("section {i} changed in the cut file"));
        }
    }
    reads_back(input, r.out, containers)
}

/// The program's data that moved with an embedded section is, in the cut file `out`, the
/// same bytes as in `data` (`seg`: the segment both lie in, whose offsets the cut keeps).
fn copied_as_they_were(data: &[u8], out: &[u8], c: &Compacted, seg: &Phdr) -> Result<(), String> {
    let off = |addr: u64| addr - seg.p_vaddr.get(LE) + seg.p_offset.get(LE);
    for s in c.spans.iter().filter(|s| s.copied) {
        if file_range(data, off(s.old), s.old_len) != file_range(out, off(s.new), s.new_len) {
            return Err(format!(
                "the data at {:#x} did not move as it was (to {:#x})",
                s.old, s.new
            ));
        }
    }
    Ok(())
}

/// The cut file `out` parses, and every loaded segment is congruent to its address, inside
/// the file and apart from the others; returns its headers.
fn loads_in_place(out: &[u8]) -> Result<Layout, String> {
    let new = Layout::parse(out).map_err(|e| format!("the cut file does not parse: {e}"))?;
    let mut loads: Vec<&Phdr> = new.segments.iter().filter(|p| load(p)).collect();
    for p in &loads {
        let (off, va, al) = (
            p.p_offset.get(LE),
            p.p_vaddr.get(LE),
            p.p_align.get(LE).max(1),
        );
        if off % al != va % al || file_end(p) > out.len() as u64 {
            return Err(format!("segment at {va:#x} is misplaced in the cut file"));
        }
    }
    loads.sort_by_key(|p| p.p_vaddr.get(LE));
    for w in loads.windows(2) {
        if w[0].p_vaddr.get(LE) + w[0].p_memsz.get(LE) > w[1].p_vaddr.get(LE) {
            return Err("two loaded segments overlap in the cut file".into());
        }
    }
    Ok(new)
}

/// The cut file `out`, scanned at `depth`, holds `containers` containers.
fn reads_back(path: &Path, out: &[u8], containers: usize) -> Result<(), String> {
    let check = inputs::scan_bytes(path, out)
        .map_err(|e| format!("the cut file does not read back: {e}"))?;
    let got: usize = check.sections.iter().map(|d| d.spans.len()).sum();
    if got != containers {
        return Err(format!(
            "the cut file reads back {got} containers, not {containers}"
        ));
    }
    Ok(())
}

/// Whether `old[from..from + len]` and `new[to..to + len]` are equal outside the `patched`
/// ranges (old offsets, sorted).
fn same_bytes(
    old: &[u8],
    new: &[u8],
    from: u64,
    to: u64,
    len: u64,
    patched: &[(u64, u64)],
) -> bool {
    let (Some(a), Some(b)) = (file_range(old, from, len), file_range(new, to, len)) else {
        return false;
    };
    let mut pos = 0u64;
    let first = patched.partition_point(|&(p, l)| p + l <= from);
    for &(p, l) in patched[first..]
        .iter()
        .take_while(|&&(p, _)| p < from + len)
    {
        let s = p.saturating_sub(from).max(pos);
        if a[pos as usize..s as usize] != b[pos as usize..s as usize] {
            return false;
        }
        pos = pos.max((p + l - from).min(len));
    }
    a[pos as usize..] == b[pos as usize..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_skips_only_the_patched_ranges() {
        let old = b"abcdefghij".to_vec();
        let mut new = b"xxabcdefghij".to_vec();
        assert!(same_bytes(&old, &new, 0, 2, 10, &[]));
        new[5] = b'Z'; // old offset 3
        assert!(!same_bytes(&old, &new, 0, 2, 10, &[]));
        assert!(same_bytes(&old, &new, 0, 2, 10, &[(3, 1)]));
        assert!(!same_bytes(&old, &new, 0, 2, 10, &[(4, 2)]));
        assert!(same_bytes(&old, &new, 2, 4, 8, &[(0, 1), (3, 1), (20, 8)]));
    }
}
