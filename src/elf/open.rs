//! A linked ELF file open for the transforms that follow the real link ([`OpenElf`]): its
//! headers read once, kept in memory as each transform changes them, and written where the
//! transform says. The output of `fatpack ld` goes through its store section, its store
//! segment, its slot and its build ID with one parse.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::error::{io_err, malformed as bad, EditError};
use super::Layout;

/// A linked file and its headers as they now are.
pub struct OpenElf {
    pub path: PathBuf,
    pub file: File,
    pub layout: Layout,
    /// Where the file's bytes end, when a transform left bytes past that (the cut's old
    /// tail): the next section appended is written over them rather than after a cut and a
    /// regrowth (the pages are in memory already; static cuBLAS's 70 MiB store goes where
    /// the 70 MiB of containers were), and [`OpenElf::settle`] cuts them otherwise.
    pub stale_from: Option<u64>,
}

impl OpenElf {
    /// Opens the file at `path` for reading and writing and reads its headers; it must have a
    /// section header table.
    pub fn open(path: &Path) -> Result<OpenElf, EditError> {
        let file = File::options()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        let layout = Layout::read(&file).map_err(|e| bad(path, e.to_string()))?;
        OpenElf::with(path, file, layout)
    }

    /// A file already open, with the headers it has now (a transform that just wrote them).
    pub fn with(path: &Path, file: File, layout: Layout) -> Result<OpenElf, EditError> {
        if layout.sections.is_empty() || layout.names_index() >= layout.sections.len() {
            return Err(bad(path, "no section header table"));
        }
        Ok(OpenElf {
            path: path.to_path_buf(),
            file,
            layout,
            stale_from: None,
        })
    }

    /// Cuts the bytes a transform left past the file's end ([`OpenElf::stale_from`]).
    pub fn settle(&mut self) -> Result<(), EditError> {
        if let Some(len) = self.stale_from.take() {
            self.file.set_len(len).map_err(io_err(&self.path))?;
        }
        Ok(())
    }

    /// Writes the headers where they say they are.
    pub fn write_headers(&self) -> Result<(), EditError> {
        self.layout
            .write_to(&self.file)
            .map_err(|e| bad(&self.path, e.to_string()))
    }

    /// The bytes of section `index`, read from the file.
    pub fn section_bytes(&self, index: usize) -> Result<Vec<u8>, EditError> {
        use std::os::unix::fs::FileExt;
        let s = &self.layout.sections[index];
        if s.sh_type.get(super::LE) == object::elf::SHT_NOBITS {
            return Ok(Vec::new());
        }
        let (off, size) = (s.sh_offset.get(super::LE), s.sh_size.get(super::LE));
        let len = self.file.metadata().map_err(io_err(&self.path))?.len();
        if off.checked_add(size).is_none_or(|end| end > len) {
            return Err(bad(
                &self.path,
                format!("section {index} lies outside the file"),
            ));
        }
        let mut v = vec![0u8; size as usize];
        self.file
            .read_exact_at(&mut v, off)
            .map_err(io_err(&self.path))?;
        Ok(v)
    }
}
