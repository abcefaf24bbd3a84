//! Writing the model back as bytes nvcc's own tools accept.

use super::{Entry, Fatbin, CONTAINER_HEADER_LEN, FATBIN_MAGIC};

impl Entry {
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let hlen = self.header_len() as u32;
        out.extend_from_slice(&self.kind.code().to_le_bytes());
        out.extend_from_slice(&self.format_version.to_le_bytes());
        out.extend_from_slice(&hlen.to_le_bytes());
        out.extend_from_slice(&(self.stored.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.compressed_len.to_le_bytes());
        out.extend_from_slice(&self.options_offset.to_le_bytes());
        out.extend_from_slice(&self.code_version.to_le_bytes());
        out.extend_from_slice(&self.arch_number.to_le_bytes());
        out.extend_from_slice(&self.ident_offset.to_le_bytes());
        out.extend_from_slice(&self.ident_len.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.reserved.to_le_bytes());
        out.extend_from_slice(&self.uncompressed_len.to_le_bytes());
        out.extend_from_slice(&self.header_tail);
        out.extend_from_slice(&self.stored);
    }
}

impl Fatbin {
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let body: usize = self.entries.iter().map(Entry::encoded_len).sum();
        out.extend_from_slice(&FATBIN_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(CONTAINER_HEADER_LEN as u16).to_le_bytes());
        out.extend_from_slice(&(body as u64).to_le_bytes());
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
