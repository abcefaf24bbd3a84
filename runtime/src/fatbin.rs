//! Encoding the one-module fatbin container handed to cudart.
//!
//! Layout (little-endian; src/fatbin/header.rs in the fatpack crate documents the same):
//! a 16-byte container header `u32 magic 0xBA55ED50, u16 version 1, u16 header size 16,
//! u64 size of the entries`, then per entry its header (>= 64 bytes) and the payload padded
//! to 8 bytes. Entry header fields used here:
//!
//! ```text
//!  0 u16 kind (1 PTX, 2 ELF)       4 u32 header size (>= 64)      8 u64 payload size (padded)
//! 16 u32 compressed size          28 u32 arch number             40 u64 flags
//! 56 u64 uncompressed size (0 when not compressed)
//! ```
//!
//! The store keeps each entry's original header verbatim in `attrs` (identifier, options and
//! compatibility tables included) and its payload decompressed, so an entry is rebuilt by
//! clearing the compression fields and setting the payload size.

use std::fmt;

use cubin_store::{ArchVariant, EntryKind};

use crate::select::Candidate;

pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
pub const FATBIN_VERSION: u16 = 1;
pub const CONTAINER_HEADER_LEN: usize = 16;
pub const ENTRY_HEADER_MIN: usize = 64;

pub const KIND_PTX: u16 = 1;
pub const KIND_ELF: u16 = 2;

pub const FLAG_ADDR_64: u64 = 0x1;
pub const FLAG_HOST_LINUX: u64 = 0x10;
pub const FLAG_COMPRESSED_LZ4: u64 = 0x2000;
pub const FLAG_COMPRESSED_ZSTD: u64 = 0x8000;
pub const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
pub const FLAG_ARCH_FAMILY: u64 = 0x20_0000;

/// `code_version` of the ELF entries nvcc 13 writes (used only when `attrs` is empty).
const ELF_CODE_VERSION: u32 = 0x0001_0008;

/// Why an entry cannot be encoded: the store's metadata is inconsistent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError(pub String);

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncodeError {}

/// One entry to encode: its identity, the stored header (`attrs`) and its raw payload.
#[derive(Debug, Clone, Copy)]
pub struct EntryInput<'a> {
    pub candidate: Candidate,
    pub attrs: &'a [u8],
    pub payload: &'a [u8],
}

/// A byte buffer aligned to 16, so cudart sees the container as nvcc's `.nv_fatbin` would be.
pub struct Aligned {
    words: Vec<u128>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Self {
        Aligned {
            words: vec![0u128; len.div_ceil(16)],
            len,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes; u8 has no alignment needs.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.words.as_ptr().cast()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Aligned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Aligned({} bytes)", self.len)
    }
}

fn kind_code(kind: EntryKind) -> u16 {
    match kind {
        EntryKind::Ptx => KIND_PTX,
        EntryKind::Sass => KIND_ELF,
        EntryKind::Other(k) => k,
    }
}

fn padded(len: usize) -> Option<usize> {
    len.checked_add(7).map(|n| n & !7)
}

fn get_u16(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn get_u32(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn get_u64(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}
fn put(b: &mut [u8], o: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(o..o + v.len()) {
        d.copy_from_slice(v);
    }
}

/// PTX ISA version of PTX text as `major << 16 | minor`, from its `.version` directive.
fn ptx_version(ptx: &[u8]) -> u32 {
    let Some(at) = ptx.windows(8).position(|w| w == b".version") else {
        return 0;
    };
    let rest = &ptx[at + 8..];
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let num = |s: &[u8]| -> (u32, usize) {
        let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let v = s[..n].iter().fold(0u32, |a, d| {
            a.saturating_mul(10).saturating_add(u32::from(d - b'0'))
        });
        (v, n)
    };
    let (major, n) = num(rest);
    let minor = match rest.get(n) {
        Some(b'.') => num(&rest[n + 1..]).0,
        _ => 0,
    };
    (major << 16) | (minor & 0xFFFF)
}

/// The header for `e` with a payload of `padded_len` bytes: its `attrs` with the compression
/// fields cleared, or (for a store that kept no header) a minimal one like nvcc's.
pub fn entry_header(e: &EntryInput<'_>, padded_len: usize) -> Result<Vec<u8>, EncodeError> {
    let c = &e.candidate;
    let what = || c.name();
    if e.attrs.is_empty() {
        let mut flags = FLAG_ADDR_64 | FLAG_HOST_LINUX;
        match c.variant {
            ArchVariant::Plain => {}
            ArchVariant::Specific => flags |= FLAG_ARCH_SPECIFIC,
            ArchVariant::Family => flags |= FLAG_ARCH_FAMILY,
        }
        let code_version = match c.kind {
            EntryKind::Ptx => ptx_version(e.payload),
            _ => ELF_CODE_VERSION,
        };
        let mut h = vec![0u8; ENTRY_HEADER_MIN];
        put(&mut h, 0, &kind_code(c.kind).to_le_bytes());
        put(&mut h, 2, &0x0101u16.to_le_bytes());
        put(&mut h, 4, &(ENTRY_HEADER_MIN as u32).to_le_bytes());
        put(&mut h, 8, &(padded_len as u64).to_le_bytes());
        put(&mut h, 24, &code_version.to_le_bytes());
        put(&mut h, 28, &c.arch.to_le_bytes());
        put(&mut h, 40, &flags.to_le_bytes());
        return Ok(h);
    }
    let a = e.attrs;
    if a.len() < ENTRY_HEADER_MIN {
        return Err(EncodeError(format!(
            "{}: stored entry header is {} bytes (a fatbin entry header has at least {ENTRY_HEADER_MIN})",
            what(),
            a.len()
        )));
    }
    let hsize = get_u32(a, 4).unwrap_or_default() as usize;
    if hsize != a.len() {
        return Err(EncodeError(format!(
            "{}: stored entry header says it is {hsize} bytes but {} are stored",
            what(),
            a.len()
        )));
    }
    let kind = get_u16(a, 0).unwrap_or_default();
    if kind != kind_code(c.kind) {
        return Err(EncodeError(format!(
            "{}: stored entry header has kind {kind}, the store says {}",
            what(),
            kind_code(c.kind)
        )));
    }
    let arch = get_u32(a, 28).unwrap_or_default();
    if arch != c.arch {
        return Err(EncodeError(format!(
            "{}: stored entry header is for arch {arch}",
            what()
        )));
    }
    let flags = get_u64(a, 40).unwrap_or_default() & !(FLAG_COMPRESSED_LZ4 | FLAG_COMPRESSED_ZSTD);
    let mut h = a.to_vec();
    put(&mut h, 8, &(padded_len as u64).to_le_bytes());
    put(&mut h, 16, &0u32.to_le_bytes());
    put(&mut h, 40, &flags.to_le_bytes());
    put(&mut h, 56, &0u64.to_le_bytes());
    Ok(h)
}

/// One fatbin container holding `entries`, in order, uncompressed.
pub fn encode(entries: &[EntryInput<'_>]) -> Result<Aligned, EncodeError> {
    let too_big = || EncodeError("fatbin larger than the address space".into());
    let mut headers = Vec::with_capacity(entries.len());
    let mut body = 0usize;
    for e in entries {
        let plen = padded(e.payload.len()).ok_or_else(too_big)?;
        let h = entry_header(e, plen)?;
        body = body
            .checked_add(h.len())
            .and_then(|b| b.checked_add(plen))
            .ok_or_else(too_big)?;
        headers.push((h, plen));
    }
    let total = body.checked_add(CONTAINER_HEADER_LEN).ok_or_else(too_big)?;
    let mut out = Aligned::zeroed(total);
    let b = out.as_bytes_mut();
    put(b, 0, &FATBIN_MAGIC.to_le_bytes());
    put(b, 4, &FATBIN_VERSION.to_le_bytes());
    put(b, 6, &(CONTAINER_HEADER_LEN as u16).to_le_bytes());
    put(b, 8, &(body as u64).to_le_bytes());
    let mut at = CONTAINER_HEADER_LEN;
    for (e, (h, plen)) in entries.iter().zip(&headers) {
        put(b, at, h);
        at += h.len();
        put(b, at, e.payload);
        // Padding stays zero (the buffer starts zeroed).
        at += plen;
    }
    Ok(out)
}

/// One entry of a container, as [`parse`] reads it back (tests, diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedEntry<'a> {
    pub kind: u16,
    pub arch: u32,
    pub flags: u64,
    pub header: &'a [u8],
    pub payload: &'a [u8],
}

/// Reads one container (bounds-checked); None if it is not well formed.
pub fn parse(b: &[u8]) -> Option<(u16, Vec<ParsedEntry<'_>>)> {
    if get_u32(b, 0)? != FATBIN_MAGIC {
        return None;
    }
    let version = get_u16(b, 4)?;
    let hsize = usize::from(get_u16(b, 6)?);
    let body = usize::try_from(get_u64(b, 8)?).ok()?;
    let end = hsize.checked_add(body)?;
    if hsize < CONTAINER_HEADER_LEN || end > b.len() {
        return None;
    }
    let mut out = Vec::new();
    let mut at = hsize;
    while at < end {
        let e = b.get(at..end)?;
        let h = get_u32(e, 4)? as usize;
        let p = usize::try_from(get_u64(e, 8)?).ok()?;
        if h < ENTRY_HEADER_MIN || h.checked_add(p)? > e.len() {
            return None;
        }
        out.push(ParsedEntry {
            kind: get_u16(e, 0)?,
            arch: get_u32(e, 28)?,
            flags: get_u64(e, 40)?,
            header: &e[..h],
            payload: &e[h..h + p],
        });
        at += h + p;
    }
    Some((version, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header like nvcc 13's for a zstd-compressed entry, with a 16-byte tail.
    fn nvcc_header(kind: u16, arch: u32, flags: u64) -> Vec<u8> {
        let mut h = vec![0u8; 80];
        put(&mut h, 0, &kind.to_le_bytes());
        put(&mut h, 2, &0x0101u16.to_le_bytes());
        put(&mut h, 4, &80u32.to_le_bytes());
        put(&mut h, 8, &1234u64.to_le_bytes()); // compressed payload size, padded
        put(&mut h, 16, &1230u32.to_le_bytes()); // compressed size
        put(&mut h, 20, &64u32.to_le_bytes()); // options at the tail
        put(&mut h, 24, &0x0008_0007u32.to_le_bytes());
        put(&mut h, 28, &arch.to_le_bytes());
        put(&mut h, 40, &flags.to_le_bytes());
        put(&mut h, 56, &4000u64.to_le_bytes()); // uncompressed size
        put(&mut h, 64, b"-O3\0tail-bytes!\0");
        h
    }

    #[test]
    fn encodes_verbatim_headers_with_compression_cleared() {
        let sass = Candidate::parse("sm_90a").unwrap();
        let ptx = Candidate::parse("compute_90").unwrap();
        let h1 = nvcc_header(KIND_ELF, 90, 0x11 | FLAG_ARCH_SPECIFIC);
        let h2 = nvcc_header(
            KIND_PTX,
            90,
            0x11 | FLAG_COMPRESSED_ZSTD | FLAG_COMPRESSED_LZ4,
        );
        let p1 = b"\x7fELF-cubin-for-sm_90a";
        let p2 = b".version 9.0\n.target sm_90\0";
        let out = encode(&[
            EntryInput {
                candidate: sass,
                attrs: &h1,
                payload: p1,
            },
            EntryInput {
                candidate: ptx,
                attrs: &h2,
                payload: p2,
            },
        ])
        .unwrap();
        assert_eq!(out.as_ptr() as usize % 16, 0);
        let b = out.as_bytes();
        assert_eq!(&b[..8], &[0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0]);
        assert_eq!(get_u64(b, 8).unwrap() as usize, b.len() - 16);
        let (version, entries) = parse(b).unwrap();
        assert_eq!(version, 1);
        assert_eq!(entries.len(), 2);
        for (e, (h, p)) in entries.iter().zip([(&h1, &p1[..]), (&h2, &p2[..])]) {
            assert_eq!(e.header.len(), 80);
            assert_eq!(e.payload.len(), p.len().div_ceil(8) * 8);
            assert_eq!(&e.payload[..p.len()], p);
            assert!(e.payload[p.len()..].iter().all(|&z| z == 0));
            assert_eq!(get_u64(e.header, 8).unwrap() as usize, e.payload.len());
            assert_eq!(get_u32(e.header, 16), Some(0));
            assert_eq!(get_u64(e.header, 56), Some(0));
            assert_eq!(e.flags & (FLAG_COMPRESSED_LZ4 | FLAG_COMPRESSED_ZSTD), 0);
            // Everything else is the original header.
            assert_eq!(&e.header[..8], &h[..8]);
            assert_eq!(&e.header[20..40], &h[20..40]);
            assert_eq!(&e.header[48..56], &h[48..56]);
            assert_eq!(&e.header[64..], &h[64..]);
        }
        assert_eq!(entries[0].flags, 0x11 | FLAG_ARCH_SPECIFIC);
        assert_eq!(entries[1].flags, 0x11);
    }

    #[test]
    fn synthesises_a_header_when_none_was_stored() {
        let c = Candidate::parse("compute_100f").unwrap();
        let p = b"//\n.version 8.8\n.target sm_100f\n";
        let out = encode(&[EntryInput {
            candidate: c,
            attrs: &[],
            payload: p,
        }])
        .unwrap();
        let (_, e) = parse(out.as_bytes()).unwrap();
        assert_eq!(e[0].kind, KIND_PTX);
        assert_eq!(e[0].arch, 100);
        assert_eq!(
            e[0].flags,
            FLAG_ADDR_64 | FLAG_HOST_LINUX | FLAG_ARCH_FAMILY
        );
        assert_eq!(get_u32(e[0].header, 24), Some(0x0008_0008));
        assert_eq!(e[0].header.len(), 64);
    }

    #[test]
    fn rejects_inconsistent_headers() {
        let c = Candidate::parse("sm_80").unwrap();
        let good = nvcc_header(KIND_ELF, 80, 0x11);
        let mut short = good.clone();
        short.truncate(60);
        let mut wrong_size = good.clone();
        put(&mut wrong_size, 4, &96u32.to_le_bytes());
        let wrong_kind = nvcc_header(KIND_PTX, 80, 0x11);
        let wrong_arch = nvcc_header(KIND_ELF, 86, 0x11);
        for bad in [short, wrong_size, wrong_kind, wrong_arch] {
            let r = encode(&[EntryInput {
                candidate: c,
                attrs: &bad,
                payload: b"x",
            }]);
            assert!(r.is_err());
        }
        assert!(encode(&[EntryInput {
            candidate: c,
            attrs: &good,
            payload: b"x",
        }])
        .is_ok());
    }

    #[test]
    fn empty_container_and_parse_robustness() {
        let out = encode(&[]).unwrap();
        assert_eq!(out.len(), 16);
        assert_eq!(parse(out.as_bytes()).unwrap().1.len(), 0);
        let c = Candidate::parse("sm_80").unwrap();
        let h = nvcc_header(KIND_ELF, 80, 0x11);
        let full = encode(&[EntryInput {
            candidate: c,
            attrs: &h,
            payload: &[7u8; 13],
        }])
        .unwrap();
        let b = full.as_bytes();
        for cut in 0..b.len() {
            assert!(parse(&b[..cut]).is_none());
        }
        assert_eq!(ptx_version(b".version 12.10"), (12 << 16) | 10);
        assert_eq!(ptx_version(b"no directive"), 0);
    }
}
