//! Where a linked file is cut ([`plan`]): the run of device sections packed together, the
//! segment that holds them, what follows them (the tail) and the alignment every moved
//! segment keeps; or why the layout cannot be cut.

use std::collections::BTreeSet;

use object::elf;

use super::embedded_move::embedded_moves;
use super::{file_end, load, Refused};
use crate::elf::{Layout, Phdr, LE};
use crate::inputs::{DeviceSection, Scanned};

/// Where the file is cut: `[from, resume)` of the file is replaced by the compacted device
/// code and zeros, and everything from `resume` on moves down.
pub(super) struct Plan {
    /// Index of the loaded segment that holds the device sections.
    pub(super) seg: usize,
    /// File offset of the first device section: the compacted code starts here.
    pub(super) from: u64,
    /// File offset of what follows the device code: the tail's first section, or the
    /// segment's file end when it has no tail.
    pub(super) resume: u64,
    /// Address of the tail (what follows the device code in the segment), if any.
    pub(super) tail: Option<u64>,
    /// Every moved segment and section stays aligned: the shift is a multiple of this.
    pub(super) align: u64,
    /// The device sections packed together ([`last_run`]); the others are pruned in place.
    pub(super) run: Vec<usize>,
    /// The embedded sections that stay where they are, and why (for the report).
    pub(super) stay: Vec<(String, String)>,
}

/// The device sections the cut packs together (`run`, section indices).
pub(super) fn movable<'a>(
    scanned: &'a Scanned,
    run: &'a [usize],
) -> impl Iterator<Item = &'a DeviceSection> {
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
pub(super) fn last_run(
    layout: &Layout,
    scanned: &Scanned,
    can_move: &BTreeSet<usize>,
) -> Vec<usize> {
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

/// Decides where to cut `layout` (a linked ELF file whose device sections are `scanned`),
/// and which embedded sections stay where they are and why.
pub(super) fn plan(data: &[u8], layout: &Layout, scanned: &Scanned) -> Result<Plan, Refused> {
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
pub(super) fn moves_phdrs_off_the_first_segment(layout: &Layout, p: &Phdr) -> bool {
    let delta = |q: &Phdr| q.p_vaddr.get(LE).wrapping_sub(q.p_offset.get(LE));
    let loaded = layout.file_type() == elf::ET_EXEC
        || layout
            .segments
            .iter()
            .any(|q| q.p_type.get(LE) == elf::PT_PHDR);
    let first = layout.segments.iter().find(|q| load(q));
    loaded && first.is_some_and(|f| delta(f) != delta(p))
}
