//! Pruning a linked ELF file: each container is rewritten at its own offset (the wrappers'
//! pointers to it stay valid), and the bytes it frees are zeroed.

use std::fs::File;
use std::io::Write;

use std::path::Path;

use super::{io_at, prune_container, PruneError, PruneReport, Selection};
use crate::inputs::{DeviceSection, Scanned};

pub(super) fn prune_linked(
    input: &Path,
    data: &[u8],
    scanned: &Scanned,
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    report: &mut PruneReport,
) -> Result<(), PruneError> {
    let mut bytes = data.to_vec();
    let zeroed = prune_in_place(
        input,
        &mut bytes,
        scanned.sections.iter(),
        &|o| o,
        sel,
        report,
    )?;
    report.stays = zeroed.iter().map(|&(s, e)| (e - s) as u64).sum();
    let path = tmp.path().to_path_buf();
    tmp.as_file_mut().write_all(&bytes).map_err(io_at(&path))?;
    punch_holes(tmp.as_file(), &zeroed);
    Ok(())
}

/// Rewrites each container of `sections` at its own place in `bytes` (where file offset
/// `o` of the input now lies at `at(o)`) and zeroes what it no longer needs; returns the
/// zeroed ranges (offsets in `bytes`).
pub(super) fn prune_in_place<'a>(
    input: &Path,
    bytes: &mut [u8],
    sections: impl Iterator<Item = &'a DeviceSection>,
    at: &dyn Fn(u64) -> u64,
    sel: &Selection,
    report: &mut PruneReport,
) -> Result<Vec<(usize, usize)>, PruneError> {
    let mut zeroed = Vec::new();
    for sec in sections {
        for (index, (fb, &(off, len))) in sec.containers.iter().zip(&sec.spans).enumerate() {
            let new = prune_container(
                &format!("{}#{index}", sec.origin),
                fb,
                sel,
                !sec.embedded,
                report,
            )?;
            if new.len() as u64 > len {
                return Err(PruneError::Grew(input.to_path_buf()));
            }
            let start = at(sec.file_offset + off) as usize;
            let end = start + len as usize;
            bytes[start..start + new.len()].copy_from_slice(&new);
            bytes[start + new.len()..end].fill(0);
            zeroed.push((start + new.len(), end));
        }
    }
    Ok(zeroed)
}

/// Give the zeroed ranges back to the filesystem where it supports holes (best effort: the
/// bytes read as zeros either way).
pub(super) fn punch_holes(file: &File, ranges: &[(usize, usize)]) {
    use std::os::unix::io::AsRawFd;
    const PAGE: usize = 4096;
    for &(s, e) in ranges {
        let (s, e) = (s.div_ceil(PAGE) * PAGE, e / PAGE * PAGE);
        if e > s {
            // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
            // SAFETY: plain syscall on our own open file descriptor.
            unsafe {
                libc::fallocate(
                    file.as_raw_fd(),
                    0x02 | 0x01,
                    s as libc::off_t,
                    (e - s) as libc::off_t,
                );
            }
        }
    }
}
