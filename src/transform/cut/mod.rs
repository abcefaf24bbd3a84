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
//!
//! Every cut is planned over the file as parsed ([`plan`], [`compact`]), made in memory or
//! in the file itself, and checked ([`verify`]) before it is written or the file truncated.
//! What becomes of each container is the caller's ([`Replace`]): prune's pruned container,
//! the link's stub. Two entry points: [`copy`] (a new file, `fatpack prune`) and
//! [`CutInFile`] (the file itself, `fatpack ld`'s direct route).

mod compact;
mod embedded_move;
mod headers;
mod plan;
mod verify;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use object::elf;
use object::{LittleEndian, U64};

use super::error::TransformError;
use super::in_place::rewrite_containers;
use crate::elf::OpenElf;
use crate::elf::{Layout, Phdr, LE};
use crate::error::io_at;
use crate::inputs::{self, DeviceSection, Scanned};
use compact::{compact, Compacted};
use headers::{cut_headers, move_symbols, pointer_sites, redirect, Site};
use plan::{movable, plan, Plan};
use verify::{copied_as_they_were, loads_in_place, verify};

/// Why a layout is not cut (the file is pruned in place instead).
#[derive(Debug)]
pub struct Refused(pub String);

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

pub use super::Replace;

/// The caller's check of a cut file before it is written: its bytes and the headers just
/// parsed from them; an error says what is wrong.
pub type CheckCut<'a> = dyn Fn(&[u8], &Layout) -> Result<(), String> + 'a;

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
fn prepare<E>(
    data: &[u8],
    layout: &Layout,
    scanned: &Scanned,
    replace: &mut Replace<'_, E>,
) -> Result<Result<Prepared, Refused>, E> {
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
    bad: &dyn Fn(String) -> TransformError,
) -> Result<(), TransformError> {
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

/// A cut made into a new file ([`copy`]).
pub struct Copied {
    /// Ranges of the new file zeroed where containers that stay in place shrank (holes may
    /// be punched there: [`super::in_place::punch_holes`]).
    pub zeroed: Vec<(usize, usize)>,
    /// The embedded sections that stay where they are, and why.
    pub stay: Vec<(String, String)>,
}

/// Where a cut is written: the new file (empty, open for reading and writing; named
/// `path` in errors), and how to let go of the input's pages once they are copied
/// ([`inputs::let_go`] for a mapped input: a copy of a file with a gigabyte of debug info
/// then holds a few megabytes of it resident at a time).
pub struct NewFile<'a> {
    pub file: &'a std::fs::File,
    pub path: &'a Path,
    pub release: &'a dyn Fn(u64, u64),
}

/// Cuts `data` (the linked ELF file at `path`, whose headers are `layout` and whose device
/// sections are `scanned`) into the new file `into`, each container becoming what
/// `replace` makes of it: those of the packed run move down together, the others (fatbins
/// in the program's own data that cannot move, sections before the run) are rewritten where
/// they are. The bytes that do not change are copied through the file, never held in
/// memory; the new file is mapped for the pointers, headers and symbols the cut changes,
/// and checked before this returns. `Ok(Err(_))`: the layout cannot be cut (`replace` may
/// have been called; nothing is written).
pub fn copy<E: From<TransformError>>(
    path: &Path,
    data: &[u8],
    layout: &Layout,
    scanned: &Scanned,
    replace: &mut Replace<'_, E>,
    into: &NewFile<'_>,
) -> Result<Result<Copied, Refused>, E> {
    let p = match prepare(data, layout, scanned, replace)? {
        Ok(p) => p,
        Err(r) => return Ok(Err(r)),
    };
    let (cut, c, shift) = (&p.cut, &p.c, p.shift);
    let io = |e| E::from(TransformError::from(io_at(into.path)(e)));
    let len = data.len() as u64 - shift.by;
    into.file.set_len(len).map_err(io)?;
    into.copy_through(data, 0..cut.from, 0).map_err(io)?;
    std::os::unix::fs::FileExt::write_all_at(into.file, &c.body, cut.from).map_err(io)?;
    // Between the new device code and `resume - by`: zeros, as the file was made.
    into.copy_through(data, cut.resume..data.len() as u64, cut.resume - shift.by)
        .map_err(io)?;
    // SAFETY: the new file is this command's own temp file, open only here; it is not
    // resized while the mapping lives, and the mapping is dropped before this returns.
    let mut map = unsafe { memmap2::MmapMut::map_mut(into.file) }.map_err(io)?;
    let release_out = super::in_place::release_shared(&map);
    let mut r = Rebuilt {
        out: &mut map,
        patched: Vec::new(),
        shift,
    };
    let bad = |m: String| TransformError::Unsound {
        path: path.to_path_buf(),
        message: m,
    };
    finish_cut(layout, &p, &mut r, &bad)?;
    // Fatbins embedded in the program's data stay where its code expects them, and so do
    // device sections before the packed run.
    let pinned: Vec<&DeviceSection> = scanned
        .sections
        .iter()
        .filter(|d| !cut.run.contains(&d.section_index))
        .collect();
    for d in &pinned {
        r.patched
            .extend(d.spans.iter().map(|&(off, len)| (d.file_offset + off, len)));
    }
    let at = move |o: u64| shift.apply(o);
    let zeroed = rewrite_containers(
        path,
        data,
        r.out,
        pinned.iter().copied(),
        &at,
        replace,
        &release_out,
    )?;
    let containers = scanned
        .sections
        .iter()
        .map(|d| d.spans.len())
        .sum::<usize>();
    let release = (into.release, &release_out as &dyn Fn(u64, u64));
    verify(path, data, layout, &r, c, containers, release).map_err(|m| E::from(bad(m)))?;
    copied_as_they_were(data, r.out, c, &layout.segments[cut.seg]).map_err(|m| E::from(bad(m)))?;
    map.flush().map_err(io)?;
    Ok(Ok(Copied {
        zeroed,
        stay: p.cut.stay,
    }))
}

impl NewFile<'_> {
    /// Writes `data[range]` into the new file at `to`, a step at a time, letting go of each
    /// step's input pages once written ([`NewFile::release`]).
    pub fn copy_through(
        &self,
        data: &[u8],
        range: std::ops::Range<u64>,
        to: u64,
    ) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut at = range.start;
        while at < range.end {
            let n = (range.end - at).min(inputs::RELEASE_STEP);
            self.file.write_all_at(
                &data[at as usize..(at + n) as usize],
                to + (at - range.start),
            )?;
            (self.release)(at, n);
            at += n;
        }
        Ok(())
    }
}

/// From how many bytes of device code cut out [`move_down`] writes through the file.
const WRITE_DOWN_FROM: usize = 1 << 20;

/// At most this many bytes per write of [`move_down`].
const WRITE_DOWN_CHUNK: usize = 8 << 20;

/// Moves the bytes of `file` (mapped shared as `map`) from `resume` to its end down by `by`:
/// what follows the device code (symbols, and in a build with `-g` gigabytes of debug info).
/// Where `by` is large, each chunk is written through the file from the mapping: the kernel
/// copies into the page cache without a fault per page of the destination, 2.3× faster than
/// a copy within the mapping for a 500 MiB tail on the dev machine (0.27 → 0.12 s). No chunk
/// is longer than `by`, so none overlaps the place it is written to; in ascending order, no
/// chunk is overwritten before it is read.
fn move_down(
    file: &std::fs::File,
    map: &mut memmap2::MmapMut,
    resume: usize,
    by: usize,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    if by < WRITE_DOWN_FROM {
        map.copy_within(resume.., resume - by);
        return Ok(());
    }
    let chunk = by.min(WRITE_DOWN_CHUNK);
    let mut at = resume;
    while at < map.len() {
        let n = chunk.min(map.len() - at);
        file.write_all_at(&map[at..at + n], (at - by) as u64)?;
        at += n;
    }
    Ok(())
}

/// What [`CutInFile::apply`] did to a file, and the file, open, with its new headers.
pub struct CutDone {
    /// Containers replaced.
    pub containers: usize,
    /// The file's length before and after.
    pub before: u64,
    pub after: u64,
    pub file: OpenElf,
}

/// A cut of a linked file made in the file itself (`fatpack ld`'s own output, whose device
/// code its tail script placed last): worked out first, from the file's bytes as they are
/// ([`CutInFile::plan`]), so that the caller can check what it read before anything is
/// written; then written, and the file truncated ([`CutInFile::apply`]). Only a layout with
/// nothing after the device code in its segment is cut this way: what follows it in the
/// file (symbols, debug info, section headers) moves down, nothing that loads does.
pub struct CutInFile {
    path: PathBuf,
    file: std::fs::File,
    map: memmap2::MmapMut,
    layout: Layout,
    scanned: Scanned,
    p: Prepared,
}

impl CutInFile {
    /// Works out the cut of the file at `path`, each container of `.nv_fatbin` and
    /// `__nv_relfatbin` becoming what `replace` makes of it (given the section and the
    /// container's index in it). `Ok(Err(_))`: the file cannot be cut in place.
    pub fn plan<E: From<TransformError>>(
        path: &Path,
        replace: &mut Replace<'_, E>,
    ) -> Result<Result<CutInFile, Refused>, E> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| TransformError::from(io_at(path)(e)))?;
        // SAFETY: the file is fatpack's own temp output, which no other process has open
        // (the real linker has exited); a shared writable mapping of it stays valid while
        // `map` lives, and the file is truncated only after the mapping is dropped.
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }
            .map_err(|e| TransformError::from(io_at(path)(e)))?;
        let scanned =
            inputs::scan_at(path, &map, inputs::Depth::Registered).map_err(TransformError::from)?;
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
        Ok(Ok(CutInFile {
            path: path.to_path_buf(),
            file,
            map,
            layout,
            scanned,
            p,
        }))
    }

    /// The file's bytes before the cut.
    pub fn data(&self) -> &[u8] {
        &self.map
    }

    /// Makes the cut: the new device code at the first device section's start, what
    /// followed the device code moved down, new headers, pointers and symbols; checks the
    /// result (its layout, then `check` on the cut file's bytes and the headers just parsed:
    /// what its device sections now hold); truncates the file.
    pub fn apply(mut self, check: &CheckCut<'_>) -> Result<CutDone, TransformError> {
        let (from, resume, by) = (
            self.p.cut.from as usize,
            self.p.cut.resume as usize,
            self.p.shift.by as usize,
        );
        let before = self.map.len();
        let new_len = before - by;
        move_down(&self.file, &mut self.map, resume, by).map_err(io_at(&self.path))?;
        let map = &mut self.map[..];
        let body = &self.p.c.body;
        map[from..from + body.len()].copy_from_slice(body);
        map[from + body.len()..resume - by].fill(0);
        let mut r = Rebuilt {
            out: &mut map[..new_len],
            patched: Vec::new(),
            shift: self.p.shift,
        };
        let path = self.path.clone();
        let bad = |m: String| TransformError::Unsound {
            path: path.clone(),
            message: m,
        };
        finish_cut(&self.layout, &self.p, &mut r, &bad)?;
        let containers = movable(&self.scanned, &self.p.cut.run)
            .map(|d| d.spans.len())
            .sum::<usize>();
        // The check's parse of the new headers is also what the steps after the cut use.
        let new = loads_in_place(r.out).map_err(&bad)?;
        check(r.out, &new).map_err(&bad)?;
        drop(self.map);
        // The old tail's bytes stay until the store is written over them (or the file is
        // settled): cutting them here and growing the file again costs more than the write.
        let mut file = OpenElf::with(&self.path, self.file, new)?;
        file.stale_from = Some(new_len as u64);
        Ok(CutDone {
            containers,
            before: before as u64,
            after: new_len as u64,
            file,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`move_down`] moves the tail as a copy within the bytes would, through the mapping
    /// and through the file alike: shifts under and over [`WRITE_DOWN_FROM`] and
    /// [`WRITE_DOWN_CHUNK`], tails longer than the shift (chunks that overlap what was
    /// moved before them) and shorter.
    #[test]
    fn move_down_is_a_copy_within() {
        let mib = 1 << 20;
        for (len, resume, by) in [
            (64 << 10, 40 << 10, 4096),
            (20 * mib, 3 * mib, 3 * mib / 2),
            (30 * mib, 10 * mib, 9 * mib),
            (12 * mib + 12345, 11 * mib, 2 * mib + 7),
        ] {
            let bytes: Vec<u8> = (0..len)
                .map(|i: usize| (i % 251) as u8 ^ (i >> 16) as u8)
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f");
            std::fs::write(&path, &bytes).unwrap();
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            // SAFETY: the test's own temp file, which nothing else has open.
            let mut map = unsafe { memmap2::MmapMut::map_mut(&file) }.unwrap();
            move_down(&file, &mut map, resume, by).unwrap();
            let mut want = bytes.clone();
            want.copy_within(resume.., resume - by);
            assert!(map[..] == want[..], "len {len}, resume {resume}, by {by}");
            drop(map);
            assert!(std::fs::read(&path).unwrap() == want, "len {len}: the file");
        }
    }
}
