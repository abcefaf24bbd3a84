//! Rewriting containers where they are in a linked ELF file: each becomes what the caller
//! makes of it at its own offset (the pointers to it stay valid), and the bytes it frees
//! are zeroed. What prune does to a file the cut refuses, and to the fatbins the cut leaves
//! in the program's own data.

use std::fs::File;
use std::path::Path;

use super::cut::Replace;
use super::error::TransformError;
use crate::inputs::DeviceSection;

/// Rewrites each container of `sections` (as `data`, the input, holds it) at its own place
/// in `out` (where file offset `o` of the input now lies at `at(o)`) and zeroes what it no
/// longer needs; returns the zeroed ranges (offsets in `out`).
pub fn rewrite_containers<'a, E: From<TransformError>>(
    path: &Path,
    data: &[u8],
    out: &mut [u8],
    sections: impl Iterator<Item = &'a DeviceSection>,
    at: &dyn Fn(u64) -> u64,
    replace: &mut Replace<'_, E>,
) -> Result<Vec<(usize, usize)>, E> {
    let mut zeroed = Vec::new();
    for sec in sections {
        for (index, &(off, len)) in sec.spans.iter().enumerate() {
            let old = super::file_range(data, sec.file_offset + off, len).unwrap_or_default();
            let new = replace(sec, index, old)?;
            if new.len() as u64 > len {
                return Err(TransformError::Grew(path.to_path_buf()).into());
            }
            let start = at(sec.file_offset + off) as usize;
            let end = start + len as usize;
            out[start..start + new.len()].copy_from_slice(&new);
            out[start + new.len()..end].fill(0);
            zeroed.push((start + new.len(), end));
        }
    }
    Ok(zeroed)
}

/// Gives the zeroed ranges back to the filesystem where it supports holes (best effort: the
/// bytes read as zeros either way).
pub fn punch_holes(file: &File, ranges: &[(usize, usize)]) {
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
