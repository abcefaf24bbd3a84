//! The stub that takes a fatbin container's place in a rewritten object: it names the store
//! module the runtime must load (format in docs/DESIGN.md).

pub const STUB_MAGIC: u32 = 0x4B50_4146; // bytes "FAPK"
pub const STUB_VERSION: u16 = 1;
pub const STUB_HEADER_LEN: usize = 16;
/// Flag bit: the container came from `__nv_relfatbin` (relocatable device code).
pub const FLAG_RELOCATABLE: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stub {
    pub module: String,
    pub flags: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StubError {
    #[error("offset {0:#x}: not a fatpack stub")]
    BadMagic(usize),
    #[error("offset {0:#x}: truncated fatpack stub")]
    Truncated(usize),
    #[error("offset {0:#x}: unsupported fatpack stub version {1}")]
    Version(usize, u16),
    #[error("offset {0:#x}: module name is not UTF-8")]
    Name(usize),
}

impl Stub {
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&STUB_MAGIC.to_le_bytes());
        out.extend_from_slice(&STUB_VERSION.to_le_bytes());
        out.extend_from_slice(&(STUB_HEADER_LEN as u16).to_le_bytes());
        out.extend_from_slice(&(self.module.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(self.module.as_bytes());
        let len = out.len() - start;
        out.resize(start + len.div_ceil(8) * 8, 0);
    }

    pub fn is_stub(bytes: &[u8]) -> bool {
        bytes.len() >= 4
            && u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == STUB_MAGIC
    }

    /// Decode one stub at the start of `b`; returns it and its padded length.
    pub fn decode(b: &[u8], at: usize) -> Result<(Stub, usize), StubError> {
        if b.len() < STUB_HEADER_LEN {
            return Err(StubError::Truncated(at));
        }
        if !Self::is_stub(b) {
            return Err(StubError::BadMagic(at));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != STUB_VERSION {
            return Err(StubError::Version(at, version));
        }
        let hlen = u16::from_le_bytes([b[6], b[7]]) as usize;
        let n = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
        let flags = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        let end = hlen
            .checked_add(n)
            .filter(|&e| e <= b.len() && hlen >= STUB_HEADER_LEN);
        let end = end.ok_or(StubError::Truncated(at))?;
        let module = std::str::from_utf8(&b[hlen..end])
            .map_err(|_| StubError::Name(at))?
            .to_string();
        Ok((Stub { module, flags }, end.div_ceil(8) * 8))
    }

    /// Every stub in a section (the linker concatenates them, maybe with zero padding).
    pub fn decode_all(b: &[u8]) -> Result<Vec<Stub>, StubError> {
        let mut out = Vec::new();
        let mut p = 0;
        while p < b.len() {
            if b[p] == 0 {
                p += 1;
                continue;
            }
            let (s, used) = Stub::decode(&b[p..], p)?;
            out.push(s);
            p += used.min(b.len() - p).max(1);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_concatenation() {
        let a = Stub {
            module: "a.o#0".into(),
            flags: 0,
        };
        let b = Stub {
            module: "lib.a(b.o)#1".into(),
            flags: FLAG_RELOCATABLE,
        };
        let mut bytes = Vec::new();
        a.encode(&mut bytes);
        assert_eq!(bytes.len() % 8, 0);
        bytes.extend_from_slice(&[0; 8]); // linker alignment padding
        b.encode(&mut bytes);
        assert_eq!(Stub::decode_all(&bytes).unwrap(), vec![a, b]);
        for cut in 1..bytes.len() {
            let _ = Stub::decode_all(&bytes[..cut]); // never panics
        }
        assert!(matches!(
            Stub::decode_all(b"\x01\x02"),
            Err(StubError::Truncated(0))
        ));
    }
}
