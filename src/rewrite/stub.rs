//! The stub that takes a fatbin container's place in a rewritten object: it names the store
//! module the runtime must load (format in docs/DESIGN.md). The format itself is defined
//! once, in the runtime's source file, which is included here.

// The runtime's `parse` (borrowed names, String errors) is not used on this side.
#[allow(dead_code)]
#[path = "../../runtime/src/stub.rs"]
mod format;

pub use format::{FLAG_RELOCATABLE, STUB_HEADER_LEN, STUB_MAGIC, STUB_VERSION};

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
    #[error("offset {0:#x}: {1}")]
    Invalid(usize, String),
    #[error("offset {0:#x}: module name is not UTF-8")]
    Name(usize),
}

impl Stub {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&format::encode(&self.module, self.flags));
    }

    pub fn is_stub(bytes: &[u8]) -> bool {
        format::is_stub(bytes)
    }

    /// Decode one stub at the start of `b`; returns it and its padded length.
    pub fn decode(b: &[u8], at: usize) -> Result<(Stub, usize), StubError> {
        let head: &[u8; STUB_HEADER_LEN] = b
            .get(..STUB_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(StubError::Truncated(at))?;
        if !format::is_stub(head) {
            return Err(StubError::BadMagic(at));
        }
        let version = u16::from_le_bytes([head[4], head[5]]);
        if version != STUB_VERSION {
            return Err(StubError::Version(at, version));
        }
        let h = format::parse_header(head).map_err(|e| StubError::Invalid(at, e))?;
        let end = h.header_len + h.name_len;
        let name = b.get(h.header_len..end).ok_or(StubError::Truncated(at))?;
        let module = std::str::from_utf8(name)
            .map_err(|_| StubError::Name(at))?
            .to_string();
        Ok((
            Stub {
                module,
                flags: h.flags,
            },
            end.div_ceil(8) * 8,
        ))
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
