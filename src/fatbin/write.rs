//! Writing the model back as bytes nvcc's own tools accept.

use super::{Entry, EntryHeader, Fatbin};
use fatpack_format::fatbin::ContainerHeader;

impl Entry {
    pub fn write_to(&self, out: &mut Vec<u8>) {
        self.write_header(self.stored.len() as u64, out);
        out.extend_from_slice(&self.stored);
    }

    /// The entry's header (fixed part and tail) as written for a payload of `payload_len`
    /// bytes.
    pub fn write_header(&self, payload_len: u64, out: &mut Vec<u8>) {
        let h = EntryHeader {
            header_len: self.header_len() as u32,
            payload_len,
            ..self.header
        };
        out.extend_from_slice(&h.to_bytes());
        out.extend_from_slice(&self.header_tail);
    }
}

impl Fatbin {
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let body: usize = self.entries.iter().map(Entry::encoded_len).sum();
        let h = ContainerHeader {
            version: self.version,
            ..ContainerHeader::new(body as u64)
        };
        out.extend_from_slice(&h.to_bytes());
        for e in &self.entries {
            e.write_to(out);
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.write_to(&mut out);
        out
    }
}
