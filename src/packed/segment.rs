//! Mapping the store with the image: the program header the linker made for the glue
//! object's note (`.note.fatpack`, an alignment no other note has, so a `PT_NOTE` of its own)
//! becomes a read-only `PT_LOAD` of the `.fatpack` section, placed after the highest address
//! the output loads. The running image then reaches its store through the slot's relative
//! address: no file to find, nothing a strip tool removes (the section is allocated), no
//! relocation that could overflow whatever the store's size, and the kernel maps it lazily
//! (no memory is used until a module is read).
//!
//! Nothing else moves: the program header table keeps its place and size, every section and
//! segment the linker wrote keeps its bytes and addresses.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use object::elf::{PF_R, PT_LOAD, PT_NOTE, SHF_ALLOC, SHT_NOTE, SHT_PROGBITS};

use super::{bad, io_err, OutputError};
use fatpack_format::link::{SEGMENT_NOTE_SECTION, STORE_SECTION};

const EHDR_LEN: usize = 64;
const PHDR_LEN: usize = 56;
const SHDR_LEN: usize = 64;
/// The smallest page any Linux target uses; the store is appended at a multiple of it.
const MIN_PAGE: u64 = 4096;

/// Where the store was mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// Virtual address of the store (before the load bias of a PIE or shared object).
    pub vaddr: u64,
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Clone, Copy)]
struct Phdr {
    kind: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    paddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

impl Phdr {
    fn read(b: &[u8]) -> Phdr {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8"));
        Phdr {
            kind: u32_at(0),
            flags: u32_at(4),
            offset: u64_at(8),
            vaddr: u64_at(16),
            paddr: u64_at(24),
            filesz: u64_at(32),
            memsz: u64_at(40),
            align: u64_at(48),
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.kind.to_le_bytes());
        b[4..8].copy_from_slice(&self.flags.to_le_bytes());
        for (at, v) in [
            (8, self.offset),
            (16, self.vaddr),
            (24, self.paddr),
            (32, self.filesz),
            (40, self.memsz),
            (48, self.align),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
}

struct Shdr {
    index: usize,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
}

/// The ELF header, program headers, section headers and section-name table of a file.
pub(super) struct Headers {
    ehdr: [u8; EHDR_LEN],
    phdrs: Vec<Phdr>,
    pub(super) shdrs: Vec<u8>,
    pub(super) shstrtab: Vec<u8>,
}

impl Headers {
    pub(super) fn shoff(&self) -> u64 {
        u64::from_le_bytes(self.ehdr[40..48].try_into().expect("8"))
    }

    pub(super) fn shnum(&self) -> u16 {
        u16::from_le_bytes([self.ehdr[60], self.ehdr[61]])
    }

    pub(super) fn shstrndx(&self) -> u16 {
        u16::from_le_bytes([self.ehdr[62], self.ehdr[63]])
    }

    pub(super) fn read(path: &Path, f: &mut File) -> Result<Headers, OutputError> {
        let mut ehdr = [0u8; EHDR_LEN];
        f.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
        f.read_exact(&mut ehdr).map_err(io_err(path))?;
        if ehdr[..4] != *b"\x7fELF" || ehdr[4] != 2 || ehdr[5] != 1 {
            return Err(bad(path, "not a 64-bit little-endian ELF"));
        }
        let u16_at = |o: usize| usize::from(u16::from_le_bytes([ehdr[o], ehdr[o + 1]]));
        let u64_at = |o: usize| u64::from_le_bytes(ehdr[o..o + 8].try_into().expect("8"));
        let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
        let (shoff, shentsize, shnum, shstrndx) = (u64_at(40), u16_at(58), u16_at(60), u16_at(62));
        if phentsize != PHDR_LEN || (shnum != 0 && shentsize != SHDR_LEN) {
            return Err(bad(path, "unexpected ELF header entry sizes"));
        }
        if shnum == 0 || shstrndx >= shnum {
            return Err(bad(path, "no section header table"));
        }
        let mut raw = vec![0u8; phnum * PHDR_LEN];
        f.seek(SeekFrom::Start(phoff)).map_err(io_err(path))?;
        f.read_exact(&mut raw).map_err(io_err(path))?;
        let phdrs = raw.chunks_exact(PHDR_LEN).map(Phdr::read).collect();
        let mut shdrs = vec![0u8; shnum * SHDR_LEN];
        f.seek(SeekFrom::Start(shoff)).map_err(io_err(path))?;
        f.read_exact(&mut shdrs).map_err(io_err(path))?;
        let sh = &shdrs[shstrndx * SHDR_LEN..][..SHDR_LEN];
        let off = u64::from_le_bytes(sh[24..32].try_into().expect("8"));
        let size = u64::from_le_bytes(sh[32..40].try_into().expect("8"));
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= 1 << 30)
            .ok_or_else(|| bad(path, "implausible section name table"))?;
        let mut shstrtab = vec![0u8; size];
        f.seek(SeekFrom::Start(off)).map_err(io_err(path))?;
        f.read_exact(&mut shstrtab).map_err(io_err(path))?;
        Ok(Headers {
            ehdr,
            phdrs,
            shdrs,
            shstrtab,
        })
    }

    fn section(&self, name: &str) -> Option<Shdr> {
        let wanted = name.as_bytes();
        self.shdrs
            .chunks_exact(SHDR_LEN)
            .enumerate()
            .find(|(_, h)| {
                let n = u32::from_le_bytes(h[0..4].try_into().expect("4")) as usize;
                self.shstrtab
                    .get(n..)
                    .and_then(|s| s.split(|&b| b == 0).next())
                    == Some(wanted)
            })
            .map(|(index, h)| {
                let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8"));
                Shdr {
                    index,
                    kind: u32::from_le_bytes(h[4..8].try_into().expect("4")),
                    flags: u64_at(8),
                    addr: u64_at(16),
                    offset: u64_at(24),
                    size: u64_at(32),
                }
            })
    }

    fn sections(&self) -> impl Iterator<Item = (u32, u64, u64, u64)> + '_ {
        // (type, offset, size, alignment)
        self.shdrs.chunks_exact(SHDR_LEN).map(|h| {
            let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8"));
            (
                u32::from_le_bytes(h[4..8].try_into().expect("4")),
                u64_at(24),
                u64_at(32),
                u64_at(48),
            )
        })
    }

    /// The glue note has done its job once the link is over (it made the linker reserve a
    /// program header). Left an `SHT_NOTE` of alignment 16 it would make note readers warn
    /// ("expecting 4 or 8"), and where a linker merged it into another `PT_NOTE` (mold
    /// before 2.0) that header's alignment would be 16 too: the section becomes plain data
    /// and such a header gets back the alignment of the notes it really holds.
    fn retire_note(&mut self, note: &Shdr, converted: Option<usize>) {
        if note.kind == SHT_NOTE {
            let sh = &mut self.shdrs[note.index * SHDR_LEN..][..SHDR_LEN];
            sh[4..8].copy_from_slice(&SHT_PROGBITS.to_le_bytes());
        }
        let end = note.offset + note.size;
        let notes: Vec<(u64, u64, u64)> = self
            .sections()
            .filter(|s| s.0 == SHT_NOTE && s.2 != 0)
            .map(|s| (s.1, s.2, s.3))
            .collect();
        for (i, p) in self.phdrs.iter_mut().enumerate() {
            let covers = p.offset <= note.offset && end <= p.offset + p.filesz;
            if Some(i) == converted || p.kind != PT_NOTE || !covers {
                continue;
            }
            p.align = notes
                .iter()
                .filter(|(o, n, _)| p.offset <= *o && o + n <= p.offset + p.filesz)
                .map(|(_, _, a)| *a)
                .max()
                .unwrap_or(4)
                .clamp(4, 8);
        }
    }

    fn write(&self, path: &Path, f: &mut File) -> Result<(), OutputError> {
        let mut raw = vec![0u8; self.phdrs.len() * PHDR_LEN];
        for (p, b) in self.phdrs.iter().zip(raw.chunks_exact_mut(PHDR_LEN)) {
            p.write(b);
        }
        let phoff = u64::from_le_bytes(self.ehdr[32..40].try_into().expect("8"));
        f.seek(SeekFrom::Start(phoff)).map_err(io_err(path))?;
        f.write_all(&raw).map_err(io_err(path))?;
        let shoff = u64::from_le_bytes(self.ehdr[40..48].try_into().expect("8"));
        f.seek(SeekFrom::Start(shoff)).map_err(io_err(path))?;
        f.write_all(&self.shdrs).map_err(io_err(path))
    }
}

/// Gives the `.fatpack` section of the ELF file at `path` a `PT_LOAD` of its own (or moves
/// the one it has, after `fatpack prune` rewrote the section). `Ok(None)`: the output has no
/// program header to spare (its linker merged the glue note into another note's `PT_NOTE`,
/// as mold before 2.0 does); the store then stays a non-allocated section that the runtime
/// finds through the file.
pub fn map_store(path: &Path) -> Result<Option<Mapping>, OutputError> {
    let mut f = File::options()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    let mut h = Headers::read(path, &mut f)?;
    let store = h
        .section(STORE_SECTION)
        .ok_or_else(|| bad(path, format!("no {STORE_SECTION} section to map")))?;
    if store.offset % MIN_PAGE != 0 {
        return Err(bad(
            path,
            format!("the {STORE_SECTION} section is not page-aligned in the file"),
        ));
    }
    let note = h.section(SEGMENT_NOTE_SECTION);
    let mapped_already = store.flags & u64::from(SHF_ALLOC) != 0;
    let slot = if mapped_already {
        h.phdrs
            .iter()
            .position(|p| p.kind == PT_LOAD && p.vaddr == store.addr)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("the allocated {STORE_SECTION} section has no PT_LOAD"),
                )
            })?
    } else {
        let found = note.as_ref().and_then(|note| {
            h.phdrs
                .iter()
                .position(|p| p.kind == PT_NOTE && p.offset == note.offset && p.filesz == note.size)
        });
        match found {
            Some(i) => i,
            None => {
                if let Some(note) = &note {
                    h.retire_note(note, None);
                    h.write(path, &mut f)?;
                }
                return Ok(None);
            }
        }
    };
    if let Some(note) = &note {
        h.retire_note(note, Some(slot));
    }
    let others = || {
        h.phdrs
            .iter()
            .enumerate()
            .filter(move |(i, p)| *i != slot && p.kind == PT_LOAD)
            .map(|(_, p)| p)
    };
    let align = others()
        .map(|p| p.align)
        .max()
        .unwrap_or(MIN_PAGE)
        .max(MIN_PAGE);
    if !align.is_power_of_two() {
        return Err(bad(
            path,
            format!("PT_LOAD alignment {align:#x} is not a power of two"),
        ));
    }
    let top = others()
        .map(|p| p.vaddr.saturating_add(p.memsz))
        .max()
        .ok_or_else(|| bad(path, "no PT_LOAD segment"))?;
    let vaddr = top
        .checked_next_multiple_of(align)
        .and_then(|v| v.checked_add(store.offset % align))
        .filter(|v| v.checked_add(store.size).is_some())
        .ok_or_else(|| bad(path, "the store does not fit in the address space"))?;
    let seg = Phdr {
        kind: PT_LOAD,
        flags: PF_R,
        offset: store.offset,
        vaddr,
        paddr: vaddr,
        filesz: store.size,
        memsz: store.size,
        align,
    };
    // PT_LOAD entries must stay sorted by address: ours has the highest, so it goes right
    // after the last other PT_LOAD (the entries between move up one; their order among
    // themselves is kept, and none of them is a PT_LOAD).
    h.phdrs.remove(slot);
    let at = h
        .phdrs
        .iter()
        .rposition(|p| p.kind == PT_LOAD)
        .map_or(0, |i| i + 1);
    h.phdrs.insert(at, seg);
    // The section says the same: allocated, at that address. Strip tools keep allocated
    // sections, which is what keeps the store in a stripped binary.
    let sh = &mut h.shdrs[store.index * SHDR_LEN..][..SHDR_LEN];
    sh[8..16].copy_from_slice(&(store.flags | u64::from(SHF_ALLOC)).to_le_bytes());
    sh[16..24].copy_from_slice(&vaddr.to_le_bytes());
    h.write(path, &mut f)?;
    Ok(Some(Mapping {
        vaddr,
        offset: store.offset,
        len: store.size,
    }))
}
