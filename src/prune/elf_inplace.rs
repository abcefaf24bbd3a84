//! Pruning a linked ELF file: each container is rewritten at its own offset (the wrappers'
//! pointers to it stay valid), and the bytes it frees are zeroed.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;

use anyhow::{bail, Result};

use super::{prune_container, PruneReport};
use crate::arch::Target;
use crate::inputs::Scanned;

pub(super) fn prune_linked(
    data: &[u8],
    scanned: &Scanned,
    keep: &BTreeSet<Target>,
    out: &mut File,
    report: &mut PruneReport,
) -> Result<()> {
    let mut bytes = data.to_vec();
    let mut zeroed = Vec::new();
    for sec in &scanned.sections {
        for (fb, &(off, len)) in sec.containers.iter().zip(&sec.spans) {
            let new = prune_container(fb, keep, report);
            if new.len() as u64 > len {
                bail!("internal: pruned container grew");
            }
            let start = (sec.file_offset + off) as usize;
            let end = start + len as usize;
            bytes[start..start + new.len()].copy_from_slice(&new);
            bytes[start + new.len()..end].fill(0);
            zeroed.push((start + new.len(), end));
        }
    }
    out.write_all(&bytes)?;
    punch_holes(out, &zeroed);
    Ok(())
}

/// Give the zeroed ranges back to the filesystem where it supports holes (best effort: the
/// bytes read as zeros either way).
fn punch_holes(file: &File, ranges: &[(usize, usize)]) {
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
