//! The binaries inside a folder or a wheel, for readers that look rather than rewrite
//! (`inspect`, through [`super::kind::PackageFormat::for_each_binary`]): every ELF file or
//! archive of a folder as it lies, of a wheel spooled to a scratch folder under a numbered
//! name (a member's name never reaches the file system). Conda and Debian packages spool
//! theirs in conda.rs and deb.rs.

use std::io::{BufReader, Write};

use super::sniff::{file_is_binary, is_binary, read_head};
use std::path::Path;

use crate::error::io_at;
use crate::prune::PruneError;

/// Every binary of the folder `root` (walked from `dir`), by its path under `root`.
pub(super) fn folder(
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

/// Every binary of the wheel `input`, spooled under `scratch` one at a time.
pub(super) fn wheel(
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
