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

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads one tar stream into `into`, spooling files under `spool`.
pub(super) fn spool_tar(
    input: &Path,
    tar: impl Read,
    info: bool,
    spool: &Path,
    into: &mut Vec<Entry>,
) -> Result<(), PruneError> {
    let tar_error = |e: std::io::Error| bad(input, format!("its archive does not read: {e}"));
    let mut archive = tar::Archive::new(tar);
    for item in archive.entries().map_err(tar_error)? {
        let mut item = item.map_err(tar_error)?;
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
    Ok(())
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
