//! Pruning a linked executable or shared library: the cut where the layout allows it (the
//! file really shrinks, [`crate::transform::cut`]), else each container pruned where it is
//! ([`crate::transform::in_place`]). Prune decides what becomes of each container; the ELF layer
//! changes the file and checks it.

use std::path::Path;

use super::{io_at, prune_container, PruneError, PruneReport, Selection};
use crate::elf::Layout;
use crate::fatbin;
use crate::inputs::{DeviceSection, Scanned};
use crate::transform::cut::{self, Refused};
use crate::transform::in_place::{punch_holes, release_shared, rewrite_containers};

/// Prune's answer for container `index` of `d` (whose bytes are given): pruned as a
/// registered module (never emptied) unless it is a fatbin of the program's own data,
/// pruned as it is in place (emptied where none of the GPUs runs it). Whatever loads a
/// pinned container (code that names it), it may register it through cudart. A section
/// located without its containers parsed ([`crate::inputs::Depth::Located`]) has each parsed
/// here, one at a time, and its pages let go of (`release`) once pruned: the memory a
/// prune takes follows the largest container, not the device code.
pub(super) fn pruner<'a>(
    sel: &'a Selection,
    report: &'a mut PruneReport,
    release: &'a dyn Fn(u64, u64),
) -> impl FnMut(&DeviceSection, usize, &[u8]) -> Result<Vec<u8>, PruneError> + 'a {
    move |d: &DeviceSection, index: usize, bytes: &[u8]| {
        let module = format!("{}#{index}", d.origin);
        let parsed;
        let fb = match d.containers.get(index) {
            Some(fb) => fb,
            None => {
                let at = d.spans.get(index).map_or(0, |s| s.0) as usize;
                parsed = fatbin::parse_one(bytes, at)
                    .map_err(|source| PruneError::Fatbin {
                        path: d.file.clone(),
                        source,
                    })?
                    .0;
                &parsed
            }
        };
        let new = prune_container(&module, fb, sel, !d.embedded, report)?;
        if let Some(&(off, len)) = d.spans.get(index) {
            release(d.file_offset + off, len);
        }
        Ok(new)
    }
}

/// The input of a linked-file prune: its bytes (mapped) and how to let go of its pages
/// once read ([`crate::inputs::let_go`]; nothing for bytes in memory).
pub(super) struct Input<'a> {
    pub path: &'a Path,
    pub data: &'a [u8],
    pub release: &'a dyn Fn(u64, u64),
}

/// Prunes `input` (a linked ELF file whose headers are `layout` and whose device sections
/// are `scanned`) into `tmp`, cutting the freed bytes out of the file. `Ok(Err(_))`: the
/// layout cannot be cut (`report` is untouched).
pub(super) fn prune_cut(
    input: &Input<'_>,
    layout: &Layout,
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<Result<(), Refused>, PruneError> {
    let mut trial = PruneReport::default();
    let mut prune = pruner(sel, &mut trial, input.release);
    let path = tmp.path().to_path_buf();
    let into = cut::NewFile {
        file: tmp.as_file(),
        path: &path,
        release: input.release,
    };
    let done = match cut::copy(input.path, input.data, layout, scanned, &mut prune, &into)? {
        Ok(done) => done,
        Err(r) => {
            tmp.as_file().set_len(0).map_err(io_at(&path))?;
            return Ok(Err(r));
        }
    };
    drop(prune);
    punch_holes(tmp.as_file(), &done.zeroed);
    let stays: u64 = done.zeroed.iter().map(|&(s, e)| (e - s) as u64).sum();
    *report = PruneReport {
        absent: std::mem::take(&mut report.absent),
        stay: done.stay,
        stays,
        ..trial
    };
    Ok(Ok(()))
}

/// Prunes `input` into `tmp` with each container rewritten at its own offset (the
/// wrappers' pointers to it stay valid) and the bytes it frees zeroed: for a layout the cut
/// refuses. The file is copied through `tmp` a step at a time and rewritten in a mapping of
/// it, never held in memory.
pub(super) fn prune_linked(
    input: &Input<'_>,
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<(), PruneError> {
    let path = tmp.path().to_path_buf();
    let file = tmp.as_file();
    file.set_len(0).map_err(io_at(&path))?;
    let into = cut::NewFile {
        file,
        path: &path,
        release: input.release,
    };
    into.copy_through(input.data, 0..input.data.len() as u64, 0)
        .map_err(io_at(&path))?;
    if input.data.is_empty() {
        return Ok(());
    }
    // SAFETY: `tmp` is this command's own temp file, open only here and not resized while
    // the mapping lives; the mapping is dropped before the holes are punched.
    let mut out = unsafe { memmap2::MmapMut::map_mut(file) }.map_err(io_at(&path))?;
    let mut prune = pruner(sel, report, input.release);
    let release_out = release_shared(&out);
    let zeroed = rewrite_containers(
        input.path,
        input.data,
        &mut out,
        scanned.sections.iter(),
        &|o| o,
        &mut prune,
        &release_out,
    )?;
    drop(prune);
    out.flush().map_err(io_at(&path))?;
    drop(out);
    report.stays = zeroed.iter().map(|&(s, e)| (e - s) as u64).sum();
    punch_holes(file, &zeroed);
    Ok(())
}
