//! One way every command that writes (link, prune, repack, split, join, extract) puts its
//! outputs in place, so that none of them can leave a half-changed set, a temp file, or a
//! destroyed input behind:
//!
//! - [`Outputs::new`] records what the command reads ([`alias`]); an output that would
//!   replace any of it is refused before anything is written.
//! - Each output is written under a temp name beside its destination,
//!   `.fatpack-tmp-<pid>-XXXXXX` ([`Outputs::file`], [`Outputs::dir`]): removed on drop, on
//!   SIGINT/SIGTERM/SIGHUP ([`signals`]), and by the next run in that folder if SIGKILL left
//!   it (the pid is dead).
//! - The caller verifies everything it wrote, then [`Outputs::commit`] renames the set in
//!   the order given (stores and packs first, the binary that records them last), holding a
//!   lock on each destination folder so that concurrent writers of one output take turns
//!   ([`lock`]). Each rename replaces its file atomically (a reader sees the old file or the
//!   new one); a rename that fails puts the earlier ones back: the old set or the new set.
//! - Output folders the command created are removed again when it fails.

mod alias;
pub mod lock;
pub mod signals;

use std::path::{Path, PathBuf};

use crate::error::{io_at, IoError};

/// The start of every temp name fatpack gives a file or folder beside an output; the pid
/// follows.
pub const TEMP_PREFIX: &str = ".fatpack-tmp-";

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(
        "{}: the output must not be the input: writing it would replace {}, which this \
         command reads (fatpack never modifies its inputs)",
        output.display(),
        input.display()
    )]
    OutputIsInput { output: PathBuf, input: PathBuf },
    #[error(transparent)]
    Input(crate::inputs::InputError),
    #[error(
        "{}: lies inside {}, a folder this command reads: write the output outside it \
         (fatpack never modifies its inputs)",
        output.display(),
        input.display()
    )]
    OutputInsideInput { output: PathBuf, input: PathBuf },
    #[error("{}: two outputs of this command would have this name", .0.display())]
    SameOutputTwice(PathBuf),
    #[error("{}: is a folder; the output is a file", .0.display())]
    IsFolder(PathBuf),
    #[error("{}: exists; a folder output is written only where nothing is", .0.display())]
    FolderExists(PathBuf),
    #[error(
        "{}: appeared while this command worked (another command wrote it?); a folder output \
         is written only where nothing is, so nothing was written",
        .0.display()
    )]
    FolderAppeared(PathBuf),
    #[error("{}: its folder {} does not exist (make it first)", output.display(), folder.display())]
    NoFolder { output: PathBuf, folder: PathBuf },
    #[error(
        "{}: the output fatpack wrote does not hold together ({why}); nothing was written. \
         The input has damage fatpack did not detect, or this is a fatpack bug",
        dest.display()
    )]
    Unsound { dest: PathBuf, why: String },
    #[error(transparent)]
    Io(#[from] IoError),
}

/// The check every host ELF output passes before it is put in place, whoever wrote it: its
/// headers read and each loaded segment lies within the file. (Each writer also reads back
/// what it wrote in its own terms.)
fn check_written(s: &Staged) -> Result<(), CommitError> {
    let Some(Temp::File(f)) = &s.temp else {
        return Ok(());
    };
    let f = f.as_file();
    let mut magic = [0u8; 4];
    if std::os::unix::fs::FileExt::read_exact_at(f, &mut magic, 0).is_err() || &magic != b"\x7fELF"
    {
        return Ok(());
    }
    let unsound = |why: String| CommitError::Unsound {
        dest: s.dest.clone(),
        why,
    };
    let len = f.metadata().map_err(io_at(&s.dest))?.len();
    let layout = crate::elf::Layout::read(f).map_err(|e| unsound(e.to_string()))?;
    match layout.bad_segment(len) {
        Some(why) => Err(unsound(why)),
        None => Ok(()),
    }
}

/// Every temp path of this process and the output it stands for, kept for messages.
static NAMES: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Messages about `temp` are about `dest` ([`user_names`]).
pub fn remember(temp: &Path, dest: &Path) {
    NAMES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((temp.display().to_string(), dest.display().to_string()));
}

/// `message` with every temp path fatpack made replaced by the output it was written for:
/// errors found while checking a temp file name the user's file.
pub fn user_names(message: &str) -> String {
    let names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let mut m = message.to_string();
    // Longest first: a temp folder's path is a prefix of the files in it.
    let mut sorted: Vec<&(String, String)> = names.iter().collect();
    sorted.sort_by_key(|(t, _)| std::cmp::Reverse(t.len()));
    for (temp, dest) in sorted {
        m = m.replace(temp.as_str(), dest);
    }
    m
}

/// The folder a path names its file in (`.` for a bare name).
pub fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

enum Temp {
    File(tempfile::NamedTempFile),
    Dir(tempfile::TempDir),
}

/// One output written under a temp name, waiting for [`Outputs::commit`]; removed if dropped.
pub struct Staged {
    temp: Option<Temp>,
    /// A folder's descriptor, holding its `flock` ([`signals::hold`]).
    _held: Option<std::fs::File>,
    path: PathBuf,
    dest: PathBuf,
}

impl Staged {
    /// Where the output is being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it goes on commit.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The temp file (a file output).
    pub fn named(&mut self) -> &mut tempfile::NamedTempFile {
        match &mut self.temp {
            Some(Temp::File(f)) => f,
            _ => unreachable!("a folder output has no file"),
        }
    }

    pub fn as_file(&self) -> &std::fs::File {
        match &self.temp {
            Some(Temp::File(f)) => f.as_file(),
            _ => unreachable!("a folder output has no file"),
        }
    }

    /// Gives the file the permissions of `like` (an executable stays executable).
    pub fn permissions_of(&self, like: &Path) -> Result<(), IoError> {
        let perms = std::fs::metadata(like).map_err(io_at(like))?.permissions();
        self.as_file()
            .set_permissions(perms)
            .map_err(io_at(&self.dest))
    }

    /// The temp file as a store writer (a side file).
    pub fn into_store(mut self) -> cubin_store::AtomicStoreFile {
        let Some(Temp::File(f)) = self.temp.take() else {
            unreachable!("a folder output has no file")
        };
        // Still registered with the signal handler: the file lives on inside the writer.
        cubin_store::AtomicStoreFile::with_temp(f, self.dest.clone())
    }

    /// A store writer's finished file, back in the set.
    pub fn from_store(store: cubin_store::AtomicStoreFile) -> Result<Staged, IoError> {
        let dest = store.destination().to_path_buf();
        let f = store.into_temp().map_err(io_at(&dest))?;
        Ok(Staged {
            path: f.path().to_path_buf(),
            temp: Some(Temp::File(f)),
            _held: None,
            dest,
        })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // The temp removes itself as it drops (after this).
        signals::forget(&self.path);
    }
}

/// The outputs of one command run.
pub struct Outputs {
    reads: alias::Reads,
    swept: std::cell::RefCell<Vec<PathBuf>>,
    /// Output folders this run created, removed again unless it commits.
    created: Vec<PathBuf>,
    committed: bool,
    /// Outputs are the input's own bytes (extract's entries), not files fatpack made: not
    /// judged by [`check_written`].
    verbatim: bool,
}

impl Outputs {
    /// For a command that reads `inputs` (their side files and packs included).
    pub fn new(inputs: &[&Path]) -> Outputs {
        signals::install();
        Outputs {
            reads: alias::Reads::of(inputs),
            swept: Default::default(),
            created: Vec::new(),
            committed: false,
            verbatim: false,
        }
    }

    /// For a command whose outputs are bytes of its input as they are (`extract`: a
    /// damaged cubin is written as the input holds it, for cuobjdump to judge).
    pub fn verbatim(mut self) -> Outputs {
        self.verbatim = true;
        self
    }

    /// Refuses `dest` if writing it would replace something this command reads.
    pub fn check(&self, dest: &Path) -> Result<(), CommitError> {
        let output = dest.to_path_buf();
        match self.reads.clash(dest) {
            Some((input, false)) => Err(CommitError::OutputIsInput {
                output,
                input: input.to_path_buf(),
            }),
            Some((input, true)) => Err(CommitError::OutputInsideInput {
                output,
                input: input.to_path_buf(),
            }),
            None => Ok(()),
        }
    }

    /// Creates the output folder `dir` (and those above it) if missing; those it created are
    /// removed again if the command fails.
    pub fn folder(&mut self, dir: &Path) -> Result<(), CommitError> {
        self.check(dir)?;
        let mut missing: Vec<PathBuf> = dir
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty() && a.symlink_metadata().is_err())
            .map(Path::to_path_buf)
            .collect();
        std::fs::create_dir_all(dir).map_err(io_at(dir))?;
        missing.reverse();
        self.created.extend(missing);
        Ok(())
    }

    /// Checks `dest` and sweeps its folder (once); the prefix of this process's temp names.
    fn prepare(&self, dest: &Path) -> Result<String, CommitError> {
        self.check(dest)?;
        let dir = folder_of(dest);
        // Said in the user's words, before a temp name in it could be.
        if !dir.is_dir() {
            return Err(CommitError::NoFolder {
                output: dest.to_path_buf(),
                folder: dir.to_path_buf(),
            });
        }
        let mut swept = self.swept.borrow_mut();
        if !swept.iter().any(|d| d == dir) {
            signals::sweep(TEMP_PREFIX, dir);
            swept.push(dir.to_path_buf());
        }
        Ok(format!("{TEMP_PREFIX}{}-", std::process::id()))
    }

    /// A temp file beside `dest` for the output `dest`.
    pub fn file(&self, dest: &Path) -> Result<Staged, CommitError> {
        let prefix = self.prepare(dest)?;
        let dir = folder_of(dest);
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix);
        {
            // What any created file gets: the umask decides.
            use std::os::unix::fs::PermissionsExt;
            b.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let f = b.tempfile_in(dir).map_err(io_at(dir))?;
        signals::hold(f.as_file());
        let path = f.path().to_path_buf();
        signals::register(&path);
        remember(&path, dest);
        Ok(Staged {
            temp: Some(Temp::File(f)),
            _held: None,
            path,
            dest: dest.to_path_buf(),
        })
    }

    /// A temp folder beside `dest` for the folder output `dest` (which must not exist).
    pub fn dir(&self, dest: &Path) -> Result<Staged, CommitError> {
        if dest.symlink_metadata().is_ok() {
            return Err(CommitError::FolderExists(dest.to_path_buf()));
        }
        self.temp_dir(dest)
    }

    /// A temp folder for work files beside `near` (an output), removed when dropped.
    pub fn scratch(&self, near: &Path) -> Result<Staged, CommitError> {
        self.temp_dir(near)
    }

    fn temp_dir(&self, dest: &Path) -> Result<Staged, CommitError> {
        let prefix = self.prepare(dest)?;
        let dir = folder_of(dest);
        let t = tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir_in(dir)
            .map_err(io_at(dir))?;
        let path = t.path().to_path_buf();
        let held = std::fs::File::open(&path).map_err(io_at(dir))?;
        signals::hold(&held);
        signals::register(&path);
        remember(&path, dest);
        Ok(Staged {
            temp: Some(Temp::Dir(t)),
            _held: Some(held),
            path,
            dest: dest.to_path_buf(),
        })
    }

    /// A rewritten binary put in place with the permissions of `like` (an executable stays
    /// executable), after its new side file if it has one (prune, repack).
    pub fn commit_binary(
        self,
        binary: Staged,
        like: &Path,
        side: Option<cubin_store::AtomicStoreFile>,
    ) -> Result<(), CommitError> {
        binary.permissions_of(like)?;
        let mut set = Vec::new();
        if let Some(side) = side {
            set.push(Staged::from_store(side)?);
        }
        set.push(binary);
        self.commit(set)
    }

    /// Puts every staged output in place, in the order given (each after those it depends
    /// on: stores and packs before the binary that records them), or none of them.
    pub fn commit(mut self, staged: Vec<Staged>) -> Result<(), CommitError> {
        // An input that shrank while it was mapped was read as zeros: nothing made from it
        // is put in place.
        if let Some(e) = crate::inputs::changed_input() {
            return Err(CommitError::Input(e));
        }
        for (i, s) in staged.iter().enumerate() {
            if staged[..i].iter().any(|t| t.dest == s.dest) {
                return Err(CommitError::SameOutputTwice(s.dest.clone()));
            }
            // Checked again: an earlier output of this run may have made a folder there.
            self.check(&s.dest)?;
            if let Some(Temp::File(f)) = &s.temp {
                if s.dest.is_dir() {
                    return Err(CommitError::IsFolder(s.dest.clone()));
                }
                f.as_file().sync_all().map_err(io_at(&s.dest))?;
            }
            if !self.verbatim {
                check_written(s)?;
            }
        }
        let mut dirs: Vec<PathBuf> = staged
            .iter()
            .map(|s| folder_of(&s.dest).to_path_buf())
            .collect();
        dirs.sort();
        dirs.dedup();
        let _locks = dirs
            .iter()
            .map(|d| lock::FolderLock::take(d))
            .collect::<Result<Vec<_>, _>>()?;
        rename_all(&self, staged)?;
        for d in &dirs {
            // The renames themselves made durable.
            if let Ok(f) = std::fs::File::open(d) {
                let _ = f.sync_all();
            }
        }
        self.committed = true;
        Ok(())
    }
}

/// The renames of [`Outputs::commit`]: with more than one output, each existing destination
/// first gets a second name, to be put back if a later rename fails.
fn rename_all(outs: &Outputs, mut staged: Vec<Staged>) -> Result<(), CommitError> {
    // A second name for each file about to be replaced (a hard link, or a copy where the
    // filesystem has none): the destination itself never disappears, so a reader opening
    // it meanwhile gets the old file or the new one.
    let mut aside: Vec<(PathBuf, Staged)> = Vec::new();
    if staged.len() > 1 {
        for s in &staged {
            if s.dest.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                let b = outs.file(&s.dest)?;
                let _ = std::fs::remove_file(b.path());
                if std::fs::hard_link(&s.dest, b.path()).is_err() {
                    std::fs::copy(&s.dest, b.path()).map_err(io_at(&s.dest))?;
                }
                aside.push((s.dest.clone(), b));
            }
        }
    }
    let undo = |done: &[PathBuf], aside: &mut Vec<(PathBuf, Staged)>| {
        for d in done {
            if let Some(i) = aside.iter().position(|(dest, _)| dest == d) {
                let (dest, b) = aside.swap_remove(i);
                let _ = std::fs::rename(b.path(), &dest);
            } else if d.is_dir() {
                let _ = std::fs::remove_dir_all(d);
            } else {
                let _ = std::fs::remove_file(d);
            }
        }
    };
    let mut done = Vec::new();
    for s in &mut staged {
        if let Err(e) = std::fs::rename(&s.path, &s.dest) {
            undo(&done, &mut aside);
            // A folder output appeared while this command worked (another one wrote it):
            // rename(2) says only "Directory not empty".
            let folder = matches!(s.temp, Some(Temp::Dir(_)));
            if folder && matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) {
                return Err(CommitError::FolderAppeared(s.dest.clone()));
            }
            return Err(io_at(&s.dest)(e).into());
        }
        done.push(s.dest.clone());
        // In place: nothing to remove on drop.
        match s.temp.take() {
            Some(Temp::File(f)) => {
                let _ = f.into_temp_path().keep();
            }
            Some(Temp::Dir(d)) => {
                let _ = d.keep();
            }
            None => {}
        }
    }
    // `aside` (the previous files) are removed as they drop.
    Ok(())
}

impl Drop for Outputs {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        for d in self.created.iter().rev() {
            // Only if empty: never what another process put there meanwhile.
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two folder prunes into one new folder: the loser is told what happened, and the
    /// winner's folder is left as it wrote it.
    #[test]
    fn a_folder_output_that_appears_meanwhile_is_named_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("out");
        let outs = Outputs::new(&[]);
        let staged = outs.dir(&dest).unwrap();
        std::fs::write(staged.path().join("mine"), b"1").unwrap();
        std::fs::create_dir(&dest).unwrap();
        std::fs::write(dest.join("theirs"), b"2").unwrap();
        let e = outs.commit(vec![staged]).unwrap_err();
        assert!(matches!(e, CommitError::FolderAppeared(_)), "{e}");
        assert!(e.to_string().contains("out: appeared while"), "{e}");
        assert_eq!(std::fs::read(dest.join("theirs")).unwrap(), b"2");
        assert!(!dest.join("mine").exists());
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "temp folders left: {left:?}");
    }
}
