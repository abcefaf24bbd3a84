//! Finding device code in whatever the user hands us: relocatable objects, `ar` archives
//! (thin ones too), shared libraries, executables, and standalone `.fatbin`/`.cubin` files.

pub mod archive;
mod elf;
mod guard;
pub mod magic;

use std::path::{Path, PathBuf};

use crate::cubin::{self, CubinInfo};
use crate::fatbin::{self, Fatbin, FatbinError};

pub use elf::{DEVICE_SECTIONS, FATBIN_SECTION, RELFATBIN_SECTION};

/// What kind of file a path holds, by its content (never by its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Object,
    SharedLibrary,
    Executable,
    Archive,
    ThinArchive,
    Fatbin,
    Cubin,
    Store,
    Other,
}

impl FileKind {
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Object => "object",
            FileKind::SharedLibrary => "shared library",
            FileKind::Executable => "executable",
            FileKind::Archive => "archive",
            FileKind::ThinArchive => "thin archive",
            FileKind::Fatbin => "fatbin",
            FileKind::Cubin => "cubin",
            FileKind::Store => "fatpack store",
            FileKind::Other => "other",
        }
    }
}

/// The device code of one section of one ELF file (an archive member counts as a file).
#[derive(Debug, Clone)]
pub struct DeviceSection {
    /// `foo.o`, or `libfoo.a(foo.o)` for archive members.
    pub origin: String,
    /// `.nv_fatbin`, or `__nv_relfatbin` for `-rdc=true` objects.
    pub section: String,
    /// Index of the section in its ELF file (0 for standalone fatbins).
    pub section_index: usize,
    /// Size of the section in bytes.
    pub section_size: u64,
    /// The file on disk that holds the bytes (a thin archive's member file, say).
    pub file: PathBuf,
    /// Where the section's bytes start in `file`.
    pub file_offset: u64,
    /// The headers of the ELF file that holds the section, as the scan read them (the
    /// rewrite edits them without reading the file's headers again); None for a
    /// standalone fatbin.
    pub elf: Option<std::sync::Arc<crate::elf::Layout>>,
    /// `(offset in section, length)` of each container.
    pub spans: Spans,
    /// The parsed containers; empty when located with [`Depth::Spans`].
    pub containers: Vec<Fatbin>,
    /// Containers found by their magic in a section of the program's own data (a linked
    /// library's `.data`, say), which it loads itself through the driver API: nothing
    /// registers them through cudart; they move only where every pointer to them can be
    /// redirected (`elf::cut::embedded_move`), else they are pruned where they are.
    pub embedded: bool,
}

impl DeviceSection {
    /// Offsets of the containers inside the section.
    pub fn offsets(&self) -> impl Iterator<Item = u64> + '_ {
        self.spans.iter().map(|s| s.0)
    }
}

/// How much of the device code to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Parse every container, payloads included.
    Full,
    /// Check headers and bounds and record where containers are; copy no payload
    /// (what `fatpack ld` does, so that its memory does not grow with the device code).
    Spans,
    /// As [`Depth::Spans`], section names kept: what prune reads of a linked file, whose
    /// cut reads the names, parsing each container only when it prunes it (so that its
    /// memory does not grow with the device code either).
    Located,
    /// As [`Depth::Spans`], of the sections cudart registers only (`.nv_fatbin`,
    /// `__nv_relfatbin`), never fatbins embedded in a linked file's data: what `fatpack ld`
    /// reads of its own output. Section names are kept.
    Registered,
}

/// `(offset, length)` of each container in a section.
pub type Spans = Vec<(u64, u64)>;

/// Read the sections' containers at `depth`.
/// `walked` hears how far a walk of headers has come ([`fatbin::spans_with`]).
pub(crate) fn read_containers(
    bytes: &[u8],
    depth: Depth,
    walked: &mut dyn FnMut(usize),
) -> Result<(Spans, Vec<Fatbin>), FatbinError> {
    match depth {
        Depth::Spans | Depth::Located | Depth::Registered => Ok((
            fatbin::spans_with(bytes, walked)?
                .into_iter()
                .map(|(o, l)| (o as u64, l as u64))
                .collect(),
            Vec::new(),
        )),
        Depth::Full => {
            let found = fatbin::parse_all_at(bytes)?;
            let spans = found
                .iter()
                .map(|(o, f)| (*o as u64, f.encoded_len() as u64))
                .collect();
            Ok((spans, found.into_iter().map(|(_, f)| f).collect()))
        }
    }
}

/// Everything found in one file.
#[derive(Debug, Clone)]
pub struct Scanned {
    pub path: PathBuf,
    pub kind: FileKind,
    pub sections: Vec<DeviceSection>,
    /// For a standalone cubin: what it is.
    pub cubin: Option<CubinInfo>,
    /// For a standalone cubin: its bytes (so callers need not read the file twice).
    pub cubin_bytes: Option<Vec<u8>>,
    /// Host ELF files whose headers the scan read: 1 for an ELF file, its ELF members for
    /// an archive (`fatpack ld --fatpack-verbose` checks each is read once).
    pub elf_files: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: section {section}: {source}")]
    Fatbin {
        origin: String,
        section: String,
        #[source]
        source: FatbinError,
    },
    #[error("{}: {source}", path.display())]
    StandaloneFatbin {
        path: PathBuf,
        #[source]
        source: FatbinError,
    },
    #[error("{origin}: {message}")]
    Malformed { origin: String, message: String },
    #[error("{}: not a regular file (a FIFO, device or directory is never read)", path.display())]
    NotRegular { path: PathBuf },
    #[error("{}: changed while fatpack read it (another process is writing it); run again when it is finished", path.display())]
    Changed { path: PathBuf },
    #[error("{}: {what}", path.display())]
    Unrecognized { path: PathBuf, what: String },
    #[error(
        "{}: a pack of a split binary (`fatpack split`): its entries are described by the \
         binary, so inspect or extract the binary next to it",
        path.display()
    )]
    Pack { path: PathBuf },
}

/// Read a whole file through a memory map (inputs can be gigabytes; the OS pages in what we touch).
pub fn map_file(path: &Path) -> Result<memmap2::Mmap, InputError> {
    let (file, _) = open_regular(path)?;
    // SAFETY: the map is read-only. Another process may still truncate the file while it is
    // mapped: `guard` turns the SIGBUS of a read past the new end into zeros read and an
    // error naming the file before anything is committed.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    guard::register(&map, path);
    Ok(map)
}

/// Read a small file whole (a map of its own costs more than reading a few KiB).
pub fn read_small(path: &Path) -> Result<Vec<u8>, InputError> {
    use std::io::Read;
    let (mut file, meta) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(bytes)
}

/// The error to give if an input changed while it was mapped ([`guard`]).
pub fn changed_input() -> Option<InputError> {
    guard::changed().map(|path| InputError::Changed { path })
}

/// `path` opened for reading, with its metadata, if it is a regular file. O_NONBLOCK: opening
/// a FIFO (say, a thin-archive member) must not wait for a writer; only regular files are
/// read at all. The flag does not matter to reads or maps of a regular file.
fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), InputError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(InputError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    Ok((file, meta))
}

/// The whole of a regular file, read (not mapped): what the commands that rewrite files
/// (prune, repack, split, join, extract) and inspect work on. A file truncated or grown
/// while it is read is an error naming it, where a mapped file would kill the process with
/// SIGBUS.
pub fn read_file(path: &Path) -> Result<Vec<u8>, InputError> {
    use std::io::Read;
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (mut file, meta) = open_regular(path)?;
    let len = meta.len();
    let mut data = Vec::new();
    data.try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| io(std::io::Error::from(std::io::ErrorKind::OutOfMemory)))?;
    file.read_to_end(&mut data).map_err(io)?;
    let now = file.metadata().map_err(io)?;
    if data.len() as u64 != len || now.len() != len || now.modified().ok() != meta.modified().ok() {
        return Err(InputError::Changed {
            path: path.to_path_buf(),
        });
    }
    Ok(data)
}

/// Why a file [`sniff`] calls [`FileKind::Other`] is not one fatpack reads, in the user's
/// words.
pub fn why_other(data: &[u8]) -> String {
    if magic::magic(data) != magic::Magic::Elf {
        return "not an ELF file, archive, fatbin, cubin or fatpack store".into();
    }
    match crate::elf::Layout::parse(data) {
        Err(e) => format!("a damaged ELF file: {e}"),
        Ok(l) => format!(
            "an ELF file of type {} (a core dump or unknown), where fatpack reads relocatable \
             objects, executables and shared libraries",
            l.file_type()
        ),
    }
}

/// Identify a file by its first bytes.
pub fn sniff(data: &[u8]) -> FileKind {
    classify(data).0
}

/// [`sniff`], and for a host ELF file its headers, read once for every step that follows.
pub fn classify(data: &[u8]) -> (FileKind, Option<crate::elf::Layout>) {
    let kind = match magic::magic(data) {
        magic::Magic::Archive => FileKind::Archive,
        magic::Magic::ThinArchive => FileKind::ThinArchive,
        magic::Magic::Fatbin => FileKind::Fatbin,
        magic::Magic::Store => FileKind::Store,
        magic::Magic::Elf if cubin::is_cubin(data) => FileKind::Cubin,
        magic::Magic::Elf => {
            return match crate::elf::Layout::parse(data) {
                Ok(layout) => match elf::host_kind(&layout) {
                    FileKind::Other => (FileKind::Other, None),
                    kind => (kind, Some(layout)),
                },
                Err(_) => (FileKind::Other, None),
            }
        }
        magic::Magic::Bitcode | magic::Magic::Text | magic::Magic::Other => FileKind::Other,
    };
    (kind, None)
}

/// The ELF `e_machine` of an ELF file ([`crate::elf::Ident`]).
pub fn elf_machine(data: &[u8]) -> Option<u16> {
    crate::elf::Ident::read(data).map(|i| i.machine)
}

/// Every file one command maps, mapped once: a link reads each input (and each thin-archive
/// member) through this, when it scans, rewrites and stores, and never maps a file twice.
#[derive(Default)]
pub struct Maps {
    files: std::sync::Mutex<std::collections::HashMap<PathBuf, std::sync::Arc<memmap2::Mmap>>>,
}

impl Maps {
    /// The mapping of `path`, made on first use.
    pub fn get(&self, path: &Path) -> Result<std::sync::Arc<memmap2::Mmap>, InputError> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = files.get(path) {
            return Ok(m.clone());
        }
        let m = std::sync::Arc::new(map_file(path)?);
        files.insert(path.to_path_buf(), m.clone());
        Ok(m)
    }

    /// [`Maps::release`] for every byte of every file mapped so far: after a pass that read
    /// host code from every input (the rewrite).
    pub fn release_all(&self) {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        for m in files.values() {
            let_go(m, 0, m.len() as u64);
        }
    }

    /// Done reading `len` bytes at `offset` of `path` (a module the store has taken): its
    /// pages leave this process's resident set. They stay in the page cache, and a later read
    /// faults them back in unchanged, so this is only advice; without it, reading every
    /// input once would leave the whole device code resident, as ld's own copy is.
    pub fn release(&self, path: &Path, offset: u64, len: u64) {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = files.get(path) {
            let_go(m, offset, len);
        }
    }
}

/// How many bytes of a mapped file a pass reads between two releases of its pages
/// ([`Maps::release`], [`let_go`]): few enough calls (each is a TLB flush on every CPU this
/// process's threads ran on), little enough held resident.
pub const RELEASE_STEP: u64 = 8 << 20;

/// A walk over `[start, ..)` of a mapped file (entry headers, read in order) that lets the
/// pages it has passed go a step at a time: reading one header maps the large page-cache
/// folio around it, so that a walk of a 316 MB object otherwise left 247 MiB of it resident.
pub struct WalkRelease<'a> {
    release: &'a dyn Fn(u64, u64),
    start: u64,
    done: usize,
}

impl<'a> WalkRelease<'a> {
    /// `release(offset, len)`: done with that range of the file (e.g. [`Maps::release`]).
    pub fn new(start: u64, release: &'a dyn Fn(u64, u64)) -> Self {
        WalkRelease {
            release,
            start,
            done: 0,
        }
    }

    /// The walk has come to `upto` (from `start`): every byte before it is done with.
    pub fn walked(&mut self, upto: usize) {
        if upto.saturating_sub(self.done) as u64 >= RELEASE_STEP {
            (self.release)(self.start + self.done as u64, (upto - self.done) as u64);
            self.done = upto;
        }
    }
}

/// `len` bytes at `offset` of the read-only shared file mapping `map` leave this process's
/// resident set (they stay in the page cache); a range outside it, or empty, is ignored.
pub fn let_go(map: &memmap2::Mmap, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else {
        return;
    };
    if len > 0 && offset.checked_add(len).is_some_and(|end| end <= map.len()) {
        // SAFETY: the mapping is read-only and shared (`map_file`, or a temp file mapped so):
        // MADV_DONTNEED drops page-table entries only, never data, and the next access reads
        // the same bytes from the file. Slices into the range stay valid.
        let _ =
            unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) };
    }
}

/// Find all device code in the file at `path`.
pub fn scan(path: &Path) -> Result<Scanned, InputError> {
    let map = map_file(path)?;
    scan_bytes(path, &map)
}

/// Where the device code of a relocatable object or archive `path` (whose bytes are
/// `data`) is, without reading payloads; thin-archive members are mapped through `maps`.
/// Any other kind of file is only identified (what a link rewrites: a shared library's
/// device code belongs to it).
pub fn locate(path: &Path, data: &[u8], maps: &Maps) -> Result<Scanned, InputError> {
    scan_with(path, data, Depth::Spans, maps, |k| {
        matches!(
            k,
            FileKind::Object | FileKind::Archive | FileKind::ThinArchive
        )
    })
}

pub fn scan_bytes(path: &Path, data: &[u8]) -> Result<Scanned, InputError> {
    scan_at(path, data, Depth::Full)
}

pub fn scan_at(path: &Path, data: &[u8], depth: Depth) -> Result<Scanned, InputError> {
    scan_with(path, data, depth, &Maps::default(), |_| true)
}

fn scan_with(
    path: &Path,
    data: &[u8],
    depth: Depth,
    maps: &Maps,
    wanted: impl Fn(FileKind) -> bool,
) -> Result<Scanned, InputError> {
    let shown = path.display().to_string();
    let (kind, layout) = classify(data);
    let mut out = Scanned {
        path: path.to_path_buf(),
        kind,
        sections: Vec::new(),
        cubin: None,
        cubin_bytes: None,
        elf_files: usize::from(layout.is_some()),
    };
    if !wanted(kind) {
        return Ok(out);
    }
    match kind {
        FileKind::Object | FileKind::SharedLibrary | FileKind::Executable => {
            // classify gives a host ELF's kind only with its headers.
            if let Some(layout) = layout {
                let release = |at, len| maps.release(path, at, len);
                out.sections =
                    elf::device_sections(&shown, path, 0, data, layout, depth, &release)?;
            }
        }
        FileKind::Archive | FileKind::ThinArchive => {
            (out.sections, out.elf_files) = archive::device_sections(path, data, depth, maps)?;
        }
        FileKind::Fatbin => {
            let (spans, containers) =
                read_containers(data, depth, &mut |_| {}).map_err(|source| {
                    InputError::StandaloneFatbin {
                        path: path.to_path_buf(),
                        source,
                    }
                })?;
            out.sections.push(DeviceSection {
                origin: shown,
                section: String::new(),
                section_index: 0,
                section_size: data.len() as u64,
                file: path.to_path_buf(),
                file_offset: 0,
                elf: None,
                spans,
                containers,
                embedded: false,
            });
        }
        FileKind::Cubin => {
            let info = cubin::read(data).map_err(|e| InputError::Malformed {
                origin: shown,
                message: e.to_string(),
            })?;
            out.cubin = Some(info);
            out.cubin_bytes = Some(data.to_vec());
        }
        FileKind::Store => {}
        FileKind::Other if data.starts_with(&fatpack_format::split::PACK_MAGIC) => {
            return Err(InputError::Pack {
                path: path.to_path_buf(),
            })
        }
        FileKind::Other => {
            return Err(InputError::Unrecognized {
                path: path.to_path_buf(),
                what: why_other(data),
            })
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_pages_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("input.o");
        let data: Vec<u8> = (0..3_000_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let maps = Maps::default();
        let m = maps.get(&path).unwrap();
        assert_eq!(&m[..], &data[..]);
        // Unaligned ranges, the whole file, and ranges that do not fit: advice only.
        maps.release(&path, 4097, 1_000_000);
        assert_eq!(&m[..], &data[..]);
        maps.release_all();
        assert_eq!(&m[..], &data[..]);
        maps.release(&path, 2_999_999, 2);
        maps.release(&path, u64::MAX, 1);
        maps.release(&dir.path().join("never mapped"), 0, 10);
        assert_eq!(&m[..], &data[..]);
    }
}
