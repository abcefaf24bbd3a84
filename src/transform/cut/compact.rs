//! The device code after the cut ([`compact`]): each container as the caller's
//! [`Replace`] makes it, packed from the first device section's start, and where every
//! container and section went.

use std::collections::{BTreeMap, BTreeSet};

use super::plan::{movable, Plan};
use super::{addr_in, Replace};
use crate::elf::{file_range, Layout, LE};
use crate::inputs::{DeviceSection, Scanned};

/// The pruned device code, packed from the first device section's start.
pub(super) struct Compacted {
    /// The new bytes from `Plan::from`.
    pub(super) body: Vec<u8>,
    /// Old address -> new address of every container.
    pub(super) moved: BTreeMap<u64, u64>,
    /// Every device section, in file order.
    pub(super) sections: Vec<Placed>,
    /// Every container, moved or pinned, and the data between the containers of a moved
    /// embedded section, in address order.
    pub(super) spans: Vec<Span>,
}

/// A device section after the cut.
pub(super) struct Placed {
    pub(super) index: usize,
    /// New file offset and size.
    pub(super) offset: u64,
    pub(super) size: u64,
    /// Old address and size; new address.
    pub(super) old_addr: u64,
    pub(super) old_size: u64,
    pub(super) addr: u64,
}

/// A container (or, in an embedded section, the data between two) before and after the
/// cut: address and length.
#[derive(Clone, Copy)]
pub(super) struct Span {
    pub(super) old: u64,
    pub(super) old_len: u64,
    pub(super) new: u64,
    pub(super) new_len: u64,
    /// The program's data, copied as it is (the cut's check compares it).
    pub(super) copied: bool,
}

impl Compacted {
    pub(super) fn placed(&self, shndx: usize) -> Option<&Placed> {
        self.sections.iter().find(|p| p.index == shndx)
    }

    /// The container whose old bytes hold `addr`, if any.
    pub(super) fn span_at(&self, addr: u64) -> Option<Span> {
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
    pub(super) fn new_address(&self, shndx: usize, value: u64) -> Option<u64> {
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
    pub(super) fn new_size(&self, shndx: usize, old_value: u64, new_value: u64, size: u64) -> u64 {
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
pub(super) fn compact<E>(
    data: &[u8],
    layout: &Layout,
    cut: &Plan,
    scanned: &Scanned,
    pointed: &BTreeSet<u64>,
    replace: &mut Replace<'_, E>,
) -> Result<Compacted, E> {
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
pub(super) struct Piece {
    pub(super) off: u64,
    pub(super) len: u64,
    pub(super) container: Option<usize>,
}

/// The containers of `d`, and in an embedded section the data around them, in order.
pub(super) fn pieces(d: &DeviceSection) -> Vec<Piece> {
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
