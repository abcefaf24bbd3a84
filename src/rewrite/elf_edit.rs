//! Replacing section contents in a relocatable ELF64 object.
//!
//! Relocatable objects have no program headers, so sections can be laid out anew: each
//! section's bytes are copied in file order with their alignment, the replaced ones take
//! their new contents, and the section header table goes last. Symbols defined in a replaced
//! section and relocation addends that point into it are remapped through an offset map, so
//! a partially linked object (several containers in one section) stays consistent.
//! Written by hand because object's ELF builder cannot carry COMDAT groups (`SHT_GROUP`),
//! which every C++ object with templates has.

use object::elf;

/// The largest file-offset alignment given to a section in a rewritten object.
const FILE_ALIGN_MAX: u64 = 4096;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ElfEditError {
    #[error("not a 64-bit little-endian ELF object")]
    NotElf64,
    #[error("not a relocatable object (ET_REL)")]
    NotRelocatable,
    #[error("malformed ELF: {0}")]
    Malformed(&'static str),
    #[error("a symbol or relocation points at offset {0:#x} of a replaced section, which is not the start of a container")]
    UnmappedOffset(u64),
}

/// New contents for one section, and where each old container start moved to.
pub struct Replacement {
    pub index: usize,
    pub data: Vec<u8>,
    /// `(old offset, new offset)` for every container start; other offsets are an error,
    /// except offsets at or past the old end, which map to the new end.
    pub offsets: Vec<(u64, u64)>,
    pub old_size: u64,
}

fn rd16(b: &[u8], o: usize) -> Result<u16, ElfEditError> {
    b.get(o..o + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or(ElfEditError::Malformed("truncated"))
}
fn rd64(b: &[u8], o: usize) -> Result<u64, ElfEditError> {
    b.get(o..o + 8)
        .map(|s| u64::from_le_bytes(s.try_into().expect("8")))
        .ok_or(ElfEditError::Malformed("truncated"))
}

#[derive(Clone)]
struct Shdr {
    raw: [u8; 64],
}
impl Shdr {
    fn ty(&self) -> u32 {
        u32::from_le_bytes(self.raw[4..8].try_into().expect("4"))
    }
    fn offset(&self) -> u64 {
        u64::from_le_bytes(self.raw[24..32].try_into().expect("8"))
    }
    fn size(&self) -> u64 {
        u64::from_le_bytes(self.raw[32..40].try_into().expect("8"))
    }
    fn link(&self) -> u32 {
        u32::from_le_bytes(self.raw[40..44].try_into().expect("4"))
    }
    fn info(&self) -> u32 {
        u32::from_le_bytes(self.raw[44..48].try_into().expect("4"))
    }
    fn align(&self) -> u64 {
        u64::from_le_bytes(self.raw[48..56].try_into().expect("8")).max(1)
    }
    fn entsize(&self) -> u64 {
        u64::from_le_bytes(self.raw[56..64].try_into().expect("8"))
    }
    fn set_offset(&mut self, v: u64) {
        self.raw[24..32].copy_from_slice(&v.to_le_bytes());
    }
    fn set_size(&mut self, v: u64) {
        self.raw[32..40].copy_from_slice(&v.to_le_bytes());
    }
}

/// Section names and indices of an ELF64 relocatable, for finding what to replace.
pub fn section_names(data: &[u8]) -> Result<Vec<String>, ElfEditError> {
    let (shdrs, _) = read_headers(data)?;
    let shstrndx = rd16(data, 62)? as usize;
    let strtab = shdrs
        .get(shstrndx)
        .ok_or(ElfEditError::Malformed("bad e_shstrndx"))?;
    let strs = data
        .get(strtab.offset() as usize..(strtab.offset() + strtab.size()) as usize)
        .ok_or(ElfEditError::Malformed("section names out of bounds"))?;
    Ok(shdrs
        .iter()
        .map(|s| {
            let at = u32::from_le_bytes(s.raw[0..4].try_into().expect("4")) as usize;
            let name = strs.get(at..).unwrap_or(&[]);
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            String::from_utf8_lossy(&name[..end]).into_owned()
        })
        .collect())
}

fn read_headers(data: &[u8]) -> Result<(Vec<Shdr>, u64), ElfEditError> {
    if data.len() < 64
        || data[..4] != *b"\x7fELF"
        || data[4] != elf::ELFCLASS64
        || data[5] != elf::ELFDATA2LSB
    {
        return Err(ElfEditError::NotElf64);
    }
    if rd16(data, 16)? != elf::ET_REL {
        return Err(ElfEditError::NotRelocatable);
    }
    let shoff = rd64(data, 40)?;
    let shentsize = rd16(data, 58)?;
    let mut shnum = rd16(data, 60)? as u64;
    if shentsize != 64 {
        return Err(ElfEditError::Malformed("section header size is not 64"));
    }
    if shnum == 0 && shoff != 0 {
        // More than 0xff00 sections: the count lives in section 0's sh_size.
        shnum = rd64(data, shoff as usize + 32)?;
    }
    let mut shdrs = Vec::with_capacity(shnum.min(1 << 20) as usize);
    for i in 0..shnum {
        let at = shoff
            .checked_add(i * 64)
            .ok_or(ElfEditError::Malformed("section headers out of bounds"))?
            as usize;
        let raw = data
            .get(at..at + 64)
            .ok_or(ElfEditError::Malformed("section headers out of bounds"))?;
        shdrs.push(Shdr {
            raw: raw.try_into().expect("64"),
        });
    }
    Ok((shdrs, shoff))
}

fn map_offset(r: &Replacement, old: u64) -> Result<u64, ElfEditError> {
    if old >= r.old_size {
        return Ok(r.data.len() as u64);
    }
    r.offsets
        .iter()
        .find(|(o, _)| *o == old)
        .map(|(_, n)| *n)
        .ok_or(ElfEditError::UnmappedOffset(old))
}

/// Rewrite `data` with the given sections replaced.
pub fn replace_sections(data: &[u8], reps: &[Replacement]) -> Result<Vec<u8>, ElfEditError> {
    let (mut shdrs, _) = read_headers(data)?;
    let rep_of = |i: usize| reps.iter().find(|r| r.index == i);
    // Section contents we will write: borrowed from the input unless replaced or patched.
    let mut contents: Vec<Option<Vec<u8>>> = vec![None; shdrs.len()];
    for r in reps {
        if r.index >= shdrs.len() || r.index == 0 {
            return Err(ElfEditError::Malformed("replacement names no section"));
        }
        contents[r.index] = Some(r.data.clone());
    }
    let body = |s: &Shdr| -> Result<&[u8], ElfEditError> {
        if s.ty() == elf::SHT_NOBITS || s.ty() == elf::SHT_NULL {
            return Ok(&[]);
        }
        let start = s.offset() as usize;
        let end = start
            .checked_add(s.size() as usize)
            .ok_or(ElfEditError::Malformed("section out of bounds"))?;
        data.get(start..end)
            .ok_or(ElfEditError::Malformed("section out of bounds"))
    };
    // Remap symbols defined in replaced sections; remember their values for relocations.
    let mut sym_section: Vec<Vec<(u16, u64)>> = vec![Vec::new(); shdrs.len()];
    for (i, s) in shdrs.iter().enumerate() {
        if s.ty() != elf::SHT_SYMTAB {
            continue;
        }
        if s.entsize() != 24 {
            return Err(ElfEditError::Malformed("symbol entry size is not 24"));
        }
        let mut syms = body(s)?.to_vec();
        let mut touched = false;
        let mut table = Vec::with_capacity(syms.len() / 24);
        for sym in syms.chunks_exact_mut(24) {
            let shndx = u16::from_le_bytes([sym[6], sym[7]]);
            let value = u64::from_le_bytes(sym[8..16].try_into().expect("8"));
            table.push((shndx, value));
            if let Some(r) = rep_of(shndx as usize) {
                let new = map_offset(r, value)?;
                sym[8..16].copy_from_slice(&new.to_le_bytes());
                // A size that ran over the old container would run past the stub.
                sym[16..24].copy_from_slice(&0u64.to_le_bytes());
                touched = true;
            }
        }
        sym_section[i] = table;
        if touched {
            contents[i] = Some(syms);
        }
    }
    // Relocation addends that point into a replaced section through a symbol defined there.
    for (i, s) in shdrs.iter().enumerate() {
        if s.ty() != elf::SHT_RELA {
            continue;
        }
        let table = sym_section
            .get(s.link() as usize)
            .ok_or(ElfEditError::Malformed(
                "relocation section links no symbol table",
            ))?;
        if rep_of(s.info() as usize).is_some() {
            return Err(ElfEditError::Malformed(
                "relocations apply to a replaced section",
            ));
        }
        let mut relas = body(s)?.to_vec();
        let mut touched = false;
        for rel in relas.chunks_exact_mut(24) {
            let info = u64::from_le_bytes(rel[8..16].try_into().expect("8"));
            let sym = (info >> 32) as usize;
            let Some(&(shndx, value)) = table.get(sym) else {
                continue;
            };
            let Some(r) = rep_of(shndx as usize) else {
                continue;
            };
            let addend = i64::from_le_bytes(rel[16..24].try_into().expect("8"));
            let target = value.wrapping_add(addend as u64);
            let new_target = map_offset(r, target)?;
            let new_value = map_offset(r, value)?;
            let new_addend = new_target.wrapping_sub(new_value) as i64;
            rel[16..24].copy_from_slice(&new_addend.to_le_bytes());
            touched = true;
        }
        if touched {
            contents[i] = Some(relas);
        }
    }
    // Lay out: ELF header, then sections in their original file order, then headers.
    let mut order: Vec<usize> = (1..shdrs.len()).collect();
    order.sort_by_key(|&i| (shdrs[i].offset(), i));
    let mut out = Vec::with_capacity(data.len());
    out.extend_from_slice(&data[..64]);
    for &i in &order {
        let s = &shdrs[i];
        if s.ty() == elf::SHT_NOBITS {
            let at = out.len() as u64;
            shdrs[i].set_offset(at);
            continue;
        }
        let bytes: Vec<u8> = match contents[i].take() {
            Some(b) => b,
            None => body(s)?.to_vec(),
        };
        // A relocatable's file offsets need not honour sh_addralign (ld aligns addresses in
        // the output, not offsets in the input), so a page is enough, whatever a section
        // claims (0x40000000000008 has been seen, and plain ld links it).
        let align = s.align().min(FILE_ALIGN_MAX) as usize;
        out.resize(out.len().div_ceil(align) * align, 0);
        let off = out.len() as u64;
        out.extend_from_slice(&bytes);
        let hdr = &mut shdrs[i];
        hdr.set_offset(off);
        hdr.set_size(bytes.len() as u64);
    }
    out.resize(out.len().div_ceil(8) * 8, 0);
    // No section header table at all is e_shoff 0: a non-zero offset with e_shnum 0 would
    // mean "the count is in section 0", which is not there (found by the fuzzer).
    let shoff = if shdrs.is_empty() {
        0
    } else {
        out.len() as u64
    };
    for s in &shdrs {
        out.extend_from_slice(&s.raw);
    }
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    Ok(out)
}
