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

use crate::elf::{records_mut, ElfError, Layout, Rela, Shdr, Sym, LE};

/// The largest file-offset alignment given to a section in a rewritten object.
const FILE_ALIGN_MAX: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum ElfEditError {
    #[error(transparent)]
    Elf(#[from] ElfError),
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

/// Section names of an ELF64 relocatable, by index, for finding what to replace.
pub fn section_names(data: &[u8]) -> Result<Vec<String>, ElfEditError> {
    let layout = relocatable(data)?;
    Ok((0..layout.sections.len())
        .map(|i| String::from_utf8_lossy(layout.section_name(i)).into_owned())
        .collect())
}

/// The layout of `data`, which must be a relocatable object.
pub fn relocatable(data: &[u8]) -> Result<Layout, ElfEditError> {
    let layout = Layout::parse(data)?;
    check_relocatable(&layout)?;
    Ok(layout)
}

fn check_relocatable(layout: &Layout) -> Result<(), ElfEditError> {
    if layout.file_type() != elf::ET_REL {
        return Err(ElfEditError::NotRelocatable);
    }
    Ok(())
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

/// One piece of a rewritten object, in order: bytes of the input kept as they are (by their
/// range in it), bytes made anew, or zero padding. A writer can copy the kept ranges from
/// the input file without reading them (most of a large object is kept).
#[derive(Debug, PartialEq, Eq)]
pub enum Part {
    Input(std::ops::Range<usize>),
    Bytes(Vec<u8>),
    Zeros(usize),
}

/// A rewritten object as [`Part`]s, and its length.
#[derive(Debug, Default)]
pub struct Parts {
    pub parts: Vec<Part>,
    pub len: usize,
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Input(r) => r.len(),
            Part::Bytes(b) => b.len(),
            Part::Zeros(n) => *n,
        }
    }
}

impl Parts {
    fn push(&mut self, p: Part) {
        self.len += p.len();
        self.parts.push(p);
    }

    /// The bytes, `input` being the object the parts were made from.
    pub fn to_vec(&self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for p in &self.parts {
            match p {
                Part::Input(r) => out.extend_from_slice(&input[r.clone()]),
                Part::Bytes(b) => out.extend_from_slice(b),
                Part::Zeros(n) => out.resize(out.len() + n, 0),
            }
        }
        out
    }
}

/// Rewrite `data`, whose headers are `layout`, with the given sections replaced.
pub fn replace_sections(
    data: &[u8],
    layout: &Layout,
    reps: &[Replacement],
) -> Result<Vec<u8>, ElfEditError> {
    Ok(replace_sections_parts(data, layout, reps)?.to_vec(data))
}

/// [`replace_sections`] as parts: the sections it does not change are ranges of `data`.
pub fn replace_sections_parts(
    data: &[u8],
    layout: &Layout,
    reps: &[Replacement],
) -> Result<Parts, ElfEditError> {
    check_relocatable(layout)?;
    let mut shdrs = layout.sections.clone();
    let rep_of = |i: usize| reps.iter().find(|r| r.index == i);
    // Section contents we will write: borrowed from the input unless replaced or patched.
    let mut contents: Vec<Option<Vec<u8>>> = vec![None; shdrs.len()];
    for r in reps {
        if r.index >= shdrs.len() || r.index == 0 {
            return Err(ElfEditError::Malformed("replacement names no section"));
        }
        contents[r.index] = Some(r.data.clone());
    }
    let body = |i: usize| -> Result<&[u8], ElfEditError> { Ok(layout.section_data(data, i)?) };
    let sym_section = remap_symbols(&shdrs, body, &rep_of, &mut contents)?;
    remap_addends(&shdrs, body, &rep_of, &sym_section, &mut contents)?;
    // Lay out: ELF header, then sections in their original file order, then headers.
    let mut order: Vec<usize> = (1..shdrs.len()).collect();
    order.sort_by_key(|&i| (shdrs[i].sh_offset.get(LE), i));
    let mut out = Parts::default();
    // The header's place: written last, once e_shoff is known.
    out.push(Part::Bytes(Vec::new()));
    out.len = crate::elf::EHDR_LEN;
    for &i in &order {
        let s = &mut shdrs[i];
        if s.sh_type.get(LE) == elf::SHT_NOBITS {
            s.sh_offset.set(LE, out.len as u64);
            continue;
        }
        // A relocatable's file offsets need not honour sh_addralign (ld aligns addresses in
        // the output, not offsets in the input), so a page is enough, whatever a section
        // claims (0x40000000000008 has been seen, and plain ld links it).
        let align = s.sh_addralign.get(LE).clamp(1, FILE_ALIGN_MAX) as usize;
        let pad = out.len.div_ceil(align) * align - out.len;
        if pad > 0 {
            out.push(Part::Zeros(pad));
        }
        s.sh_offset.set(LE, out.len as u64);
        let part = match contents[i].take() {
            Some(b) => Part::Bytes(b),
            None => {
                let b = body(i)?;
                // `body` is a slice of `data` (where it starts in it), or, for a section with
                // no bytes in the file (SHT_NULL past index 0, an empty one), an empty slice
                // that may lie anywhere.
                let start = (b.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
                match b.is_empty() {
                    true => Part::Bytes(Vec::new()),
                    false if start.checked_add(b.len()).is_some_and(|e| e <= data.len()) => {
                        Part::Input(start..start + b.len())
                    }
                    false => return Err(ElfEditError::Malformed("a section outside the file")),
                }
            }
        };
        s.sh_size.set(LE, part.len() as u64);
        out.push(part);
    }
    let pad = out.len.div_ceil(8) * 8 - out.len;
    if pad > 0 {
        out.push(Part::Zeros(pad));
    }
    // No section header table at all is e_shoff 0: a non-zero offset with e_shnum 0 would
    // mean "the count is in section 0", which is not there (found by the fuzzer).
    let shoff = if shdrs.is_empty() { 0 } else { out.len as u64 };
    out.push(Part::Bytes(object::pod::bytes_of_slice(&shdrs).to_vec()));
    let mut header = layout.header;
    header.e_shoff.set(LE, shoff);
    out.parts[0] = Part::Bytes(object::pod::bytes_of(&header).to_vec());
    Ok(out)
}

/// Symbols defined in a replaced section move with their container (and lose their size,
/// which would run over the stub). Returns each symbol table's `(section, value)` pairs as
/// they were, for the relocations.
fn remap_symbols<'a>(
    shdrs: &[Shdr],
    body: impl Fn(usize) -> Result<&'a [u8], ElfEditError>,
    rep_of: &dyn Fn(usize) -> Option<&'a Replacement>,
    contents: &mut [Option<Vec<u8>>],
) -> Result<Vec<Vec<(u16, u64)>>, ElfEditError> {
    let mut sym_section: Vec<Vec<(u16, u64)>> = vec![Vec::new(); shdrs.len()];
    for (i, s) in shdrs.iter().enumerate() {
        if s.sh_type.get(LE) != elf::SHT_SYMTAB {
            continue;
        }
        if s.sh_entsize.get(LE) != 24 {
            return Err(ElfEditError::Malformed("symbol entry size is not 24"));
        }
        let mut syms = body(i)?.to_vec();
        let mut touched = false;
        let mut table = Vec::with_capacity(syms.len() / 24);
        for sym in records_mut::<Sym>(&mut syms) {
            let (shndx, value) = (sym.st_shndx.get(LE), sym.st_value.get(LE));
            table.push((shndx, value));
            if let Some(r) = rep_of(shndx as usize) {
                sym.st_value.set(LE, map_offset(r, value)?);
                // A size that ran over the old container would run past the stub.
                sym.st_size.set(LE, 0);
                touched = true;
            }
        }
        sym_section[i] = table;
        if touched {
            contents[i] = Some(syms);
        }
    }
    Ok(sym_section)
}

/// Relocation addends that point into a replaced section through a symbol defined there.
fn remap_addends<'a>(
    shdrs: &[Shdr],
    body: impl Fn(usize) -> Result<&'a [u8], ElfEditError>,
    rep_of: &dyn Fn(usize) -> Option<&'a Replacement>,
    sym_section: &[Vec<(u16, u64)>],
    contents: &mut [Option<Vec<u8>>],
) -> Result<(), ElfEditError> {
    for (i, s) in shdrs.iter().enumerate() {
        if s.sh_type.get(LE) != elf::SHT_RELA {
            continue;
        }
        let table = sym_section
            .get(s.sh_link.get(LE) as usize)
            .ok_or(ElfEditError::Malformed(
                "relocation section links no symbol table",
            ))?;
        if rep_of(s.sh_info.get(LE) as usize).is_some() {
            return Err(ElfEditError::Malformed(
                "relocations apply to a replaced section",
            ));
        }
        let mut relas = body(i)?.to_vec();
        let mut touched = false;
        for rel in records_mut::<Rela>(&mut relas) {
            let sym = (rel.r_info.get(LE) >> 32) as usize;
            let Some(&(shndx, value)) = table.get(sym) else {
                continue;
            };
            let Some(r) = rep_of(shndx as usize) else {
                continue;
            };
            let target = value.wrapping_add(rel.r_addend.get(LE) as u64);
            let new_target = map_offset(r, target)?;
            let new_value = map_offset(r, value)?;
            rel.r_addend
                .set(LE, new_target.wrapping_sub(new_value) as i64);
            touched = true;
        }
        if touched {
            contents[i] = Some(relas);
        }
    }
    Ok(())
}
