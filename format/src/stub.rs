//! The fatpack stub that takes a fatbin container's place in a rewritten object: it names
//! the store module the runtime must load (docs/DESIGN.md, "Stub format").
//!
//! ```text
//!  0 u32 magic 0x4B504146 ("FAPK")   4 u16 version 1   6 u16 header size (16)
//!  8 u32 name length N              12 u32 flags (bit 0: from __nv_relfatbin)
//! 16 N bytes module name (UTF-8), zero padding to a multiple of 8
//! ```
//!
//! Written by `fatpack ld`; read by the runtime (from the loaded image, through the wrapper
//! nvcc's registration code passes) and by the CLI (from a linked output's sections).

use crate::prelude::*;
use crate::wire_layout;

wire_layout! {
    /// The fixed 16 bytes at the start of a stub; the module name follows.
    pub struct StubRecord (16) {
        /// [`STUB_MAGIC`].
        magic: u32 = 0,
        version: u16 = 4,
        /// Bytes of the header; the name starts here.
        header_len: u16 = 6,
        name_len: u32 = 8,
        /// [`FLAG_RELOCATABLE`].
        flags: u32 = 12,
    }
}

pub const STUB_MAGIC: u32 = 0x4B50_4146;
pub const STUB_VERSION: u16 = 1;
pub const STUB_HEADER_LEN: usize = StubRecord::LEN;
/// Stub flag: the container came from `__nv_relfatbin` (an -rdc object).
pub const FLAG_RELOCATABLE: u32 = 1;
/// Longest module name accepted (the store has the same limit).
pub const MAX_NAME_LEN: usize = 64 * 1024;
/// Longest header a later version may write that this one still skips over.
const MAX_HEADER_LEN: usize = 4096;

/// Why bytes are not a readable stub.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StubError {
    #[error("not a fatpack stub (bad magic)")]
    BadMagic,
    #[error("truncated fatpack stub")]
    Truncated,
    #[error(
        "fatpack stub version {0} (this fatpack reads version {STUB_VERSION}); the binary was \
         packed by a newer fatpack"
    )]
    Version(u16),
    #[error("fatpack stub header size {0} is invalid")]
    HeaderLen(usize),
    #[error("fatpack stub module name length {0} is invalid")]
    NameLen(usize),
    #[error("fatpack stub module name is not UTF-8")]
    Name,
}

/// A stub's error with where it was found in a section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("offset {offset:#x}: {error}")]
pub struct StubAtError {
    pub offset: usize,
    pub error: StubError,
}

/// A decoded stub; `module` borrows the stub bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stub<'a> {
    pub module: &'a str,
    pub flags: u32,
}

/// The fixed part of a stub, enough to know how many name bytes follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StubHeader {
    pub version: u16,
    pub header_len: usize,
    pub name_len: usize,
    pub flags: u32,
}

impl StubHeader {
    /// Bytes the stub takes, padding included.
    pub fn padded_len(&self) -> usize {
        (self.header_len + self.name_len).div_ceil(8) * 8
    }
}

/// True if `bytes` starts with the stub magic.
pub fn is_stub(bytes: &[u8]) -> bool {
    bytes.get(..4) == Some(&STUB_MAGIC.to_le_bytes()[..])
}

/// Checks the fixed header (magic, version, sizes).
pub fn parse_header(h: &[u8; STUB_HEADER_LEN]) -> Result<StubHeader, StubError> {
    if !is_stub(h) {
        return Err(StubError::BadMagic);
    }
    let r = StubRecord::read(h).ok_or(StubError::Truncated)?;
    let (version, flags) = (r.version, r.flags);
    let header_len = usize::from(r.header_len);
    let name_len = r.name_len as usize;
    if version != STUB_VERSION {
        return Err(StubError::Version(version));
    }
    // Longer headers are a future extension; the name still follows the header.
    if !(STUB_HEADER_LEN..=MAX_HEADER_LEN).contains(&header_len) {
        return Err(StubError::HeaderLen(header_len));
    }
    if name_len == 0 || name_len > MAX_NAME_LEN {
        return Err(StubError::NameLen(name_len));
    }
    Ok(StubHeader {
        version,
        header_len,
        name_len,
        flags,
    })
}

/// Decodes the stub at the start of `b`; returns it and the bytes it takes (padded).
pub fn parse(b: &[u8]) -> Result<(Stub<'_>, usize), StubError> {
    let h: &[u8; STUB_HEADER_LEN] = b
        .get(..STUB_HEADER_LEN)
        .and_then(|s| s.try_into().ok())
        .ok_or(StubError::Truncated)?;
    let h = parse_header(h)?;
    let name = b
        .get(h.header_len..h.header_len + h.name_len)
        .ok_or(StubError::Truncated)?;
    let module = core::str::from_utf8(name).map_err(|_| StubError::Name)?;
    Ok((
        Stub {
            module,
            flags: h.flags,
        },
        h.padded_len(),
    ))
}

/// Every stub in a section: the linker concatenates them, maybe with zero padding between.
pub fn parse_all(b: &[u8]) -> Result<Vec<Stub<'_>>, StubAtError> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < b.len() {
        if b[p] == 0 {
            p += 1;
            continue;
        }
        let (s, used) = parse(&b[p..]).map_err(|error| StubAtError { offset: p, error })?;
        out.push(s);
        p += used.min(b.len() - p).max(1);
    }
    Ok(out)
}

/// Appends the stub for `module` to `out`.
pub fn encode_into(module: &str, flags: u32, out: &mut Vec<u8>) {
    let start = out.len();
    let header = StubRecord {
        magic: STUB_MAGIC,
        version: STUB_VERSION,
        header_len: STUB_HEADER_LEN as u16,
        name_len: module.len() as u32,
        flags,
    };
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(module.as_bytes());
    out.resize(start + (out.len() - start).div_ceil(8) * 8, 0);
}

/// The stub for `module`.
pub fn encode(module: &str, flags: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(STUB_HEADER_LEN + module.len() + 8);
    encode_into(module, flags, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_concatenation() {
        let mut bytes = encode("a.o#0", 0);
        assert_eq!(bytes.len() % 8, 0);
        assert_eq!(&bytes[..4], b"FAPK");
        bytes.extend_from_slice(&[0; 8]); // linker alignment padding
        encode_into("lib.a(b.o)#1", FLAG_RELOCATABLE, &mut bytes);
        let all = parse_all(&bytes).unwrap();
        assert_eq!(
            all,
            vec![
                Stub {
                    module: "a.o#0",
                    flags: 0
                },
                Stub {
                    module: "lib.a(b.o)#1",
                    flags: FLAG_RELOCATABLE
                }
            ]
        );
        for cut in 1..bytes.len() {
            let _ = parse_all(&bytes[..cut]); // never panics
        }
        let one = encode("lib.a(k.o)#1", FLAG_RELOCATABLE);
        for cut in 0..16 + 12 {
            assert!(parse(&one[..cut]).is_err(), "cut {cut}");
        }
        assert_eq!(
            parse_all(b"\x01\x02"),
            Err(StubAtError {
                offset: 0,
                error: StubError::Truncated
            })
        );
    }

    #[test]
    fn rejects_bad_stubs() {
        let good = encode("m#0", 0);
        let mut v2 = good.clone();
        v2[4] = 2;
        assert_eq!(parse(&v2).unwrap_err(), StubError::Version(2));
        assert!(parse(&v2).unwrap_err().to_string().contains("version 2"));
        let mut hl = good.clone();
        hl[6] = 8;
        assert_eq!(parse(&hl).unwrap_err(), StubError::HeaderLen(8));
        let mut empty = good.clone();
        empty[8] = 0;
        assert_eq!(parse(&empty).unwrap_err(), StubError::NameLen(0));
        let mut utf = good.clone();
        utf[16] = 0xff;
        assert_eq!(parse(&utf).unwrap_err(), StubError::Name);
        assert_eq!(
            parse(b"\x50\xed\x55\xba\x01\x00\x10\x00........").unwrap_err(),
            StubError::BadMagic
        );
        assert!(!is_stub(b"FAP"));
    }
}
