//! A folder pruned: copied to a new folder with every fat binary in it pruned. Symlinks
//! stay symlinks, files linked more than once stay one file under each name (a prefix that
//! hard-links `libfoo.so.1` and `libfoo.so.1.2` ships one copy, and so does the pruned one),
//! modes stay; a packed binary's side-file store is written anew beside it.
//!
//! With [`Relocate`] pairs (`--replace-path OLD=NEW`, each the same length), every mention
//! of OLD in a file or a symlink's target becomes NEW, byte for byte: a Nix output copied to
//! its new store path no longer refers to the unpruned one (RUNPATHs, scripts, pkg-config
//! files), and ELF offsets and string tables stay valid because nothing changes length.

mod split;

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::PackageFormat;
use super::{add, prune_with_side};
use crate::commit::Outputs;
use crate::error::io_at;
use crate::prune::{PruneError, PruneReport, Relocate, Selection};

/// A folder: copied to `output` (which must not exist) with every ELF file pruned.
pub(crate) fn prune_tree(
    input: &Path,
    output: &Path,
    sel: &Selection,
    relocate: &Relocate,
    outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let staging = outs.dir(output)?;
    let mut copy = Copy {
        root: input,
        sel,
        outs: &outs,
        relocate,
        report: PruneReport::default(),
        linked: HashMap::new(),
        written: HashSet::new(),
        progress: crate::progress::Progress::new(),
    };
    copy.tree(input, staging.path())?;
    copy.progress.done();
    let mut report = copy.report;
    outs.commit(vec![staging])?;
    report.package = Some(super::Written {
        path: output.to_path_buf(),
        version: None,
        label: None,
        claims: report.runs.capabilities(),
        beside_fat: None,
    });
    Ok(report)
}

/// Copies the tree `dir` into the folder `to`: folders made, with their modes; symlinks
/// made as symlinks, their targets through `link`; each regular file handed to `file`
/// (source, destination, metadata). Anything else is refused. Entries in name order.
pub(super) fn copy_tree(
    dir: &Path,
    to: &Path,
    link: &dyn Fn(PathBuf) -> PathBuf,
    file: &mut dyn FnMut(&Path, &Path, &std::fs::Metadata) -> Result<(), PruneError>,
) -> Result<(), PruneError> {
    for e in super::sorted_entries(dir)? {
        let from = e.path();
        let dest = to.join(e.file_name());
        let meta = from.symlink_metadata().map_err(io_at(&from))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = link(std::fs::read_link(&from).map_err(io_at(&from))?);
            std::os::unix::fs::symlink(&target, &dest).map_err(io_at(&dest))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&dest).map_err(io_at(&dest))?;
            copy_tree(&from, &dest, link, file)?;
            std::fs::set_permissions(&dest, meta.permissions()).map_err(io_at(&dest))?;
        } else if kind.is_file() {
            file(&from, &dest, &meta)?;
        } else {
            return Err(PruneError::Package {
                path: from,
                message: "neither a file, a folder nor a symlink (a device, socket or FIFO \
                          has no place in a package)"
                    .into(),
            });
        }
    }
    Ok(())
}

struct Copy<'a> {
    root: &'a Path,
    sel: &'a Selection,
    outs: &'a Outputs,
    relocate: &'a Relocate,
    report: PruneReport,
    /// Files with more than one link, by (device, inode): where the first name went.
    linked: HashMap<(u64, u64), PathBuf>,
    /// Side-file stores written beside the packed binaries they belong to: the source's
    /// own (older) ones are not copied over them.
    written: HashSet<PathBuf>,
    progress: crate::progress::Progress,
}

impl Copy<'_> {
    fn tree(&mut self, dir: &Path, to: &Path) -> Result<(), PruneError> {
        let relocate = self.relocate;
        let link = |target: PathBuf| {
            use std::os::unix::ffi::OsStringExt;
            let mut bytes = target.into_os_string().into_vec();
            relocate.apply(&mut bytes);
            PathBuf::from(std::ffi::OsString::from_vec(bytes))
        };
        copy_tree(dir, to, &link, &mut |from, dest, meta| {
            if self.written.contains(dest) {
                return Ok(());
            }
            self.file(from, dest, meta)
        })
    }

    fn file(
        &mut self,
        from: &Path,
        dest: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<(), PruneError> {
        let shown = from
            .strip_prefix(self.root)
            .unwrap_or(from)
            .display()
            .to_string();
        self.progress.step(format!("prune: {shown}"));
        let key = (meta.dev(), meta.ino());
        if meta.nlink() > 1 {
            if let Some(first) = self.linked.get(&key) {
                return std::fs::hard_link(first, dest).map_err(|e| io_at(dest)(e).into());
            }
            self.linked.insert(key, dest.to_path_buf());
        }
        // Only an ELF file or an archive can hold device code: anything else (a model, a
        // data set) is copied as it streams, never held whole.
        let pruned = match super::sniff::file_is_binary(from)? {
            true => {
                let data = super::InputBytes::read(from, self.relocate)?;
                let mut one = PruneReport::default();
                prune_with_side(from, &data, self.sel, dest, self.outs, &mut one)?
                    .map(|(tmp, side)| (tmp, side, one))
            }
            false => None,
        };
        match pruned {
            Some((tmp, side, one)) => {
                let after = tmp.as_file().metadata().map_err(io_at(tmp.path()))?.len();
                if let Some(side) = side {
                    let at = side.dest().to_path_buf();
                    side.persist()?;
                    self.written.insert(at);
                }
                // Renamed, not copied: the file keeps its holes.
                std::fs::rename(tmp.path(), dest).map_err(io_at(dest))?;
                add(&mut self.report, shown, meta.len(), after, one);
            }
            None if self.relocate.is_empty() => {
                std::fs::copy(from, dest).map_err(io_at(dest))?;
            }
            None => self.relocate.copy(from, dest).map_err(io_at(dest))?,
        }
        std::fs::set_permissions(dest, meta.permissions()).map_err(io_at(dest))?;
        Ok(())
    }
}

/// A folder, as the package layer sees it ([`PackageFormat`]).
pub(crate) struct Folder;

impl PackageFormat for Folder {
    fn name(&self) -> &'static str {
        "folder"
    }

    fn claims(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn rewrites_paths(&self) -> bool {
        true
    }

    fn prune(
        &self,
        input: &Path,
        output: &Path,
        sel: &Selection,
        opts: &super::Options,
        outs: Outputs,
    ) -> Result<PruneReport, PruneError> {
        prune_tree(input, output, sel, &opts.relocate, outs)
    }

    fn split(
        &self,
        input: &Path,
        into: &Path,
        _effort: super::Effort,
    ) -> Result<super::split::PackageSplit, PruneError> {
        split::split_folder(input, into)
    }

    fn for_each_binary(
        &self,
        input: &Path,
        _scratch: &Path,
        f: super::EachBinary<'_>,
    ) -> Result<(), PruneError> {
        super::members::folder(input, input, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_replaced_across_block_boundaries_and_lengths_must_match() {
        let r = Relocate::parse(&["/nix/store/aaaa-x=/nix/store/bbbb-x".to_string()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        // A mention straddling the 1 MiB block boundary, and one at the very end.
        let mut text = vec![b'.'; (1 << 20) - 5];
        text.extend_from_slice(b"/nix/store/aaaa-x/lib:/nix/store/aaaa-x");
        std::fs::write(&a, &text).unwrap();
        r.copy(&a, &b).unwrap();
        let out = std::fs::read(&b).unwrap();
        assert_eq!(out.len(), text.len());
        assert!(out.ends_with(b"/nix/store/bbbb-x/lib:/nix/store/bbbb-x"));
        assert!(Relocate::parse(&["/a=/bb".to_string()]).is_err());
        assert!(Relocate::parse(&["=".to_string()]).is_err());
    }
}
