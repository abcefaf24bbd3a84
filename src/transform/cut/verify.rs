//! The checks a cut file passes before it is written or the file truncated: it loads as
//! the old one did, its other bytes are the old bytes, and it reads back.

use std::path::Path;

use object::elf;

use super::compact::Compacted;
use super::{file_end, load, Rebuilt};
use crate::elf::{file_range, Layout, Phdr, LE};
use crate::inputs;

/// How to let go of the input's and the cut file's pages once a range is compared (a
/// program's data sections can be gigabytes): `(offset, len)` of each.
pub(super) type Releases<'a> = (&'a dyn Fn(u64, u64), &'a dyn Fn(u64, u64));

/// Checks the cut file before it is written: it parses; every loaded segment is congruent
/// to its address, inside the file and apart from the others; every loaded section other
/// than the device code is, through the new segments, the same bytes at the same address
/// (but for the redirected pointers); and it holds exactly the pruned containers.
/// `release`: [`Releases`].
pub(super) fn verify(
    input: &Path,
    data: &[u8],
    old: &Layout,
    r: &Rebuilt,
    c: &Compacted,
    containers: usize,
    (release_in, release_out): Releases<'_>,
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
        release_in(off, size);
        release_out(at, size);
    }
    reads_back(input, r.out, containers)
}

/// The program's data that moved with an embedded section is, in the cut file `out`, the
/// same bytes as in `data` (`seg`: the segment both lie in, whose offsets the cut keeps).
pub(super) fn copied_as_they_were(
    data: &[u8],
    out: &[u8],
    c: &Compacted,
    seg: &Phdr,
) -> Result<(), String> {
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
pub(super) fn loads_in_place(out: &[u8]) -> Result<Layout, String> {
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
pub(super) fn reads_back(path: &Path, out: &[u8], containers: usize) -> Result<(), String> {
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
pub(super) fn same_bytes(
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
