//! A folder pruned: copied to a new folder with every fat binary in it pruned. Symlinks
//! stay symlinks, files linked more than once stay one file under each name (a prefix that
//! hard-links `libfoo.so.1` and `libfoo.so.1.2` ships one copy, and so does the pruned one),
//! modes stay.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{add, prune_member};
use crate::commit::Outputs;
use crate::error::io_at;
use crate::inputs;
use crate::prune::{PruneError, PruneReport, Selection};

/// A folder: copied to `output` (which must not exist) with every ELF file pruned.
pub(in crate::prune) fn prune_tree(
    input: &Path,
    output: &Path,
    sel: &Selection,
    outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let staging = outs.dir(output)?;
    let mut copy = Copy {
        root: input,
        sel,
        outs: &outs,
        report: PruneReport::default(),
        linked: HashMap::new(),
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
    });
    Ok(report)
}

struct Copy<'a> {
    root: &'a Path,
    sel: &'a Selection,
    outs: &'a Outputs,
    report: PruneReport,
    /// Files with more than one link, by (device, inode): where the first name went.
    linked: HashMap<(u64, u64), PathBuf>,
    progress: crate::progress::Progress,
}

impl Copy<'_> {
    fn tree(&mut self, dir: &Path, to: &Path) -> Result<(), PruneError> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(io_at(dir))?
            .collect::<Result<_, _>>()
            .map_err(io_at(dir))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let from = e.path();
            let dest = to.join(e.file_name());
            let meta = from.symlink_metadata().map_err(io_at(&from))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                let target = std::fs::read_link(&from).map_err(io_at(&from))?;
                std::os::unix::fs::symlink(&target, &dest).map_err(io_at(&dest))?;
            } else if kind.is_dir() {
                std::fs::create_dir(&dest).map_err(io_at(&dest))?;
                self.tree(&from, &dest)?;
                std::fs::set_permissions(&dest, meta.permissions()).map_err(io_at(&dest))?;
            } else if kind.is_file() {
                self.file(&from, &dest, &meta)?;
            } else {
                return Err(PruneError::Package {
                    path: from,
                    message: "neither a file, a folder nor a symlink (a device, socket or \
                              FIFO has no place in a package)"
                        .into(),
                });
            }
        }
        Ok(())
    }

    fn file(
        &mut self,
        from: &Path,
        dest: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<(), PruneError> {
        let key = (meta.dev(), meta.ino());
        if meta.nlink() > 1 {
            if let Some(first) = self.linked.get(&key) {
                return std::fs::hard_link(first, dest).map_err(|e| io_at(dest)(e).into());
            }
            self.linked.insert(key, dest.to_path_buf());
        }
        let data = inputs::read_file(from)?;
        let mut one = PruneReport::default();
        match prune_member(from, &data, self.sel, dest, self.outs, &mut one)? {
            Some(tmp) => {
                let after = tmp.as_file().metadata().map_err(io_at(tmp.path()))?.len();
                // Renamed, not copied: the file keeps its holes.
                std::fs::rename(tmp.path(), dest).map_err(io_at(dest))?;
                let shown = from.strip_prefix(self.root).unwrap_or(from);
                let shown = shown.display().to_string();
                add(&mut self.report, shown, meta.len(), after, one);
            }
            None => {
                std::fs::copy(from, dest).map_err(io_at(dest))?;
            }
        }
        std::fs::set_permissions(dest, meta.permissions()).map_err(io_at(dest))?;
        Ok(())
    }
}
