//! The binaries inside a package, for readers that look rather than rewrite (`inspect`):
//! every ELF file or archive of a folder as it lies, of a wheel, conda or Debian package spooled
//! to a scratch folder under a numbered name (a member's name never reaches the file
//! system).

use std::io::{BufReader, Write};

use super::sniff::{file_is_binary, is_binary, read_head};
use std::path::Path;

use super::conda;
use crate::error::io_at;
use crate::prune::PruneError;

/// What kind of package `path` is, if one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageKind {
    Folder,
    Wheel,
    Conda,
    Deb,
}

impl PackageKind {
    pub fn of(path: &Path) -> Option<PackageKind> {
        if path.is_dir() {
            Some(PackageKind::Folder)
        } else if super::wheel::is_wheel_name(path) {
            Some(PackageKind::Wheel)
        } else if super::deb::is_deb_name(path) {
            Some(PackageKind::Deb)
        } else {
            conda::format_of(path).map(|_| PackageKind::Conda)
        }
    }

    /// For messages: `folder`, `wheel`, `conda package`, `Debian package`.
    pub fn name(self) -> &'static str {
        match self {
            PackageKind::Folder => "folder",
            PackageKind::Wheel => "wheel",
            PackageKind::Conda => "conda package",
            PackageKind::Deb => "Debian package",
        }
    }
}

/// Calls `f(name in the package, file)` for every ELF file or archive in the package `input`,
/// in the package's order (a folder's: by name); `scratch` holds what is spooled.
pub fn for_each_binary(
    input: &Path,
    scratch: &Path,
    f: &mut dyn FnMut(&str, &Path) -> Result<(), PruneError>,
) -> Result<(), PruneError> {
    match PackageKind::of(input) {
        Some(PackageKind::Folder) => folder(input, input, f),
        Some(PackageKind::Wheel) => wheel(input, scratch, f),
        Some(PackageKind::Conda) => {
            let format = conda::format_of(input).expect("a conda package's name");
            for (name, path) in conda::spool_binaries(input, format, scratch)? {
                f(&name, &path)?;
            }
            Ok(())
        }
        Some(PackageKind::Deb) => {
            for (name, path) in super::deb::spool_binaries(input, scratch)? {
                f(&name, &path)?;
            }
            Ok(())
        }
        None => Ok(()),
    }
}

fn folder(
    root: &Path,
    dir: &Path,
    f: &mut dyn FnMut(&str, &Path) -> Result<(), PruneError>,
) -> Result<(), PruneError> {
    for e in super::sorted_entries(dir)? {
        let path = e.path();
        let kind = e.file_type().map_err(io_at(&path))?;
        if kind.is_dir() {
            folder(root, &path, f)?;
        } else if kind.is_file() && file_is_binary(&path)? {
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string();
            f(&name, &path)?;
        }
    }
    Ok(())
}

fn wheel(
    input: &Path,
    scratch: &Path,
    f: &mut dyn FnMut(&str, &Path) -> Result<(), PruneError>,
) -> Result<(), PruneError> {
    let bad = |m: String| PruneError::Package {
        path: input.to_path_buf(),
        message: m,
    };
    let file = std::fs::File::open(input).map_err(io_at(input))?;
    let mut zip =
        zip::ZipArchive::new(BufReader::new(file)).map_err(|e| bad(super::zip_problem(&e)))?;
    super::zip_layout::check(input, &mut zip)?;
    for i in 0..zip.len() {
        let mut m = zip
            .by_index(i)
            .map_err(|e| bad(format!("member {i}: {e}")))?;
        if m.is_dir() {
            continue;
        }
        let name = m.name().to_string();
        let (head, got) = read_head(&mut m).map_err(|e| bad(format!("{name}: {e}")))?;
        if !is_binary(&head[..got]) {
            continue;
        }
        let at = scratch.join(format!("member-{i}"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&at).map_err(io_at(&at))?);
        out.write_all(&head[..got]).map_err(io_at(&at))?;
        std::io::copy(&mut m, &mut out).map_err(|e| bad(format!("{name}: {e}")))?;
        out.flush().map_err(io_at(&at))?;
        drop(out);
        f(&name, &at)?;
        std::fs::remove_file(&at).map_err(io_at(&at))?;
    }
    Ok(())
}
