//! Which members can hold device code, from their first bytes: an ELF file or an `ar`
//! archive. Everything else a package carries is copied as it streams, never read whole.
//! The lowest layer of the package readers: every format's reader uses it, it uses none.

use std::io::Read;
use std::path::Path;

use crate::error::io_at;
use crate::prune::PruneError;

/// Whether a file starting with `head` (its first 8 bytes) can hold device code: an ELF
/// file or an `ar` archive. Anything else a package carries is copied as it streams.
pub(super) fn is_binary(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF") || head.starts_with(b"!<arch>\n")
}

/// The first bytes of `r` (as many as [`is_binary`] looks at), read until they are there or
/// the stream ends: a reader may hand them over in pieces.
pub(super) fn read_head(r: &mut impl Read) -> std::io::Result<([u8; 8], usize)> {
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok((head, got))
}

/// Whether the file `path` can hold device code ([`is_binary`]).
pub(super) fn file_is_binary(path: &Path) -> Result<bool, PruneError> {
    let (head, n) = std::fs::File::open(path)
        .and_then(|mut f| read_head(&mut f))
        .map_err(io_at(path))?;
    Ok(is_binary(&head[..n]))
}
