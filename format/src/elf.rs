//! Just enough ELF64 to find a section's bytes by name in a mapped file. Every offset read
//! from the file is bounds-checked; a malformed file yields an error, never a panic.

use crate::prelude::*;
use core::ops::Range;

use crate::wire_layout;

/// `SHT_NOBITS`: a section with no bytes in the file.
pub const SHT_NOBITS: u32 = 8;
/// `e_shstrndx` value meaning "the index is in section 0's `sh_link`".
pub const SHN_XINDEX: u16 = 0xFFFF;
const SHDR_LEN: usize = SectionHeader::LEN;

wire_layout! {
    /// The ELF64 header (little-endian).
    pub struct FileHeader (64) {
        ident: [u8; 16] = 0,
        e_type: u16 = 16,
        machine: u16 = 18,
        version: u32 = 20,
        entry: u64 = 24,
        phoff: u64 = 32,
        shoff: u64 = 40,
        flags: u32 = 48,
        ehsize: u16 = 52,
        phentsize: u16 = 54,
        phnum: u16 = 56,
        shentsize: u16 = 58,
        shnum: u16 = 60,
        shstrndx: u16 = 62,
    }
}

wire_layout! {
    /// An ELF64 section header (little-endian).
    pub struct SectionHeader (64) {
        name: u32 = 0,
        kind: u32 = 4,
        flags: u64 = 8,
        addr: u64 = 16,
        offset: u64 = 24,
        size: u64 = 32,
        link: u32 = 40,
        info: u32 = 44,
        addralign: u64 = 48,
        entsize: u64 = 56,
    }
}

fn shdr(file: &[u8], shoff: usize, entsize: usize, i: usize) -> Result<SectionHeader, String> {
    let at = i
        .checked_mul(entsize)
        .and_then(|o| o.checked_add(shoff))
        .ok_or("section header offset overflows")?;
    let h = at
        .checked_add(SHDR_LEN)
        .and_then(|end| file.get(at..end))
        .ok_or_else(|| format!("section header {i} lies outside the file"))?;
    SectionHeader::read(h).ok_or_else(|| format!("section header {i} is truncated"))
}

fn range(file: &[u8], offset: u64, size: u64, what: &str) -> Result<Range<usize>, String> {
    let start = usize::try_from(offset).map_err(|_| format!("{what} offset too large"))?;
    let len = usize::try_from(size).map_err(|_| format!("{what} size too large"))?;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= file.len())
        .ok_or_else(|| {
            format!(
                "{what} ({offset}+{size}) runs past the end of the file ({} bytes): truncated?",
                file.len()
            )
        })?;
    Ok(start..end)
}

/// `EM_CUDA`: the machine of a cubin.
pub const EM_CUDA: u16 = 190;

/// The SM number a cubin (a little-endian ELF64 of machine `EM_CUDA`) was compiled for, from
/// its header; None if `data` is not such an ELF. ABI version 8 (CUDA 12.8 and later) keeps
/// it in bits 8-15 of `e_flags`, older ones in bits 0-7. The `a`/`f` variant is not in the
/// header (ptxas writes the same flags for sm_90 and sm_90a).
pub fn cubin_sm(data: &[u8]) -> Option<u32> {
    if data.get(..4) != Some(b"\x7fELF") || data.get(4) != Some(&2) || data.get(5) != Some(&1) {
        return None;
    }
    let h = FileHeader::read(data)?;
    if h.machine != EM_CUDA {
        return None;
    }
    let flags = h.flags;
    let abi_version = h.ident[8];
    Some(if abi_version >= 8 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    })
}

/// The file range of section `name` (not SHT_NOBITS), None if the file has no such section.
pub fn find_section(file: &[u8], name: &str) -> Result<Option<Range<usize>>, String> {
    if file.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file".into());
    }
    if file.get(4) != Some(&2) || file.get(5) != Some(&1) {
        return Err("not a little-endian ELF64 file".into());
    }
    let h = FileHeader::read(file).ok_or("ELF header truncated")?;
    let shoff = h.shoff;
    let entsize = usize::from(h.shentsize);
    let mut shnum = usize::from(h.shnum);
    let mut shstrndx = usize::from(h.shstrndx);
    if shoff == 0 {
        return Ok(None);
    }
    if entsize < SHDR_LEN {
        return Err(format!("section header size {entsize} is too small"));
    }
    let shoff = usize::try_from(shoff).map_err(|_| "section header offset too large")?;
    // Extended numbering: the real counts live in section header 0.
    if shnum == 0 || shstrndx == usize::from(SHN_XINDEX) {
        let s0 = shdr(file, shoff, entsize, 0)?;
        if shnum == 0 {
            shnum = usize::try_from(s0.size).map_err(|_| "section count too large")?;
        }
        if shstrndx == usize::from(SHN_XINDEX) {
            shstrndx = s0.link as usize;
        }
    }
    // The table itself must fit; this also bounds shnum by the file size.
    range(
        file,
        shoff as u64,
        (shnum as u64).saturating_mul(entsize as u64),
        "section header table",
    )?;
    if shstrndx == 0 {
        // No section names: nothing can be found by name.
        return Ok(None);
    }
    if shstrndx >= shnum {
        return Err("section name table index out of range".into());
    }
    let strtab =
        shdr(file, shoff, entsize, shstrndx).map_err(|e| format!("section name table: {e}"))?;
    let strtab = &file[range(file, strtab.offset, strtab.size, "section name table")?];
    let want = name.as_bytes();
    for i in 1..shnum {
        let s = shdr(file, shoff, entsize, i)?;
        let Some(n) = strtab.get(s.name as usize..) else {
            continue;
        };
        let n = &n[..n.iter().position(|&b| b == 0).unwrap_or(n.len())];
        if n != want {
            continue;
        }
        if s.kind == SHT_NOBITS {
            return Err(format!("section {name} has no file contents"));
        }
        return range(file, s.offset, s.size, &format!("section {name}")).map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with sections: null, `.text` (4 bytes), `.fatpack` (8), `.shstrtab`.
    pub(crate) fn tiny_elf() -> Vec<u8> {
        let names = b"\0.text\0.fatpack\0.shstrtab\0";
        let mut f = vec![0u8; FileHeader::LEN];
        let text_off = f.len();
        f.extend_from_slice(b"TEXT");
        let fp_off = f.len();
        f.extend_from_slice(b"FPSTORE!");
        let str_off = f.len();
        f.extend_from_slice(names);
        while f.len() % 8 != 0 {
            f.push(0);
        }
        let shoff = f.len();
        let mut sh = |name: u32, kind: u32, off: usize, size: usize| {
            let h = SectionHeader {
                name,
                kind,
                offset: off as u64,
                size: size as u64,
                ..SectionHeader::default()
            };
            f.extend_from_slice(&h.to_bytes());
        };
        sh(0, 0, 0, 0);
        sh(1, 1, text_off, 4);
        sh(7, 1, fp_off, 8);
        sh(16, 3, str_off, names.len());
        let mut ident = [0u8; 16];
        ident[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        let h = FileHeader {
            ident,
            shoff: shoff as u64,
            shentsize: 64,
            shnum: 4,
            shstrndx: 3,
            ..FileHeader::default()
        };
        f[..FileHeader::LEN].copy_from_slice(&h.to_bytes());
        f
    }

    #[test]
    fn finds_sections() {
        let f = tiny_elf();
        let r = find_section(&f, ".fatpack").unwrap().unwrap();
        assert_eq!(&f[r], b"FPSTORE!");
        let r = find_section(&f, ".text").unwrap().unwrap();
        assert_eq!(&f[r], b"TEXT");
        assert_eq!(find_section(&f, ".fatpac").unwrap(), None);
        assert_eq!(find_section(&f, ".fatpack_digest").unwrap(), None);
    }

    #[test]
    fn never_panics_on_damage() {
        let f = tiny_elf();
        assert!(find_section(b"", ".fatpack").is_err());
        assert!(find_section(b"\x7fELF\x01\x01", ".fatpack").is_err());
        for cut in 0..f.len() {
            let _ = find_section(&f[..cut], ".fatpack");
        }
        // Flip every byte of the headers, one at a time.
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 0xff;
            if let Ok(Some(r)) = find_section(&g, ".fatpack") {
                assert!(r.end <= g.len());
            }
        }
    }
}
