//! `fatpack split` of a folder (an installed prefix, a Nix output, an unpacked package)
//! whose binaries fatpack packed: the roles of [`crate::package::split`] as folders, for a packager
//! who makes packages of their own (a Nix derivation's outputs, an RPM's subpackages):
//!
//! - `DIR/host/`: the folder, each packed binary replaced by its host part; symlinks stay
//!   symlinks, hard links stay hard links, modes stay;
//! - `DIR/{label}/` (`sm90`, `compute90`): one architecture's packs at the paths of their
//!   binaries (under every name a hard-linked binary has), to be installed over the host.
//!
//! `DIR` must not exist; it is written whole or not at all.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::commit::Outputs;
use crate::error::io_at;
use crate::package::split::{Found, PackageSplit, Role, SplitPackage};
use crate::prune::PruneError;

/// Splits the folder `input` into the new folder `into` (see the module's doc).
pub fn split_folder(input: &Path, into: &Path) -> Result<PackageSplit, PruneError> {
    let outs = Outputs::new(&[input]);
    outs.check(into)?;
    let staging = outs.dir(into)?;
    let scratch = outs.scratch(into)?;
    let host = staging.path().join("host");
    std::fs::create_dir(&host).map_err(io_at(&host))?;
    let mut walk = Walk {
        root: input,
        scratch: scratch.path(),
        found: Found::default(),
        linked: HashMap::new(),
        count: 0,
        progress: crate::progress::Progress::new(),
    };
    walk.tree(input, &host)?;
    walk.progress.done();
    let aliases = walk.aliases_seen();
    let mut found = walk.found;
    found.check_any(input, "folder")?;
    for (alias, target) in aliases {
        found.hard_link(&alias, &target);
    }
    let mut packages = vec![SplitPackage {
        path: into.join("host"),
        role: Role::Host,
        len: 0,
    }];
    for (kind, label) in found.labels() {
        let dir = staging.path().join(&label);
        for (member, file) in &found.devices[&kind] {
            let dest = dir.join(member);
            make_parents(&dest)?;
            std::fs::rename(file, &dest).map_err(io_at(&dest))?;
        }
        for (alias, target) in found.links.get(&kind).into_iter().flatten() {
            let dest = dir.join(alias);
            make_parents(&dest)?;
            std::fs::hard_link(dir.join(target), &dest).map_err(io_at(&dest))?;
        }
        let len = found.devices[&kind]
            .iter()
            .map(|(m, _)| dir.join(m).metadata().map_or(0, |m| m.len()))
            .sum();
        packages.push(SplitPackage {
            path: into.join(&label),
            role: Role::Device(label),
            len,
        });
    }
    packages[0].len = tree_len(&host)?;
    drop(scratch);
    outs.commit(vec![staging])?;
    Ok(PackageSplit {
        packages,
        loads: found.loads_by_label(),
        split: found.split,
        whole: found.whole,
    })
}

/// Makes the folders above `path` (0755).
fn make_parents(path: &Path) -> Result<(), PruneError> {
    let parent = path.parent().expect("a path inside the output");
    std::fs::create_dir_all(parent).map_err(|e| io_at(parent)(e).into())
}

/// The bytes of the regular files under `dir`, each inode once.
fn tree_len(dir: &Path) -> Result<u64, PruneError> {
    let mut seen = BTreeSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in crate::package::sorted_entries(&d)? {
            let path = e.path();
            let meta = path.symlink_metadata().map_err(io_at(&path))?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() && seen.insert((meta.dev(), meta.ino())) {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

struct Walk<'a> {
    root: &'a Path,
    scratch: &'a Path,
    found: Found,
    /// Files with more than one link, by (device, inode): the first name's path in the
    /// folder and where it went.
    linked: HashMap<(u64, u64), (String, PathBuf, Vec<String>)>,
    count: usize,
    progress: crate::progress::Progress,
}

impl Walk<'_> {
    /// Every second name of a file seen, with its first name: (alias, first).
    fn aliases_seen(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (first, _, aliases) in self.linked.values() {
            out.extend(aliases.iter().map(|a| (a.clone(), first.clone())));
        }
        out.sort();
        out
    }

    fn tree(&mut self, dir: &Path, to: &Path) -> Result<(), PruneError> {
        super::copy_tree(dir, to, &|t| t, &mut |from, dest, meta| {
            self.file(from, dest, meta)
        })
    }

    fn file(
        &mut self,
        from: &Path,
        dest: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<(), PruneError> {
        let rel = from
            .strip_prefix(self.root)
            .unwrap_or(from)
            .to_string_lossy()
            .into_owned();
        self.progress.step(format!("split: {rel}"));
        let key = (meta.dev(), meta.ino());
        if meta.nlink() > 1 {
            if let Some((_, first, aliases)) = self.linked.get_mut(&key) {
                aliases.push(rel);
                return std::fs::hard_link(&*first, dest).map_err(|e| io_at(dest)(e).into());
            }
            self.linked
                .insert(key, (rel.clone(), dest.to_path_buf(), Vec::new()));
        }
        self.count += 1;
        let host = match crate::package::sniff::file_is_binary(from)? {
            true => {
                let into = self.scratch.join(format!("split-{}", self.count));
                // Named as `folder!path` in messages, as a package's members are.
                self.found.member(self.root, &rel, from, &into)?
            }
            false => None,
        };
        match host {
            Some(h) => std::fs::rename(&h, dest).map_err(io_at(dest))?,
            None => {
                std::fs::copy(from, dest).map_err(io_at(dest))?;
            }
        }
        std::fs::set_permissions(dest, meta.permissions()).map_err(io_at(dest))?;
        Ok(())
    }
}
