//! The fatpack stub that replaces a fatbin container (docs/DESIGN.md, "Stub format").
//!
//! ```text
//!  0 u32 magic 0x4B504146 ("FAPK")   4 u16 version 1   6 u16 header size (16)
//!  8 u32 name length N              12 u32 flags (bit 0: from __nv_relfatbin)
//! 16 N bytes module name (UTF-8), zero padding to a multiple of 8
//! ```

pub const STUB_MAGIC: u32 = 0x4B50_4146;
pub const STUB_VERSION: u16 = 1;
pub const STUB_HEADER_LEN: usize = 16;
pub const FLAG_RELOCATABLE: u32 = 1;
/// Longest module name accepted (the store's own limit).
pub const MAX_NAME_LEN: usize = cubin_store::MAX_NAME_LEN;

/// A decoded stub; `name` borrows the stub bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stub<'a> {
    pub name: &'a str,
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

/// True if `bytes` starts with the stub magic.
pub fn is_stub(bytes: &[u8]) -> bool {
    bytes.get(..4) == Some(&STUB_MAGIC.to_le_bytes()[..])
}

/// Checks the fixed header (magic, version, sizes).
pub fn parse_header(h: &[u8; STUB_HEADER_LEN]) -> Result<StubHeader, String> {
    if !is_stub(h) {
        return Err("not a fatpack stub (bad magic)".into());
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    let header_len = usize::from(u16::from_le_bytes([h[6], h[7]]));
    let name_len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let flags = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    if version != STUB_VERSION {
        return Err(format!(
            "fatpack stub version {version} (this runtime reads version {STUB_VERSION}); \
             the binary was packed by a newer fatpack"
        ));
    }
    // Longer headers are a future extension; the name still follows the header.
    if !(STUB_HEADER_LEN..=4096).contains(&header_len) {
        return Err(format!("fatpack stub header size {header_len} is invalid"));
    }
    if name_len == 0 || name_len > MAX_NAME_LEN {
        return Err(format!(
            "fatpack stub module name length {name_len} is invalid"
        ));
    }
    Ok(StubHeader {
        version,
        header_len,
        name_len,
        flags,
    })
}

/// Decodes a stub at the start of `b`.
pub fn parse(b: &[u8]) -> Result<Stub<'_>, String> {
    let h: &[u8; STUB_HEADER_LEN] = b
        .get(..STUB_HEADER_LEN)
        .and_then(|s| s.try_into().ok())
        .ok_or("truncated fatpack stub")?;
    let h = parse_header(h)?;
    let name = b
        .get(h.header_len..h.header_len + h.name_len)
        .ok_or("truncated fatpack stub")?;
    let name = std::str::from_utf8(name).map_err(|_| "fatpack stub module name is not UTF-8")?;
    Ok(Stub {
        name,
        flags: h.flags,
    })
}

/// Encodes a stub (for tests and tools; the packer has its own writer).
pub fn encode(name: &str, flags: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(STUB_HEADER_LEN + name.len() + 8);
    out.extend_from_slice(&STUB_MAGIC.to_le_bytes());
    out.extend_from_slice(&STUB_VERSION.to_le_bytes());
    out.extend_from_slice(&(STUB_HEADER_LEN as u16).to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.resize(out.len().div_ceil(8) * 8, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = encode("lib.a(k.o)#1", FLAG_RELOCATABLE);
        assert_eq!(b.len() % 8, 0);
        assert_eq!(&b[..4], b"FAPK");
        assert_eq!(
            parse(&b),
            Ok(Stub {
                name: "lib.a(k.o)#1",
                flags: 1
            })
        );
        for cut in 0..16 + 12 {
            assert!(parse(&b[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn rejects_bad_stubs() {
        let good = encode("m#0", 0);
        let mut v2 = good.clone();
        v2[4] = 2;
        assert!(parse(&v2).unwrap_err().contains("version 2"));
        let mut hl = good.clone();
        hl[6] = 8;
        assert!(parse(&hl).is_err());
        let mut empty = good.clone();
        empty[8] = 0;
        assert!(parse(&empty).is_err());
        let mut utf = good.clone();
        utf[16] = 0xff;
        assert!(parse(&utf).is_err());
        assert!(parse(b"\x50\xed\x55\xba\x01\x00\x10\x00........").is_err());
        assert!(!is_stub(b"FAP"));
    }
}
