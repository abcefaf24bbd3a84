//! The packed-output format: what `fatpack ld` leaves in an output and where. The store is
//! the non-allocated [`STORE_SECTION`] of the file (or the side file `<output>.fatpack`), its
//! digest sits in the allocated [`DIGEST_SECTION`] slot the runtime reads, and each fatbin
//! container's place holds a stub naming its store module.
//!
//! One definition of how to find them, used by `fatpack ld` (which writes them, [`write`]),
//! `fatpack prune` and `fatpack inspect`.

mod split_contents;
mod write;

use std::path::{Path, PathBuf};

pub use crate::elf::append_section::OffsetWriter;
pub use crate::elf::store_segment::Mapping;
pub use fatpack_format::link::{DIGEST_SECTION, SIDE_FILE_SUFFIX, STORE_SECTION};
pub use split_contents::{SplitContents, SplitReadError, MISSING};
pub use write::{
    append_store, append_store_in, finish, finish_in, patch_slot, patch_slot_in, replace_store,
};

use crate::inputs::{map_file, DEVICE_SECTIONS};

/// A file read whole (see [`crate::inputs::read_file`]).
pub type Mapped = Vec<u8>;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
    #[error(transparent)]
    Store(#[from] crate::error::StoreAt),
    #[error(
        "{}: the store ({store}) does not belong to this binary: its digest is {found}, the \
         binary records {recorded}; fatpack does not rewrite another build's device code as \
         this binary's",
        path.display()
    )]
    ForeignStore {
        path: PathBuf,
        store: String,
        found: String,
        recorded: String,
    },
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    /// An edit of an ELF file's headers or sections failed.
    #[error(transparent)]
    ElfEdit(#[from] crate::elf::EditError),
}

/// `map_err` for an I/O error about `path`, as an [`OutputError`] (the writers here are
/// generic over their callers' errors, which convert from it).
fn io_err(path: &Path) -> impl Fn(std::io::Error) -> OutputError + '_ {
    move |e| crate::error::io_at(path)(e).into()
}

fn bad(path: &Path, message: impl Into<String>) -> OutputError {
    OutputError::Bad {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// `<path>.fatpack`: where a side-file output keeps its store.
pub fn side_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(SIDE_FILE_SUFFIX);
    PathBuf::from(s)
}

/// Where a packed file's store is.
pub enum StoreBytes<'a> {
    /// Its [`STORE_SECTION`], borrowed from the file's bytes.
    Section(&'a [u8]),
    /// The side file, mapped.
    SideFile { path: PathBuf, map: Mapped },
}

impl StoreBytes<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            StoreBytes::Section(b) => b,
            StoreBytes::SideFile { map, .. } => map,
        }
    }

    /// `.fatpack section` or the side file's path, for reports.
    pub fn describe(&self) -> String {
        match self {
            StoreBytes::Section(_) => format!("{STORE_SECTION} section"),
            StoreBytes::SideFile { path, .. } => path.display().to_string(),
        }
    }

    pub fn is_section(&self) -> bool {
        matches!(self, StoreBytes::Section(_))
    }
}

/// A packed file: its store and the digest its glue slot records.
pub struct Packed<'a> {
    pub store: StoreBytes<'a>,
    pub recorded_digest: [u8; 32],
    /// The whole slot: digest and where the store is.
    pub slot: fatpack_format::link::StoreSlot,
}

impl Packed<'_> {
    /// The store, parsed and checked to be the one the binary at `path` records: a side file
    /// from another build or a swapped section is refused, never rewritten (prune, split,
    /// repack) as if it were this binary's.
    pub fn own_store(&self, path: &Path) -> Result<cubin_store::Store<'_>, OutputError> {
        let store = cubin_store::Store::parse(self.store.bytes()).map_err(|source| {
            OutputError::Store(crate::error::StoreAt {
                path: path.to_path_buf(),
                source,
            })
        })?;
        if store.digest() != self.recorded_digest {
            let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
            return Err(OutputError::ForeignStore {
                path: path.to_path_buf(),
                store: self.store.describe(),
                found: hex(&store.digest()),
                recorded: hex(&self.recorded_digest),
            });
        }
        Ok(store)
    }
}

/// The store and recorded digest of `data` (the bytes of the file at `path`); `None` if the
/// file was not packed by `fatpack ld` (no digest slot).
pub fn locate<'a>(path: &Path, data: &'a [u8]) -> Result<Option<Packed<'a>>, OutputError> {
    // An ELF file of a type fatpack does not write (a core dump, a damaged e_type) is not a
    // packed output, whatever sections it has: rewriting it would give a file no tool reads.
    if data.starts_with(b"\x7fELF") {
        match crate::inputs::classify(data) {
            (crate::inputs::FileKind::Other, _) => {
                return Err(bad(path, crate::inputs::why_other(data)))
            }
            (_, Some(l)) => {
                if let Some(why) = l.bad_segment(data.len() as u64) {
                    return Err(bad(path, format!("a damaged ELF file: {why}")));
                }
            }
            _ => {}
        }
    }
    let Some(range) = slot_range(data) else {
        return Ok(None);
    };
    let (offset, size, _) = range.map_err(|e| bad(path, e))?;
    let Some(slot) = slot_at(data, offset, size) else {
        return Ok(None);
    };
    let recorded_digest = slot.digest;
    let store = match store_range(data) {
        Some((off, len)) => StoreBytes::Section(
            usize::try_from(off)
                .ok()
                .and_then(|o| data.get(o..o.checked_add(usize::try_from(len).ok()?)?))
                .ok_or_else(|| {
                    bad(
                        path,
                        format!("the {STORE_SECTION} section runs past the end of the file"),
                    )
                })?,
        ),
        None => {
            let side = side_path(path);
            let map = crate::inputs::read_file(&side).map_err(|e| bad(path, e.to_string()))?;
            StoreBytes::SideFile { path: side, map }
        }
    };
    Ok(Some(Packed {
        store,
        recorded_digest,
        slot,
    }))
}

/// The slot of a packed file's bytes, `None` if it has none (or an inconsistent one).
pub fn recorded_slot(data: &[u8]) -> Option<fatpack_format::link::StoreSlot> {
    let (offset, size, _) = slot_range(data)?.ok()?;
    slot_at(data, offset, size)
}

/// The bytes of the file's [`STORE_SECTION`], if it has one inside the file.
pub fn section_bytes(data: &[u8]) -> Option<&[u8]> {
    let (off, len) = store_range(data)?;
    data.get(usize::try_from(off).ok()?..)?
        .get(..usize::try_from(len).ok()?)
}

/// `(offset, length)` in the file of its [`STORE_SECTION`].
pub fn store_range(data: &[u8]) -> Option<(u64, u64)> {
    let layout = crate::elf::Layout::parse(data).ok()?;
    let (_, s) = layout.section_by_name(STORE_SECTION)?;
    (s.sh_type.get(crate::elf::LE) != object::elf::SHT_NOBITS).then(|| {
        (
            s.sh_offset.get(crate::elf::LE),
            s.sh_size.get(crate::elf::LE),
        )
    })
}

/// The slot whose bytes [`slot_range`] found at `offset`, `size` bytes long.
pub(crate) fn slot_at(
    data: &[u8],
    offset: u64,
    size: u64,
) -> Option<fatpack_format::link::StoreSlot> {
    let d = data
        .get(usize::try_from(offset).ok()?..)?
        .get(..usize::try_from(size).ok()?)?;
    fatpack_format::link::StoreSlot::read(d)
}

/// `(file offset, size, address)` of the [`DIGEST_SECTION`] slot; None if the file has no
/// such section. Err when its header is inconsistent: the bytes must be where the loader
/// maps the section's address from (else the runtime would read other bytes than these, and
/// a damaged header would turn a patch into a write over, say, the ELF header).
pub fn slot_range(data: &[u8]) -> Option<Result<(u64, u64, u64), String>> {
    slot_range_in(&crate::elf::Layout::parse(data).ok()?)
}

/// [`slot_range`] from headers already read.
pub fn slot_range_in(l: &crate::elf::Layout) -> Option<Result<(u64, u64, u64), String>> {
    use crate::elf::LE;
    let (_, sec) = l.section_by_name(DIGEST_SECTION)?;
    if sec.sh_type.get(LE) == object::elf::SHT_NOBITS {
        return Some(Err(format!("{DIGEST_SECTION} has no file bytes")));
    }
    let loads = l
        .segments
        .iter()
        .filter(|p| p.p_type.get(LE) == object::elf::PT_LOAD)
        .map(|p| (p.p_vaddr.get(LE), p.p_offset.get(LE), p.p_filesz.get(LE)));
    let at = (
        sec.sh_offset.get(LE),
        sec.sh_size.get(LE),
        sec.sh_addr.get(LE),
    );
    Some(slot_where_loaded(at, loads))
}

/// The slot `(offset, size, addr)` if a loaded segment (`(address, file offset, file size)`)
/// maps its address from its bytes, else why not.
fn slot_where_loaded(
    (offset, size, addr): (u64, u64, u64),
    mut loads: impl Iterator<Item = (u64, u64, u64)>,
) -> Result<(u64, u64, u64), String> {
    let consistent = loads.any(|(sa, so, ss)| {
        addr >= sa
            && offset >= so
            && addr - sa == offset - so
            && (offset - so).checked_add(size).is_some_and(|end| end <= ss)
    });
    if consistent && offset >= 64 {
        Ok((offset, size, addr))
    } else {
        Err(format!(
            "the {DIGEST_SECTION} section header is inconsistent (file offset {offset:#x}, \
             address {addr:#x}, {size} bytes: not where any segment maps that address from)"
        ))
    }
}

/// The module names of the stubs in the linked output, in link order: the modules the link
/// really used.
pub fn linked_modules(path: &Path) -> Result<Vec<String>, OutputError> {
    let map = map_file(path).map_err(|e| bad(path, e.to_string()))?;
    stub_modules(path, &map)
}

/// [`linked_modules`] of a linked file's bytes `data` (read from `path`).
pub fn stub_modules(path: &Path, data: &[u8]) -> Result<Vec<String>, OutputError> {
    let layout =
        crate::elf::Layout::parse(data).map_err(|e| bad(path, format!("unreadable ELF: {e}")))?;
    stub_modules_of(path, data, &layout)
}

/// [`stub_modules`] of a linked file's bytes whose headers `layout` are already parsed.
pub fn stub_modules_of(
    path: &Path,
    data: &[u8],
    layout: &crate::elf::Layout,
) -> Result<Vec<String>, OutputError> {
    let mut out = Vec::new();
    for name in DEVICE_SECTIONS {
        let Some((index, _)) = layout.section_by_name(name) else {
            continue;
        };
        let bytes = layout
            .section_data(data, index)
            .map_err(|e| bad(path, e.to_string()))?;
        out.extend(stubs_in(path, name, bytes)?);
    }
    Ok(out)
}

/// [`linked_modules`] of a file already open, its headers as they are in memory.
pub fn linked_modules_in(elf: &crate::elf::OpenElf) -> Result<Vec<String>, OutputError> {
    let mut out = Vec::new();
    for name in DEVICE_SECTIONS {
        let Some((index, _)) = elf.layout.section_by_name(name) else {
            continue;
        };
        let data = elf.section_bytes(index)?;
        out.extend(stubs_in(&elf.path, name, &data)?);
    }
    Ok(out)
}

/// The module names of the stubs section `name` holds. Anything but stubs there is device
/// code that escaped rewriting: refused rather than ship a binary that registers it unpacked.
fn stubs_in(path: &Path, name: &str, data: &[u8]) -> Result<Vec<String>, OutputError> {
    let stubs = fatpack_format::stub::parse_all(data).map_err(|e| {
        bad(
            path,
            format!("section {name} holds device code that was not packed ({e})"),
        )
    })?;
    Ok(stubs.into_iter().map(|s| s.module.to_owned()).collect())
}
