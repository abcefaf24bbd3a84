//! Pruning a linked executable or shared library: the cut where the layout allows it (the
//! file really shrinks, [`crate::elf::cut`]), else each container pruned where it is
//! ([`crate::elf::in_place`]). Prune decides what becomes of each container; the ELF layer
//! changes the file and checks it.

use std::io::Write;
use std::path::Path;

use super::{io_at, prune_container, PruneError, PruneReport, Selection};
use crate::elf::cut::{self, Refused};
use crate::elf::in_place::{punch_holes, rewrite_containers};
use crate::elf::Layout;
use crate::inputs::{DeviceSection, Scanned};

/// Prune's answer for container `index` of `d`: pruned as a registered module (never
/// emptied) unless it is a fatbin of the program's own data, pruned as it is in place
/// (emptied where none of the GPUs runs it). Whatever loads a pinned container (code that
/// names it), it may register it through cudart.
pub(super) fn pruner<'a>(
    sel: &'a Selection,
    report: &'a mut PruneReport,
) -> impl FnMut(&DeviceSection, usize, &[u8]) -> Result<Vec<u8>, PruneError> + 'a {
    move |d: &DeviceSection, index: usize, _: &[u8]| {
        let module = format!("{}#{index}", d.origin);
        prune_container(&module, &d.containers[index], sel, !d.embedded, report)
    }
}

/// Prunes `data` (a linked ELF file whose headers are `layout` and whose device sections
/// are `scanned`) into `tmp`, cutting the freed bytes out of the file. `Ok(Err(_))`: the
/// layout cannot be cut (nothing is written and `report` is untouched).
pub(super) fn prune_cut(
    input: &Path,
    (data, layout): (&[u8], &Layout),
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<Result<(), Refused>, PruneError> {
    let mut trial = PruneReport::default();
    let mut prune = pruner(sel, &mut trial);
    let done = match cut::copy(input, data, layout, scanned, &mut prune)? {
        Ok(done) => done,
        Err(r) => return Ok(Err(r)),
    };
    drop(prune);
    let path = tmp.path().to_path_buf();
    tmp.as_file_mut()
        .write_all(&done.bytes)
        .map_err(io_at(&path))?;
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

/// Prunes `data` into `tmp` with each container rewritten at its own offset (the wrappers'
/// pointers to it stay valid) and the bytes it frees zeroed: for a layout the cut refuses.
pub(super) fn prune_linked(
    input: &Path,
    data: &[u8],
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<(), PruneError> {
    let mut bytes = data.to_vec();
    let mut prune = pruner(sel, report);
    let zeroed = rewrite_containers(
        input,
        data,
        &mut bytes,
        scanned.sections.iter(),
        &|o| o,
        &mut prune,
    )?;
    drop(prune);
    report.stays = zeroed.iter().map(|&(s, e)| (e - s) as u64).sum();
    let path = tmp.path().to_path_buf();
    tmp.as_file_mut().write_all(&bytes).map_err(io_at(&path))?;
    punch_holes(tmp.as_file(), &zeroed);
    Ok(())
}
