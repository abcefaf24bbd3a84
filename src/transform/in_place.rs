//! Rewriting containers where they are in a linked ELF file: each becomes what the caller
//! makes of it at its own offset (the pointers to it stay valid), and the bytes it frees
//! are zeroed. What prune does to a file the cut refuses, and to the fatbins the cut leaves
//! in the program's own data.

use std::fs::File;
use std::path::Path;

use super::error::TransformError;
use super::Replace;
use crate::inputs::DeviceSection;

/// Rewrites each container of `sections` (as `data`, the input, holds it) at its own place
/// in `out` (where file offset `o` of the input now lies at `at(o)`) and zeroes what it no
/// longer needs; returns the zeroed ranges (offsets in `out`).
/// `release_out(offset, len)`: done writing that range of `out` ([`release_shared`] for a
/// mapping of the new file, so that rewriting a gigabyte of a program's own fatbins does
/// not hold it resident; nothing for bytes in memory).
pub fn rewrite_containers<'a, E: From<TransformError>>(
    path: &Path,
    data: &[u8],
    out: &mut [u8],
    sections: impl Iterator<Item = &'a DeviceSection>,
    at: &dyn Fn(u64) -> u64,
    replace: &mut Replace<'_, E>,
    release_out: &dyn Fn(u64, u64),
) -> Result<Vec<(usize, usize)>, E> {
    let mut zeroed = Vec::new();
    for sec in sections {
        for (index, &(off, len)) in sec.spans.iter().enumerate() {
            let old = crate::elf::file_range(data, sec.file_offset + off, len).unwrap_or_default();
            let new = replace(sec, index, old)?;
            if new.len() as u64 > len {
                return Err(TransformError::Grew(path.to_path_buf()).into());
            }
            let start = at(sec.file_offset + off) as usize;
            let end = start + len as usize;
            out[start..start + new.len()].copy_from_slice(&new);
            out[start + new.len()..end].fill(0);
            zeroed.push((start + new.len(), end));
            release_out(start as u64, len);
        }
    }
    Ok(zeroed)
}

/// How to let go of pages of `map`, a shared writable mapping of a file this command
/// writes: `(offset, len)` done with, its whole pages inside that range leave the
/// resident set (`MADV_DONTNEED`). What was written stays in the file's page cache, and a
/// later read faults the same bytes back in; slices into the mapping stay valid.
pub fn release_shared(map: &memmap2::MmapMut) -> impl Fn(u64, u64) + use<> {
    let (base, len) = (map.as_ptr() as usize, map.len());
    // SAFETY: a plain query of the page size.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096);
    move |off: u64, n: u64| {
        let (Ok(off), Ok(n)) = (usize::try_from(off), usize::try_from(n)) else {
            return;
        };
        let start = off.div_ceil(page) * page;
        let end = off.saturating_add(n).min(len) / page * page;
        if end > start {
            // SAFETY: the range lies inside the mapping (`end <= len`, the mapping starts on
            // a page), which is shared and backed by a file: MADV_DONTNEED drops page-table
            // entries only; the written bytes stay in the page cache and read back the same.
            unsafe {
                libc::madvise(
                    (base + start) as *mut libc::c_void,
                    end - start,
                    libc::MADV_DONTNEED,
                );
            }
        }
    }
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
