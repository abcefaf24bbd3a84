//! Device code inside `ar` archives, regular and thin.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use object::read::archive::ArchiveFile;

use std::sync::Arc;

use super::{classify, elf, Depth, DeviceSection, FileKind, InputError, Maps};

/// A member's bytes: inside the archive, or (thin archives) in a file of its own.
pub enum MemberBytes<'a> {
    Inline(&'a [u8]),
    Mapped(Arc<memmap2::Mmap>),
}

impl std::ops::Deref for MemberBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            MemberBytes::Inline(b) => b,
            MemberBytes::Mapped(m) => m,
        }
    }
}

/// One archive member, and where its bytes are on disk.
pub struct Member<'a> {
    /// The name as the archive has it (bytes: not always UTF-8).
    pub name: Vec<u8>,
    /// `archive(member)`, for messages and module names.
    pub origin: String,
    pub bytes: MemberBytes<'a>,
    /// The file holding the bytes, and their `[start, end)` in it.
    pub file: PathBuf,
    pub range: (u64, u64),
}

/// The file of the thin archive `archive`'s member `name`: thin members name their file
/// relative to the archive's directory.
pub fn thin_member_path(archive: &Path, name: &[u8]) -> PathBuf {
    archive
        .parent()
        .unwrap_or(Path::new("."))
        .join(std::ffi::OsStr::from_bytes(name))
}

/// The members of the archive `data` (read from `path`), in order. `shown` names the archive
/// in origins; thin members' files are mapped through `maps`.
pub fn members<'a>(
    path: &Path,
    shown: &str,
    data: &'a [u8],
    maps: &Maps,
) -> Result<Vec<Member<'a>>, InputError> {
    let malformed = |message: String| InputError::Malformed {
        origin: path.display().to_string(),
        message,
    };
    let archive = ArchiveFile::parse(data).map_err(|e| malformed(format!("bad archive: {e}")))?;
    let mut out = Vec::new();
    let mut released_to = 0u64;
    for member in archive.members() {
        let member = member.map_err(|e| malformed(format!("bad archive member: {e}")))?;
        let raw_name = member.name().to_vec();
        let name = String::from_utf8_lossy(&raw_name).into_owned();
        let origin = format!("{shown}({name})");
        let (bytes, file, range) = if member.is_thin() {
            let member_path = thin_member_path(path, &raw_name);
            let map = maps.get(&member_path).map_err(|e| InputError::Malformed {
                origin: origin.clone(),
                message: format!("the thin archive's member file: {e}"),
            })?;
            let len = map.len() as u64;
            (MemberBytes::Mapped(map), member_path, (0, len))
        } else {
            let bytes = member
                .data(data)
                .map_err(|e| malformed(format!("member {name}: {e}")))?;
            let (off, size) = member.file_range();
            // Reading each member's header maps whole page-cache folios around it (2 MB
            // when `cat` or readahead filled the cache): let everything before this member's
            // data go, or walking the headers of an 831 MB archive leaves most of it resident.
            maps.release(path, released_to, off.saturating_sub(released_to));
            released_to = released_to.max(off);
            (
                MemberBytes::Inline(bytes),
                path.to_path_buf(),
                (off, off + size),
            )
        };
        out.push(Member {
            name: raw_name,
            origin,
            bytes,
            file,
            range,
        });
    }
    Ok(out)
}

/// The device sections of every member, and how many members are host ELF files.
pub(super) fn device_sections(
    path: &Path,
    data: &[u8],
    depth: Depth,
    maps: &Maps,
) -> Result<(Vec<DeviceSection>, usize), InputError> {
    let shown = path.display().to_string();
    let members = members(path, &shown, data, maps)?;
    // Members are read on every CPU (static cuBLAS: 0.13 s for 3,000 members on one), and
    // their sections kept in member order.
    let scanned = crate::parallel::map_ordered(&members, |m| {
        let mut found = Vec::new();
        let release = |at, len| maps.release(&m.file, at, len);
        let elf = scan_member(m, depth, &release, &mut found);
        // A large archive (static cuBLAS: 831 MB) would otherwise be resident by the end of
        // its scan; a no-op for a file `maps` did not map.
        maps.release(&m.file, m.range.0, m.bytes.len() as u64);
        elf.map(|n| (found, n))
    });
    let (mut out, mut elf_files) = (Vec::new(), 0);
    for r in scanned {
        let (found, n) = r?;
        out.extend(found);
        elf_files += n;
    }
    Ok((out, elf_files))
}

fn scan_member(
    m: &Member,
    depth: Depth,
    release: &dyn Fn(u64, u64),
    out: &mut Vec<DeviceSection>,
) -> Result<usize, InputError> {
    if let (FileKind::Object | FileKind::SharedLibrary | FileKind::Executable, Some(layout)) =
        classify(&m.bytes)
    {
        out.extend(elf::device_sections(
            &m.origin, &m.file, m.range.0, &m.bytes, layout, depth, release,
        )?);
        return Ok(1);
    }
    Ok(0)
}
