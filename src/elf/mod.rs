//! The one ELF64 layer of the CLI: a file's headers read once into a typed [`Layout`]
//! (object's `FileHeader64`, `ProgramHeader64`, `SectionHeader64`), edited by field name
//! and written back. The scan, the rewrite of objects, the packed-output writer and prune
//! all go through it; nothing else in the CLI reads or writes an ELF header field by offset.
//!
//! It is also the one place ELF files are transformed, each transform planned over the
//! parsed file, checked, then written, with its own errors ([`TransformError`]) and
//! refusals that say why:
//! - [`cut`]: a linked file's device code packed together and the file cut short (prune's
//!   cut; the link's direct route, in the file itself);
//! - [`in_place`]: containers rewritten where they are, freed bytes zeroed;
//! - [`sections`]: a relocatable object's sections replaced (the copy route's stubs);
//! - [`append_section`]: a non-allocated section (the store) appended or replaced;
//! - [`store_segment`]: the store of a packed output mapped by a `PT_LOAD` of its own;
//! - [`build_id`]: the GNU build ID made to cover the device code;
//! - [`code_refs`]: which addresses the code names (what the cut may move).
//!
//! Commands decide *what* becomes of each container (prune's selection, the link's stubs);
//! this layer decides *how* the file changes and checks that it still holds together.
//! (The runtime finds its store with `fatpack_format::elf`, a `no_std` reader of the same
//! wire layout, whose constants this module shares.)
//!
//! Every offset and count read from a file is checked against the file's length: a
//! malformed file gives an [`ElfError`], never a panic or an allocation of its own size.

pub mod append_section;
pub mod build_id;
pub mod code_refs;
pub(crate) mod error;
pub mod open;
pub mod sections;
pub mod store_segment;

pub use error::EditError;
pub use open::OpenElf;

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use object::elf;
use object::pod::{self, Pod};
pub use object::LittleEndian as LE;

/// A symbol table as it lies in a file ([`Layout::symbol_table`]).
pub struct SymbolTable<'a> {
    pub symbols: &'a [Sym],
    pub strings: &'a [u8],
    /// The index of its first global symbol (`sh_info`).
    pub first_global: usize,
}

/// What an ELF file's identification and header say it is for: its class, byte order and
/// machine (`e_machine`, read in the file's own byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ident {
    pub class64: bool,
    pub big_endian: bool,
    pub machine: u16,
}

impl Ident {
    /// From the first 20 bytes of an ELF file; None where `data` is not one or is shorter.
    pub fn read(data: &[u8]) -> Option<Ident> {
        if !data.starts_with(b"\x7fELF") || data.len() < 20 {
            return None;
        }
        let big_endian = data[5] == elf::ELFDATA2MSB;
        let m = [data[18], data[19]];
        Some(Ident {
            class64: data[4] == elf::ELFCLASS64,
            big_endian,
            machine: match big_endian {
                true => u16::from_be_bytes(m),
                false => u16::from_le_bytes(m),
            },
        })
    }
}

/// The ELF header.
pub type Ehdr = elf::FileHeader64<LE>;
/// A program header (segment).
pub type Phdr = elf::ProgramHeader64<LE>;
/// A section header.
pub type Shdr = elf::SectionHeader64<LE>;
/// A symbol table entry.
pub type Sym = elf::Sym64<LE>;
/// A relocation with addend.
pub type Rela = elf::Rela64<LE>;

/// The end of the largest user address space of a 64-bit Linux machine (57-bit, x86-64's
/// five-level paging): a segment that ends past it cannot be loaded anywhere.
pub const MAX_ADDRESS: u64 = 1 << 57;

pub const EHDR_LEN: usize = std::mem::size_of::<Ehdr>();
pub const PHDR_LEN: usize = std::mem::size_of::<Phdr>();
pub const SHDR_LEN: usize = std::mem::size_of::<Shdr>();

#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64,
    #[error("malformed ELF: {0}")]
    Malformed(Cow<'static, str>),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

fn malformed(m: impl Into<Cow<'static, str>>) -> ElfError {
    ElfError::Malformed(m.into())
}

/// How many ELF files this process has parsed ([`Layout::parse`] and [`Layout::read`]):
/// `fatpack ld --fatpack-verbose` reports it against the number of ELF inputs it read, which
/// is how the one-parse-per-input rule is checked.
static PARSES: AtomicUsize = AtomicUsize::new(0);

/// [`PARSES`] so far.
pub fn parse_count() -> usize {
    PARSES.load(Ordering::Relaxed)
}

/// The `e_type` of `data` when it is a 64-bit little-endian ELF file (what fatpack reads),
/// from the header's first bytes alone: no parse (nor one counted in [`parse_count`]).
pub fn file_type_of(data: &[u8]) -> Option<u16> {
    let h = data.get(..18)?;
    (h.starts_with(b"\x7fELF") && h[4] == elf::ELFCLASS64 && h[5] == elf::ELFDATA2LSB)
        .then(|| u16::from_le_bytes([h[16], h[17]]))
}

/// A value of a plain-bytes record with every byte zero.
pub fn zeroed<T: Pod>() -> T {
    let bytes = vec![0u8; std::mem::size_of::<T>()];
    *pod::from_bytes::<T>(&bytes)
        .expect("a buffer of the record's size")
        .0
}

/// Where a [`Layout`] is read from: bytes in memory, or a file read at offsets.
trait Source {
    fn len(&self) -> u64;
    fn read(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, ElfError>;

    /// `count` records of `T` at `offset`, checked against the source's length.
    fn records<T: Pod>(&self, offset: u64, count: usize, what: &str) -> Result<Vec<T>, ElfError> {
        let bytes = count
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&n| {
                offset
                    .checked_add(n as u64)
                    .is_some_and(|e| e <= self.len())
            })
            .ok_or_else(|| malformed(format!("{what} lies outside the file")))?;
        let raw = self.read(offset, bytes)?;
        Ok(pod::slice_from_bytes::<T>(&raw, count)
            .map_err(|()| malformed(format!("{what} is truncated")))?
            .0
            .to_vec())
    }
}

impl Source for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, ElfError> {
        usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..o.checked_add(len)?))
            .map(Cow::Borrowed)
            .ok_or_else(|| malformed("a header lies outside the file"))
    }
}

struct FileSource<'a> {
    file: &'a File,
    len: u64,
}

impl Source for FileSource<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, ElfError> {
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, offset)?;
        Ok(Cow::Owned(buf))
    }
}

/// A file's ELF header, program headers, section headers and section names.
#[derive(Debug, Clone)]
pub struct Layout {
    pub header: Ehdr,
    pub segments: Vec<Phdr>,
    pub sections: Vec<Shdr>,
    /// The bytes of the section-name table (empty when the file names no sections).
    pub names: Vec<u8>,
}

impl Layout {
    /// The headers of the ELF file `data`.
    pub fn parse(data: &[u8]) -> Result<Layout, ElfError> {
        Self::from_source(&data)
    }

    /// The headers of the ELF file open as `file`, read where they are (an output of
    /// hundreds of MB is not read whole to change a header).
    pub fn read(file: &File) -> Result<Layout, ElfError> {
        let len = file.metadata()?.len();
        Self::from_source(&FileSource { file, len })
    }

    fn from_source(src: &impl Source) -> Result<Layout, ElfError> {
        PARSES.fetch_add(1, Ordering::Relaxed);
        if src.len() < EHDR_LEN as u64 {
            return Err(ElfError::NotElf64);
        }
        let header: Ehdr = src.records(0, 1, "the ELF header")?[0];
        let id = &header.e_ident;
        if id.magic != elf::ELFMAG || id.class != elf::ELFCLASS64 || id.data != elf::ELFDATA2LSB {
            return Err(ElfError::NotElf64);
        }
        let phnum = usize::from(header.e_phnum.get(LE));
        let segments = if phnum == 0 {
            Vec::new()
        } else {
            if usize::from(header.e_phentsize.get(LE)) != PHDR_LEN {
                return Err(malformed("program header size is not 56"));
            }
            src.records(header.e_phoff.get(LE), phnum, "the program header table")?
        };
        let shoff = header.e_shoff.get(LE);
        let mut layout = Layout {
            header,
            segments,
            sections: Vec::new(),
            names: Vec::new(),
        };
        if shoff == 0 {
            return Ok(layout);
        }
        if usize::from(header.e_shentsize.get(LE)) != SHDR_LEN {
            return Err(malformed("section header size is not 64"));
        }
        // Extended numbering: more than 0xff00 sections keep the count in section 0.
        let mut shnum = usize::from(header.e_shnum.get(LE));
        if shnum == 0 {
            let s0: Shdr = src.records(shoff, 1, "section header 0")?[0];
            shnum = usize::try_from(s0.sh_size.get(LE))
                .map_err(|_| malformed("section count too large"))?;
        }
        layout.sections = src.records(shoff, shnum, "the section header table")?;
        let names = layout.names_index();
        if names != 0 {
            let s = layout
                .sections
                .get(names)
                .ok_or_else(|| malformed("section name table index out of range"))?;
            if s.sh_type.get(LE) != elf::SHT_NOBITS {
                let (off, size) = (s.sh_offset.get(LE), s.sh_size.get(LE));
                let size = usize::try_from(size)
                    .ok()
                    .filter(|&n| off.checked_add(n as u64).is_some_and(|e| e <= src.len()))
                    .ok_or_else(|| malformed("the section name table lies outside the file"))?;
                layout.names = src.read(off, size)?.into_owned();
            }
        }
        Ok(layout)
    }

    /// Why a loaded segment cannot be what the file holds, if one cannot: its file bytes run
    /// past the end of the file (`file_len` bytes), it ends past the largest user address
    /// a 64-bit machine has ([`MAX_ADDRESS`]), or its file bytes exceed its size in memory. The kernel
    /// would not load such a file, and a rewrite would carry the damage on.
    pub fn bad_segment(&self, file_len: u64) -> Option<String> {
        self.segments.iter().enumerate().find_map(|(i, p)| {
            if p.p_type.get(LE) != elf::PT_LOAD {
                return None;
            }
            let (off, filesz, memsz) = (p.p_offset.get(LE), p.p_filesz.get(LE), p.p_memsz.get(LE));
            if off.checked_add(filesz).is_none_or(|end| end > file_len) {
                Some(format!(
                    "program header {i} (PT_LOAD) holds {filesz:#x} bytes from offset {off:#x}, \
                     past the end of the file ({file_len:#x} bytes)"
                ))
            } else if p
                .p_vaddr
                .get(LE)
                .checked_add(memsz)
                .is_none_or(|end| end > MAX_ADDRESS)
            {
                Some(format!(
                    "program header {i} (PT_LOAD) maps {memsz:#x} bytes at {:#x}, past any \
                     address a program can have",
                    p.p_vaddr.get(LE)
                ))
            } else if filesz > memsz {
                Some(format!(
                    "program header {i} (PT_LOAD) has more bytes in the file ({filesz:#x}) than \
                     in memory ({memsz:#x})"
                ))
            } else {
                None
            }
        })
    }

    /// The index of the section-name table (`e_shstrndx`, or section 0's `sh_link` when
    /// it is `SHN_XINDEX`).
    pub fn names_index(&self) -> usize {
        match self.header.e_shstrndx.get(LE) {
            elf::SHN_XINDEX => self
                .sections
                .first()
                .map_or(0, |s| s.sh_link.get(LE) as usize),
            n => usize::from(n),
        }
    }

    pub fn file_type(&self) -> u16 {
        self.header.e_type.get(LE)
    }

    pub fn machine(&self) -> u16 {
        self.header.e_machine.get(LE)
    }

    /// The name of section `index` (empty if it has none or it lies outside the table).
    pub fn section_name(&self, index: usize) -> &[u8] {
        let Some(s) = self.sections.get(index) else {
            return &[];
        };
        let n = self.names.get(s.sh_name.get(LE) as usize..).unwrap_or(&[]);
        &n[..n.iter().position(|&b| b == 0).unwrap_or(n.len())]
    }

    /// The first section called `name`, with its index.
    pub fn section_by_name(&self, name: &str) -> Option<(usize, &Shdr)> {
        (0..self.sections.len())
            .find(|&i| self.section_name(i) == name.as_bytes())
            .map(|i| (i, &self.sections[i]))
    }

    /// The `SHT_SYMTAB` of the file, read from `data` in which the file starts at `base`
    /// (an archive member's offset; 0 for a file of its own); None where it has none, or it
    /// or its strings lie outside `data`.
    pub fn symbol_table<'a>(&self, data: &'a [u8], base: u64) -> Option<SymbolTable<'a>> {
        let symtab = self
            .sections
            .iter()
            .find(|s| s.sh_type.get(LE) == elf::SHT_SYMTAB)?;
        let strtab = self.sections.get(symtab.sh_link.get(LE) as usize)?;
        let at = |s: &Shdr| {
            file_range(
                data,
                base.checked_add(s.sh_offset.get(LE))?,
                s.sh_size.get(LE),
            )
        };
        Some(SymbolTable {
            symbols: records::<Sym>(at(symtab)?),
            strings: at(strtab)?,
            first_global: symtab.sh_info.get(LE) as usize,
        })
    }

    /// The file bytes of section `index` of `data` (empty for `SHT_NOBITS` and `SHT_NULL`).
    pub fn section_data<'a>(&self, data: &'a [u8], index: usize) -> Result<&'a [u8], ElfError> {
        let s = self
            .sections
            .get(index)
            .ok_or_else(|| malformed("section index out of range"))?;
        if matches!(s.sh_type.get(LE), elf::SHT_NOBITS | elf::SHT_NULL) {
            return Ok(&[]);
        }
        file_range(data, s.sh_offset.get(LE), s.sh_size.get(LE))
            .ok_or_else(|| malformed("section out of bounds"))
    }

    /// Whether section `index` is loaded (`SHF_ALLOC`).
    pub fn allocated(&self, index: usize) -> bool {
        self.sections
            .get(index)
            .is_some_and(|s| s.sh_flags.get(LE) & u64::from(elf::SHF_ALLOC) != 0)
    }

    /// The section count as the header records it: in `e_shnum`, or in section 0 once the
    /// table outgrows it. Call after adding or removing a section.
    pub fn set_section_count(&mut self) -> Result<(), ElfError> {
        let n = self.sections.len();
        if self.header.e_shnum.get(LE) == 0 && n > 0 {
            self.sections[0].sh_size.set(LE, n as u64);
        } else {
            let n = u16::try_from(n)
                .ok()
                .filter(|&n| n < elf::SHN_LORESERVE)
                .ok_or_else(|| malformed("too many sections"))?;
            self.header.e_shnum.set(LE, n);
        }
        Ok(())
    }

    /// The section header table as bytes.
    pub fn section_table(&self) -> &[u8] {
        pod::bytes_of_slice(&self.sections)
    }

    /// Writes the ELF header, the program header table and the section header table where
    /// the header says they are, into `buf` (an ELF file being rebuilt in memory).
    pub fn write_into(&self, buf: &mut [u8]) -> Result<(), ElfError> {
        for (offset, bytes) in self.tables() {
            usize::try_from(offset)
                .ok()
                .and_then(|o| buf.get_mut(o..o.checked_add(bytes.len())?))
                .ok_or_else(|| malformed("a header table lies outside the file"))?
                .copy_from_slice(bytes);
        }
        Ok(())
    }

    /// [`Layout::write_into`] for a file open for writing.
    pub fn write_to(&self, file: &File) -> Result<(), ElfError> {
        for (offset, bytes) in self.tables() {
            file.write_all_at(bytes, offset)?;
        }
        Ok(())
    }

    fn tables(&self) -> [(u64, &[u8]); 3] {
        [
            (0, pod::bytes_of(&self.header)),
            (
                self.header.e_phoff.get(LE),
                pod::bytes_of_slice(&self.segments),
            ),
            (self.header.e_shoff.get(LE), self.section_table()),
        ]
    }
}

/// The NUL-terminated string at `at` of a string table, if not empty.
pub fn c_str(strings: &[u8], at: usize) -> Option<&[u8]> {
    let rest = strings.get(at..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    (end > 0).then(|| &rest[..end])
}

/// `data[offset..offset + size]`, None when it does not fit.
pub fn file_range(data: &[u8], offset: u64, size: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    data.get(start..start.checked_add(usize::try_from(size).ok()?)?)
}

/// The whole records of type `T` in `bytes` (a trailing partial record is ignored).
pub fn records<T: Pod>(bytes: &[u8]) -> &[T] {
    let n = bytes.len() / std::mem::size_of::<T>();
    pod::slice_from_bytes(bytes, n).map_or(&[], |(s, _)| s)
}

/// [`records`], to edit in place.
pub fn records_mut<T: Pod>(bytes: &mut [u8]) -> &mut [T] {
    let n = bytes.len() / std::mem::size_of::<T>();
    pod::slice_from_bytes_mut(bytes, n).map_or(&mut [], |(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Vec<u8> {
        // The fixture object: parse, write back, same bytes.
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/nvcc13/kernels.o"
        ))
        .unwrap()
    }

    #[test]
    fn reads_and_writes_back_the_same_bytes() {
        let data = tiny();
        let l = Layout::parse(&data).unwrap();
        assert!(l.section_by_name(".nv_fatbin").is_some());
        let mut copy = data.clone();
        l.write_into(&mut copy).unwrap();
        assert_eq!(copy, data);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.o");
        std::fs::write(&p, &data).unwrap();
        let f = File::open(&p).unwrap();
        let r = Layout::read(&f).unwrap();
        assert_eq!(r.section_table(), l.section_table());
        assert_eq!(r.names, l.names);
    }

    #[test]
    fn never_panics_on_damage() {
        let data = tiny();
        for cut in (0..data.len()).step_by(97) {
            let _ = Layout::parse(&data[..cut]);
        }
        for i in 0..EHDR_LEN {
            for v in [0u8, 0xff, 0x80] {
                let mut d = data.clone();
                d[i] = v;
                if let Ok(l) = Layout::parse(&d) {
                    for s in 0..l.sections.len() {
                        let _ = l.section_data(&d, s);
                        let _ = l.section_name(s);
                    }
                }
            }
        }
    }
}
