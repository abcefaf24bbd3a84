//! Reading fatbin containers from bytes. Every length is checked against what is there.

use super::{Entry, EntryHeader, Fatbin, CONTAINER_HEADER_LEN, FATBIN_MAGIC};
use fatpack_format::fatbin::ContainerHeader;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FatbinError {
    #[error("offset {offset:#x}: no fatbin magic (found {found:#010x}, want 0xba55ed50)")]
    BadMagic { offset: usize, found: u32 },
    #[error("offset {offset:#x}: truncated {what}: need {need} bytes, {have} left")]
    Truncated {
        offset: usize,
        what: &'static str,
        need: u64,
        have: usize,
    },
    #[error("offset {offset:#x}: container header size {size} is smaller than 16")]
    BadContainerHeader { offset: usize, size: u16 },
    #[error("offset {offset:#x}: entry header size {size} is smaller than 64")]
    BadEntryHeader { offset: usize, size: u32 },
    #[error(
        "offset {offset:#x}: entry {what} {value} runs past the container (which ends at {end:#x})"
    )]
    EntryPastEnd {
        offset: usize,
        what: &'static str,
        value: u64,
        end: usize,
    },
}

/// Parse the one container that starts at `bytes[0]`; returns it and the bytes it used.
/// `base` is added to offsets in errors, so they point into the enclosing section.
pub fn parse_one(bytes: &[u8], base: usize) -> Result<(Fatbin, usize), FatbinError> {
    walk_one(bytes, base, true, &mut |_| {})
}

/// Check one container's headers and return its length, copying no payload.
pub fn span_one(bytes: &[u8], base: usize) -> Result<usize, FatbinError> {
    walk_one(bytes, base, false, &mut |_| {}).map(|(_, used)| used)
}

/// The entries of the one container that starts at `bytes[0]`: where each starts and how
/// many bytes it takes (header and payload), its headers checked, no payload copied. With
/// [`entry_at`], a container of any size is read an entry at a time. `walked` hears the end
/// of each entry as the walk passes it ([`spans_with`]).
pub fn entry_spans(
    bytes: &[u8],
    base: usize,
    walked: &mut dyn FnMut(usize),
) -> Result<Vec<(usize, usize)>, FatbinError> {
    let mut spans = Vec::new();
    walk_entries(bytes, base, false, |_, at, used| {
        spans.push((at, used));
        walked(at + used);
    })?;
    Ok(spans)
}

/// The entries of the one container that starts at `bytes[0]`, headers only (each entry's
/// payload is left where it is, not copied): what a container holds, read in memory that
/// does not grow with its size.
pub fn entry_headers(bytes: &[u8], base: usize) -> Result<Vec<Entry>, FatbinError> {
    let mut out = Vec::new();
    walk_entries(bytes, base, false, |e, _, _| out.push(e))?;
    Ok(out)
}

/// The entry that takes `bytes[at..at + len]` of a container ([`entry_spans`]), copied.
pub fn entry_at(bytes: &[u8], at: usize, len: usize, base: usize) -> Result<Entry, FatbinError> {
    let end = at.saturating_add(len);
    let b = bytes.get(at..end).ok_or(FatbinError::Truncated {
        offset: base + at,
        what: "entry",
        need: len as u64,
        have: bytes.len().saturating_sub(at),
    })?;
    parse_entry(b, base + at, base + end, true).map(|(e, _)| e)
}

/// Checks the container at `bytes[0]` (at `base` in its section); `walked` hears the end of
/// each entry as the walk passes it ([`spans_with`]).
fn walk_one(
    bytes: &[u8],
    base: usize,
    keep: bool,
    walked: &mut dyn FnMut(usize),
) -> Result<(Fatbin, usize), FatbinError> {
    let mut entries = Vec::new();
    let (version, total) = walk_entries(bytes, base, keep, |e, at, len| {
        walked(base + at + len);
        if keep {
            entries.push(e);
        }
    })?;
    Ok((Fatbin { version, entries }, total))
}

/// Checks the container at `bytes[0]` and tells `each` of every entry (copied if `keep`),
/// where it starts and how long it is; returns the container's version and length.
fn walk_entries(
    bytes: &[u8],
    base: usize,
    keep: bool,
    mut each: impl FnMut(Entry, usize, usize),
) -> Result<(u16, usize), FatbinError> {
    let Some(head) = ContainerHeader::read(bytes) else {
        return Err(FatbinError::Truncated {
            offset: base,
            what: "container header",
            need: CONTAINER_HEADER_LEN as u64,
            have: bytes.len(),
        });
    };
    if head.magic != FATBIN_MAGIC {
        return Err(FatbinError::BadMagic {
            offset: base,
            found: head.magic,
        });
    }
    let hsize = head.header_len;
    if (hsize as usize) < CONTAINER_HEADER_LEN {
        return Err(FatbinError::BadContainerHeader {
            offset: base,
            size: hsize,
        });
    }
    let total = head.total_len().filter(|&t| t <= bytes.len() as u64);
    let Some(total) = total else {
        return Err(FatbinError::Truncated {
            offset: base,
            what: "container",
            need: u64::from(hsize).saturating_add(head.body_len),
            have: bytes.len(),
        });
    };
    let total = total as usize;
    let mut p = hsize as usize;
    while p < total {
        let (entry, used) = parse_entry(&bytes[p..total], base + p, base + total, keep)?;
        each(entry, p, used);
        p += used;
    }
    Ok((head.version, total))
}

fn parse_entry(b: &[u8], at: usize, end: usize, keep: bool) -> Result<(Entry, usize), FatbinError> {
    let Some(header) = EntryHeader::read(b) else {
        return Err(FatbinError::Truncated {
            offset: at,
            what: "entry header",
            need: EntryHeader::LEN as u64,
            have: b.len(),
        });
    };
    let hlen = header.header_len;
    if (hlen as usize) < EntryHeader::LEN {
        return Err(FatbinError::BadEntryHeader {
            offset: at,
            size: hlen,
        });
    }
    let past = |what, value: u64| FatbinError::EntryPastEnd {
        offset: at,
        what,
        value,
        end,
    };
    if hlen as usize > b.len() {
        return Err(past("header size", hlen.into()));
    }
    let psize = header.payload_len;
    let used = u64::from(hlen)
        .checked_add(psize)
        .filter(|&u| u <= b.len() as u64)
        .ok_or_else(|| past("payload size", psize))? as usize;
    let entry = Entry {
        header,
        header_tail: if keep {
            b[EntryHeader::LEN..hlen as usize].to_vec()
        } else {
            Vec::new()
        },
        stored: if keep {
            b[hlen as usize..used].to_vec()
        } else {
            Vec::new()
        },
    };
    if entry.compression() != super::Compression::None && u64::from(header.compressed_len) > psize {
        return Err(past("compressed size", header.compressed_len.into()));
    }
    Ok((entry, used))
}

/// Walk every container of a section: containers are padded apart with zeros (the linker
/// aligns each translation unit's fatbin); anything else between them is an error.
fn walk_all(
    bytes: &[u8],
    keep: bool,
    walked: &mut dyn FnMut(usize),
) -> Result<Vec<(usize, usize, Fatbin)>, FatbinError> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < bytes.len() {
        if bytes[p] == 0 {
            p += 1;
            continue;
        }
        let (fb, used) = walk_one(&bytes[p..], p, keep, walked)?;
        out.push((p, used, fb));
        p += used;
        walked(p);
    }
    Ok(out)
}

/// Containers embedded in a section of other data (a library's `.data` holding the fatbins
/// it loads itself through the driver API): `(offset, length)` of each, found by their
/// magic at 8-byte aligned addresses (`address`: the section's; cuFFT 12.0's `.ldata`
/// starts 4 bytes past a multiple of 8) and taken only when every field checks out, so that
/// random bytes are never taken for one: version 1, a 16-byte header, and entries of the format nvcc writes (version 0x0101, a header of 64 bytes to 4 KiB, a
/// plausible kind and arch) that fill the container exactly.
pub fn find_embedded(bytes: &[u8], address: u64) -> Vec<(usize, usize)> {
    let magic = FATBIN_MAGIC.to_le_bytes();
    let mut out = Vec::new();
    let mut p = 0;
    while let Some(found) = memchr::memmem::find(&bytes[p..], &magic) {
        let at = p + found;
        if (address + at as u64) % 8 == 0 {
            if let Some(len) = plausible_container(&bytes[at..]) {
                out.push((at, len));
                p = at + len;
                continue;
            }
        }
        p = at + 1;
    }
    out
}

fn plausible_container(b: &[u8]) -> Option<usize> {
    let head = ContainerHeader::read(b)?;
    if head.version != fatpack_format::fatbin::FATBIN_VERSION
        || usize::from(head.header_len) != CONTAINER_HEADER_LEN
    {
        return None;
    }
    let total = walk_one(b, 0, false, &mut |_| {}).ok()?.1;
    let mut p = CONTAINER_HEADER_LEN;
    while p < total {
        let e = EntryHeader::read(&b[p..])?;
        let kind_ok = e.kind != 0 && e.kind.is_power_of_two() && e.kind <= 0x80;
        if e.format_version != fatpack_format::fatbin::ENTRY_FORMAT_VERSION
            || !(EntryHeader::LEN as u32..=4096).contains(&e.header_len)
            || !kind_ok
            || !(10..1000).contains(&e.arch_number)
        {
            return None;
        }
        p += e.header_len as usize + e.payload_len as usize;
    }
    Some(total)
}

/// Every container in a section.
pub fn parse_all(bytes: &[u8]) -> Result<Vec<Fatbin>, FatbinError> {
    Ok(walk_all(bytes, true, &mut |_| {})?
        .into_iter()
        .map(|(_, _, f)| f)
        .collect())
}

/// [`parse_all`], with each container's offset in `bytes`.
pub fn parse_all_at(bytes: &[u8]) -> Result<Vec<(usize, Fatbin)>, FatbinError> {
    Ok(walk_all(bytes, true, &mut |_| {})?
        .into_iter()
        .map(|(o, _, f)| (o, f))
        .collect())
}

/// Offset and length of every container in a section, payloads checked for bounds but not
/// copied: what rewriting needs, in memory proportional to the number of containers.
pub fn spans(bytes: &[u8]) -> Result<Vec<(usize, usize)>, FatbinError> {
    spans_with(bytes, &mut |_| {})
}

/// [`spans`], telling `walked` after each entry and container how far the walk has come
/// (every byte before that offset is done with): a caller reading a file mapping lets the pages go as
/// the walk goes, so that a section of hundreds of MB is never resident at once.
pub fn spans_with(
    bytes: &[u8],
    walked: &mut dyn FnMut(usize),
) -> Result<Vec<(usize, usize)>, FatbinError> {
    Ok(walk_all(bytes, false, walked)?
        .into_iter()
        .map(|(o, l, _)| (o, l))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzzer: a container size near u64::MAX overflowed the error's arithmetic.
    #[test]
    fn huge_sizes_are_errors_not_overflows() {
        let mut b = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 0x10, 0];
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            parse_one(&b, 0),
            Err(FatbinError::Truncated { .. })
        ));
        assert!(spans(&b).is_err());
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/regressions/fatbin-overflow.bin"
        ))
        .unwrap();
        assert!(parse_all(&data).is_err());
    }

    /// Found by the fuzzer: a header claiming gigabytes of zstd output made the decoder
    /// allocate them before reading a byte.
    #[test]
    fn implausible_uncompressed_sizes_are_refused_before_allocating() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/regressions/fatbin-oom.bin"
        ))
        .unwrap();
        let fbs = parse_all(&data).unwrap();
        let big: Vec<_> = fbs
            .iter()
            .flat_map(|f| &f.entries)
            .filter(|e| e.raw_len() >= 1 << 26)
            .collect();
        assert!(!big.is_empty());
        for e in big {
            assert!(
                matches!(
                    e.payload(),
                    Err(super::super::DecompressError::SizeTooLarge { .. }
                        | super::super::DecompressError::SizeMismatch { .. })
                ),
                "{:?}",
                e.payload().map(|p| p.len())
            );
        }
    }

    #[test]
    fn every_prefix_of_a_real_fatbin_is_an_error_or_a_prefix_parse() {
        let data = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/nvcc13/kernels.fatbin"
        ))
        .unwrap();
        assert!(parse_all(&data).is_ok());
        for cut in 0..data.len() {
            assert!(
                parse_all(&data[..cut]).is_err() || cut == 0,
                "prefix {cut} parsed"
            );
        }
    }

    /// A walk of headers says after each entry and container how far it has come, in order,
    /// the last the end of the section.
    #[test]
    fn a_walk_says_how_far_it_has_come() {
        let one = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/nvcc13/kernels.fatbin"
        ))
        .unwrap();
        let mut section = one.clone();
        section.extend_from_slice(&[0; 8]);
        section.extend_from_slice(&one);
        let mut said = Vec::new();
        let spans = spans_with(&section, &mut |p| said.push(p)).unwrap();
        assert_eq!(spans.len(), 2);
        // Every entry's end (a container holds several), then the container's.
        assert!(said.len() > 2 * 2, "{said:?}");
        assert!(said.windows(2).all(|w| w[0] <= w[1]), "{said:?}");
        assert!(spans.iter().all(|&(o, l)| said.contains(&(o + l))));
        assert_eq!(said.last(), Some(&section.len()));
        assert_eq!(spans, super::spans(&section).unwrap());
    }
}
