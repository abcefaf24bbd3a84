//! The one file-type detector: what a file is by its first bytes. `inputs::sniff` (device
//! code's view) and `ld`'s `Probe` (ld's view of an input) both start here.

use crate::fatbin::FATBIN_MAGIC;

/// A file's kind by its magic number alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Magic {
    Elf,
    Archive,
    ThinArchive,
    /// A standalone fatbin container.
    Fatbin,
    /// A fatpack store (side file).
    Store,
    /// LLVM bitcode, raw or in its wrapper.
    Bitcode,
    /// No NUL byte in the prefix: text (ld takes it as a linker script).
    Text,
    Other,
}

/// What `prefix` (a file's first bytes; 512 are plenty) says the file is.
pub fn magic(prefix: &[u8]) -> Magic {
    if prefix.starts_with(b"\x7fELF") {
        Magic::Elf
    } else if prefix.starts_with(b"!<arch>\n") {
        Magic::Archive
    } else if prefix.starts_with(b"!<thin>\n") {
        Magic::ThinArchive
    } else if prefix.get(..4) == Some(&FATBIN_MAGIC.to_le_bytes()[..]) {
        Magic::Fatbin
    } else if prefix.starts_with(&cubin_store::MAGIC) {
        Magic::Store
    } else if prefix.starts_with(b"BC\xc0\xde") || prefix.starts_with(b"\xde\xc0\x17\x0b") {
        Magic::Bitcode
    } else if !prefix.contains(&0) {
        Magic::Text
    } else {
        Magic::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magics() {
        assert_eq!(magic(b"\x7fELF\x02\x01"), Magic::Elf);
        assert_eq!(magic(b"!<arch>\nx"), Magic::Archive);
        assert_eq!(magic(b"!<thin>\nx"), Magic::ThinArchive);
        assert_eq!(magic(&[0x50, 0xed, 0x55, 0xba, 1, 0]), Magic::Fatbin);
        assert_eq!(magic(&cubin_store::MAGIC), Magic::Store);
        assert_eq!(magic(b"BC\xc0\xde\x35"), Magic::Bitcode);
        assert_eq!(magic(b"GROUP ( libc.so.6 )"), Magic::Text);
        assert_eq!(magic(b""), Magic::Text);
        assert_eq!(magic(b"\x00\x01"), Magic::Other);
    }
}
