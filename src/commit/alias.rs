//! No output may be something the command reads: an input itself (under any name: a hard
//! link, a symlink, `..`), the input's side file or split packs, a folder holding an input
//! (replacing it would destroy the input) or a folder inside an input folder being read.
//! Files are compared as the filesystem knows them, by device and inode.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file or folder as the filesystem knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

fn id_of(p: &Path) -> Option<FileId> {
    let m = std::fs::metadata(p).ok()?;
    Some(FileId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// `path` with symlinks and `..` resolved, also when its last part does not exist yet.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    Some(
        std::fs::canonicalize(super::folder_of(path))
            .ok()?
            .join(name),
    )
}

/// The identities of a path and every folder above it.
fn chain(path: &Path) -> Vec<FileId> {
    resolved(path)
        .map(|p| p.ancestors().filter_map(id_of).collect())
        .unwrap_or_default()
}

/// What a command reads, by identity.
#[derive(Debug, Default)]
pub struct Reads {
    /// Each file or folder read (as the user named it) and its identity.
    files: Vec<(PathBuf, FileId)>,
}

impl Reads {
    /// `inputs`, each with the side file and split packs a packed file is read with
    /// (`<name>.fatpack`, `<name>.<arch>.fatpack`) where they exist.
    pub fn of(inputs: &[&Path]) -> Reads {
        let mut r = Reads::default();
        for &input in inputs {
            // Packs and side files sit beside the name given and beside the file it links to.
            let real = std::fs::canonicalize(input).ok();
            let around = companions(input)
                .into_iter()
                .chain(real.iter().flat_map(|r| companions(r)));
            for p in std::iter::once(input.to_path_buf()).chain(around) {
                if let Some(id) = id_of(&p) {
                    r.files.push((p, id));
                }
            }
        }
        r
    }

    /// The input that writing `dest` would replace, or write into, if any: `dest` or a
    /// folder it is in is read. (The other way round, an input inside `dest`, cannot be
    /// replaced: a file output never replaces a folder, and a folder output is only written
    /// where nothing is.)
    ///
    /// Returns the input and whether `dest` lies inside it (a folder read) rather than being
    /// it.
    pub fn clash(&self, dest: &Path) -> Option<(&Path, bool)> {
        let dest_chain = chain(dest);
        let own = id_of(dest);
        self.files
            .iter()
            .find(|(_, id)| dest_chain.contains(id))
            .map(|(p, id)| (p.as_path(), own != Some(*id)))
    }
}

/// A packed file's side file and split packs: `<name>.fatpack` and `<name>.*.fatpack`.
fn companions(input: &Path) -> Vec<PathBuf> {
    let Some(name) = input.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let dir = super::folder_of(input);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let stem = format!("{name}.");
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&stem) && n.ends_with(".fatpack"))
        })
        .map(|e| dir.join(e.file_name()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Reads;

    #[test]
    fn outputs_that_are_inputs_clash() {
        let d = tempfile::tempdir().unwrap();
        let app = d.path().join("app");
        std::fs::write(&app, b"x").unwrap();
        std::fs::write(d.path().join("app.fatpack"), b"s").unwrap();
        std::fs::write(d.path().join("app.sm_80.fatpack"), b"p").unwrap();
        std::fs::hard_link(&app, d.path().join("hard")).unwrap();
        std::os::unix::fs::symlink(&app, d.path().join("soft")).unwrap();
        let r = Reads::of(&[&app]);
        for clash in ["app", "app.fatpack", "app.sm_80.fatpack", "hard", "soft"] {
            assert!(r.clash(&d.path().join(clash)).is_some(), "{clash}");
        }
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(r.clash(&d.path().join("sub/../app")).is_some());
        // Writing into the input's folder is fine.
        assert!(r.clash(d.path()).is_none());
        for fine in ["other", "app.sm90", "app.fatpack.x"] {
            assert!(r.clash(&d.path().join(fine)).is_none(), "{fine}");
        }
    }

    #[test]
    fn outputs_inside_an_input_folder_clash() {
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        let r = Reads::of(&[&tree]);
        assert_eq!(r.clash(&tree.join("out")).map(|c| c.1), Some(true));
        assert!(r.clash(&d.path().join("out")).is_none());
    }
}
