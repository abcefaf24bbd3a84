//! A non-allocated section appended to (or replaced in) a linked ELF file, its contents
//! streamed in by the caller: the packed output's store. Nothing loaded moves.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

use object::elf;

use super::error::{io_err, malformed as bad, EditError};
use super::open::OpenElf;
use super::{Shdr, LE};

/// Writes relative to a base offset, so the store writer (which seeks to 0 to patch its
/// header) can write straight into the output file. It keeps the furthest byte written: the
/// section's end, whatever lies past it in the file (the old tables, written over).
pub struct OffsetWriter {
    file: File,
    base: u64,
    /// The file position (absolute), and the furthest byte written.
    pos: u64,
    end: u64,
}

impl Write for OffsetWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.pos += n as u64;
        self.end = self.end.max(self.pos);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for OffsetWriter {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let to = match pos {
            SeekFrom::Start(n) => self.base.checked_add(n),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            // The section's end, not the file's: the old tables may follow it.
            SeekFrom::End(d) => self.end.checked_add_signed(d),
        };
        let to = to
            .filter(|&t| t >= self.base)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the store"))?;
        self.pos = self.file.seek(SeekFrom::Start(to))?;
        Ok(self.pos - self.base)
    }
}

/// Writes the non-allocated section `name` of the ELF file at `path`, aligned to `align` in
/// the file, with contents from `write` (which may seek within them). A new section goes at
/// the end of the file; an existing one (`fatpack prune`'s new store) is replaced: in place of the old bytes
/// when nothing but the section tables follows them (as after `fatpack ld`), else at the
/// end. The section-name and section-header tables are rewritten after the store. Nothing
/// loaded moves.
pub fn append_section<T, E: From<EditError>>(
    path: &Path,
    name: &str,
    align: u64,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    append_section_in(&mut OpenElf::open(path)?, name, align, write)
}

/// [`append_section`] of a file already open, its headers as they are in memory (updated).
pub fn append_section_in<T, E: From<EditError>>(
    elf: &mut OpenElf,
    name: &str,
    align: u64,
    write: impl FnOnce(&mut OffsetWriter) -> Result<T, E>,
) -> Result<T, E> {
    let path = &elf.path.clone();
    // The writer takes a descriptor of its own (the same open file).
    let mut f = elf.file.try_clone().map_err(|e| E::from(io_err(path)(e)))?;
    let mut lay = elf.layout.clone();
    let shstrndx = lay.names_index();
    let shoff = lay.header.e_shoff.get(LE);
    let existing = lay.section_by_name(name).map(|(i, _)| i);
    // Bytes a transform left past the end are written over (and cut below).
    let end = match elf.stale_from.take() {
        Some(len) => len,
        None => f
            .seek(SeekFrom::End(0))
            .map_err(|e| E::from(io_err(path)(e)))?,
    };
    // Where the bytes that may be overwritten start: the old store if it is last, else the
    // tables if they are last, else the end of the file.
    let data_end_except = |skip: Option<usize>| -> u64 {
        lay.sections
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                Some(*i) != skip && *i != shstrndx && s.sh_type.get(LE) != elf::SHT_NOBITS
            })
            .map(|(_, s)| s.sh_offset.get(LE) + s.sh_size.get(LE))
            .max()
            .unwrap_or(0)
    };
    let shstr_off = lay.sections[shstrndx].sh_offset.get(LE);
    let tables_last = shoff + lay.section_table().len() as u64 == end;
    let mut tail_start = end;
    if tables_last && shstr_off < shoff && data_end_except(existing) <= shstr_off {
        tail_start = shstr_off.min(shoff);
    }
    if let Some(i) = existing {
        let old = lay.sections[i].sh_offset.get(LE);
        if tables_last && data_end_except(existing) <= old && old <= shstr_off {
            tail_start = old;
        }
    }
    let base = tail_start.div_ceil(align) * align;
    // The padding up to the section is zeros, whatever the bytes there were (the old
    // tables); the file is cut after the new tables below.
    std::os::unix::fs::FileExt::write_all_at(
        &f,
        &vec![0u8; (base - tail_start) as usize],
        tail_start,
    )
    .map_err(|e| E::from(io_err(path)(e)))?;
    f.seek(SeekFrom::Start(base))
        .map_err(|e| E::from(io_err(path)(e)))?;
    let mut w = OffsetWriter {
        file: f,
        base,
        pos: base,
        end: base,
    };
    let result = write(&mut w)?;
    let (mut f, store_end) = (w.file, w.end);
    f.seek(SeekFrom::Start(store_end))
        .map_err(|e| E::from(io_err(path)(e)))?;
    let store_len = store_end - base;
    match existing {
        Some(i) => {
            let s = &mut lay.sections[i];
            s.sh_offset.set(LE, base);
            s.sh_size.set(LE, store_len);
        }
        None => {
            let mut s: Shdr = crate::elf::zeroed();
            s.sh_name.set(LE, lay.names.len() as u32);
            s.sh_type.set(LE, elf::SHT_PROGBITS);
            // flags 0: not allocated, so in no segment; address 0.
            s.sh_offset.set(LE, base);
            s.sh_size.set(LE, store_len);
            s.sh_addralign.set(LE, align);
            lay.names.extend_from_slice(name.as_bytes());
            lay.names.push(0);
            lay.sections.push(s);
            lay.set_section_count()
                .map_err(|e| E::from(bad(path, e.to_string())))?;
        }
    }
    // The section names, then the section header table, after the store.
    let strtab_off = store_end;
    let pos = strtab_off + lay.names.len() as u64;
    let shoff = pos.div_ceil(8) * 8;
    let names = &mut lay.sections[shstrndx];
    names.sh_offset.set(LE, strtab_off);
    names.sh_size.set(LE, lay.names.len() as u64);
    lay.header.e_shoff.set(LE, shoff);
    f.write_all(&lay.names)
        .map_err(|e| E::from(io_err(path)(e)))?;
    f.write_all(&vec![0u8; (shoff - pos) as usize])
        .map_err(|e| E::from(io_err(path)(e)))?;
    f.write_all(lay.section_table())
        .map_err(|e| E::from(io_err(path)(e)))?;
    // Whatever lay past the new tables (the old ones, longer) goes.
    f.set_len(shoff + lay.section_table().len() as u64)
        .map_err(|e| E::from(io_err(path)(e)))?;
    f.seek(SeekFrom::Start(0))
        .map_err(|e| E::from(io_err(path)(e)))?;
    f.write_all(object::pod::bytes_of(&lay.header))
        .map_err(|e| E::from(io_err(path)(e)))?;
    elf.layout = lay;
    Ok(result)
}
