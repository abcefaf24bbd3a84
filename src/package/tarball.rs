//! The tar archives inside conda and Debian packages, read and written entry by entry:
//! each file spooled under a numbered name in a scratch folder (never under the name the
//! archive gives), with its sha256; headers (mode, times, owner) kept for writing back.

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::names;
use crate::error::io_at;
use crate::prune::PruneError;

fn bad(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// What an entry of the package is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    File,
    Dir,
    Symlink(String),
    /// A hard link to an earlier entry (its name).
    HardLink(String),
}

/// One entry, spooled: its tar header (mode, times, owner kept), its kind, and for a file
/// where its bytes are.
pub(super) struct Entry {
    /// The name as the archive spells it (written back so).
    pub raw: String,
    /// The name for checks: no `./`, no trailing `/` (`.` for the root folder).
    pub name: String,
    pub header: tar::Header,
    pub kind: Kind,
    /// In which inner archive it was (`.conda`: `info` or `pkg`).
    pub info: bool,
    /// A file: its spool path, sha256 (hex), size.
    pub data: Option<(PathBuf, String, u64)>,
}

impl Entry {
    /// A new regular file `name` whose bytes are in `path` (spooled or written by fatpack):
    /// owner root, time 0, `mode`.
    pub(super) fn new_file(
        name: &str,
        path: PathBuf,
        info: bool,
        mode: u32,
    ) -> Result<Entry, PruneError> {
        let (sha, len) = sha256_file(&path)?;
        let header = fresh_header(tar::EntryType::Regular, mode);
        Ok(Entry {
            raw: name.to_string(),
            name: name.to_string(),
            header,
            kind: Kind::File,
            info,
            data: Some((path, sha, len)),
        })
    }

    /// A new folder `name` (`.` for the root): owner root, time 0, 0755.
    pub(super) fn new_dir(name: &str, info: bool) -> Entry {
        let mut header = fresh_header(tar::EntryType::Directory, 0o755);
        header.set_size(0);
        Entry {
            raw: match name {
                "." => "./".to_string(),
                _ => format!("{name}/"),
            },
            name: name.to_string(),
            header,
            kind: Kind::Dir,
            info,
            data: None,
        }
    }

    /// A new hard link `name` to the file `target` written before it.
    pub(super) fn new_hard_link(name: &str, target: &str, info: bool) -> Entry {
        Entry {
            raw: name.to_string(),
            name: name.to_string(),
            header: fresh_header(tar::EntryType::Link, 0o644),
            kind: Kind::HardLink(target.to_string()),
            info,
            data: None,
        }
    }
}

fn fresh_header(kind: tar::EntryType, mode: u32) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads one tar stream (the package's member `what`, named in errors) into `into`,
/// spooling files under `spool`.
pub(super) fn spool_tar(
    input: &Path,
    what: &str,
    tar: impl Read,
    info: bool,
    spool: &Path,
    into: &mut Vec<Entry>,
) -> Result<(), PruneError> {
    let tar_error = |e: std::io::Error| {
        bad(
            input,
            format!("{what} does not read ({e}): damaged or altered; refused"),
        )
    };
    let mut archive = tar::Archive::new(tar);
    for item in archive.entries().map_err(tar_error)? {
        let mut item = item.map_err(tar_error)?;
        if into.len() >= MAX_ENTRIES {
            return Err(bad(
                input,
                format!(
                    "{what}: more than {MAX_ENTRIES} entries, more than any package prune \
                     takes (each is held while the package is checked); refused"
                ),
            ));
        }
        let raw = item.path_bytes().into_owned();
        let name = String::from_utf8(raw)
            .map_err(|_| bad(input, "an entry whose name is not UTF-8; refused"))?;
        // As written (`./usr/lib/x`: dpkg-deb's spelling) for writing back; without `./`
        // for every check and lookup.
        let raw = name.clone();
        let name = name.strip_prefix("./").unwrap_or(&name).to_string();
        let header = item.header().clone();
        let kind = match header.entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => Kind::File,
            tar::EntryType::Directory => Kind::Dir,
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let target = item
                    .link_name_bytes()
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .ok_or_else(|| bad(input, format!("link {name} has no target")))?;
                match header.entry_type() {
                    tar::EntryType::Symlink => Kind::Symlink(target),
                    _ => Kind::HardLink(target.strip_prefix("./").unwrap_or(&target).to_string()),
                }
            }
            other => {
                return Err(bad(
                    input,
                    format!("{name}: a {other:?} entry has no place in a package; refused"),
                ))
            }
        };
        let root = kind == Kind::Dir && matches!(name.as_str(), "" | "." | "./");
        let unsafe_name = names::unsafe_name(&name, kind == Kind::Dir && name.ends_with('/'));
        if let (false, Some(why)) = (root, unsafe_name) {
            return Err(bad(input, format!("entry {name:?}: {why}; refused")));
        }
        let name = match root {
            true => ".".to_string(),
            false => name.trim_end_matches('/').to_string(),
        };
        let data = match kind {
            Kind::File => {
                let at = spool.join(format!("{}-{}", if info { "i" } else { "d" }, into.len()));
                let mut out =
                    std::io::BufWriter::new(std::fs::File::create(&at).map_err(io_at(&at))?);
                let mut h = <sha2::Sha256 as sha2::Digest>::new();
                let mut buf = vec![0u8; 1 << 16];
                let mut len = 0u64;
                loop {
                    let n = item.read(&mut buf).map_err(tar_error)?;
                    if n == 0 {
                        break;
                    }
                    sha2::Digest::update(&mut h, &buf[..n]);
                    out.write_all(&buf[..n]).map_err(io_at(&at))?;
                    len += n as u64;
                }
                out.flush().map_err(io_at(&at))?;
                Some((at, hex(&sha2::Digest::finalize(h)), len))
            }
            _ => None,
        };
        into.push(Entry {
            raw,
            name,
            header,
            kind,
            info,
            data,
        });
    }
    drain(input, what, archive.into_inner())
}

/// The most entries a package may have: each is held (name, header, where its bytes are
/// spooled) while the package is checked and written, about 2 KB with its manifest line,
/// so this bounds that to about 2 GB. The largest conda packages hold tens of thousands.
const MAX_ENTRIES: usize = 1 << 20;

/// What may follow a tar's end-of-archive blocks in its stream: the zero padding of the
/// last record (GNU tar and dpkg-deb pad to 10240 bytes).
const MAX_TRAILER: u64 = 64 << 10;

/// Reads what is left of a tar's stream to its end, so that its container's own checks run
/// (gzip's CRC-32 and length, xz's and zstd's checksums, bzip2's CRCs, the zip member's
/// CRC-32, all checked at the end of the stream); anything but padding there is refused.
fn drain(input: &Path, what: &str, mut rest: impl Read) -> Result<(), PruneError> {
    let mut buf = [0u8; 1 << 13];
    let mut seen = 0u64;
    loop {
        let n = rest.read(&mut buf).map_err(|e| {
            bad(
                input,
                format!("{what} fails its container's check ({e}): damaged or altered; refused"),
            )
        })?;
        if n == 0 {
            return Ok(());
        }
        seen += n as u64;
        if seen > MAX_TRAILER || buf[..n].iter().any(|&b| b != 0) {
            return Err(bad(
                input,
                format!("{what}: data after the end of its tar archive; refused"),
            ));
        }
    }
}

/// The entries of one package (every inner archive's, in order) checked as a tree: no name
/// twice, every hard link to a file before it in the same archive, every symlink followed
/// through the others and staying inside, nothing written through a symlink
/// ([`names::Links`]). `absolute`: how the format reads an absolute symlink.
pub(super) fn check_tree(
    input: &Path,
    entries: &[Entry],
    absolute: names::Absolute,
) -> Result<(), PruneError> {
    let mut seen: std::collections::HashMap<&str, &Entry> = std::collections::HashMap::new();
    for e in entries {
        if seen.insert(e.name.as_str(), e).is_some() {
            return Err(bad(
                input,
                format!("entry {} is in it twice; refused", e.name),
            ));
        }
        if let Kind::HardLink(t) = &e.kind {
            let to_a_file = seen
                .get(t.as_str())
                .is_some_and(|to| to.data.is_some() && to.info == e.info && to.name != e.name);
            if !to_a_file {
                return Err(bad(
                    input,
                    format!(
                        "entry {}: a hard link to {t:?}, which is not a file before it in its \
                         archive; refused",
                        e.name
                    ),
                ));
            }
        }
    }
    let links = names::Links::new(
        entries.iter().filter_map(|e| match &e.kind {
            Kind::Symlink(t) => Some((e.name.as_str(), t.as_str())),
            _ => None,
        }),
        absolute,
    );
    for e in entries.iter().filter(|e| e.name != ".") {
        if let Some(why) = links.check(&e.name) {
            return Err(bad(input, format!("entry {}: {why}; refused", e.name)));
        }
    }
    Ok(())
}

/// The spooled file that holds the bytes of `e`: its own, or a hard link's target's
/// (checked by [`check_tree`] to be a file before it).
pub(super) fn bytes_of<'a>(
    entries: &'a [Entry],
    e: &'a Entry,
) -> Option<&'a (PathBuf, String, u64)> {
    match (&e.data, &e.kind) {
        (Some(d), _) => Some(d),
        (None, Kind::HardLink(t)) => entries
            .iter()
            .find(|to| to.name == *t && to.info == e.info)?
            .data
            .as_ref(),
        _ => None,
    }
}

/// The ELF files and archives among spooled `entries`: (name, spool file).
pub(super) fn binaries(entries: Vec<Entry>) -> Result<Vec<(String, PathBuf)>, PruneError> {
    let mut out = Vec::new();
    for e in entries {
        let Some((path, ..)) = e.data else { continue };
        if super::sniff::file_is_binary(&path)? {
            out.push((e.name, path));
        }
    }
    Ok(out)
}

pub(super) fn sha256_file(path: &Path) -> Result<(String, u64), PruneError> {
    let mut f = std::fs::File::open(path).map_err(io_at(path))?;
    let mut h = <sha2::Sha256 as sha2::Digest>::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io_at(path))?;
        if n == 0 {
            return Ok((hex(&sha2::Digest::finalize(h)), len));
        }
        sha2::Digest::update(&mut h, &buf[..n]);
        len += n as u64;
    }
}

/// Writes one tar of `entries` (those `pick` selects) to `to`.
pub(super) fn write_tar(
    entries: &[Entry],
    pick: impl Fn(&Entry) -> bool,
    to: impl Write,
) -> std::io::Result<()> {
    let mut b = tar::Builder::new(to);
    b.mode(tar::HeaderMode::Complete);
    for e in entries.iter().filter(|e| pick(e)) {
        let mut h = e.header.clone();
        match &e.kind {
            Kind::File => {
                let (path, _, len) = e.data.as_ref().expect("a file entry has data");
                h.set_size(*len);
                let f = std::fs::File::open(path)?;
                b.append_data(&mut h, &e.raw, BufReader::new(f))?;
            }
            Kind::Dir => {
                h.set_size(0);
                b.append_data(&mut h, &e.raw, std::io::empty())?;
            }
            Kind::Symlink(t) | Kind::HardLink(t) => {
                h.set_size(0);
                b.append_link(&mut h, &e.raw, t)?;
            }
        }
    }
    b.into_inner()?.flush()
}
