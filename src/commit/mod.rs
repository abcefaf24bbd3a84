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
//!
//! The link commits the same way under ld's policy ([`Outputs::for_link`]): its output is
//! made by the real linker in a temp folder of its own ([`Outputs::made_by_linker`]); nothing
//! is fsynced (ld never syncs a build output); a lone output replaces an old regular file or
//! symlink by unlinking it first, as ld does (renaming over it makes ext4 flush the whole new
//! file first, a third of a second per 750 MB); a device or FIFO (`-o /dev/null`) is written
//! into. A side-file pair is renamed as any set is: the old pair or the new pair.

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
    let opened;
    let f = match &s.temp {
        Some(Temp::File(f)) => f.as_file(),
        Some(Temp::Made { .. }) => {
            opened = std::fs::File::open(&s.path).map_err(io_at(&s.dest))?;
            &opened
        }
        _ => return Ok(()),
    };
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
    /// A file another program writes (`out` in this folder): the real linker's output.
    Made {
        _folder: tempfile::TempDir,
    },
}

/// One output written under a temp name, waiting for [`Outputs::commit`]; removed if dropped.
pub struct Staged {
    temp: Option<Temp>,
    /// A folder's descriptor, holding its `flock` ([`signals::hold`]).
    _held: Option<std::fs::File>,
    path: PathBuf,
    dest: PathBuf,
    /// The path the signal handler removes (the temp folder of a [`Temp::Made`] file).
    registered: PathBuf,
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

    /// Writes into the temp file (a file output) through a buffer: `write` gets the
    /// buffered writer and gives it back with its result; the buffer is then flushed.
    pub fn write_with<T, E: From<IoError>>(
        &mut self,
        write: impl FnOnce(
            std::io::BufWriter<&mut std::fs::File>,
        ) -> Result<(std::io::BufWriter<&mut std::fs::File>, T), E>,
    ) -> Result<T, E> {
        let dest = self.dest.clone();
        let w = std::io::BufWriter::with_capacity(1 << 20, self.named().as_file_mut());
        let (w, t) = write(w)?;
        w.into_inner().map_err(|e| io_at(&dest)(e.into_error()))?;
        Ok(t)
    }

    /// Puts this output at its destination now, on its own: for a file inside a folder
    /// output that is itself committed later.
    pub fn persist(mut self) -> Result<(), IoError> {
        std::fs::rename(&self.path, &self.dest).map_err(io_at(&self.dest))?;
        if let Some(Temp::File(f)) = self.temp.take() {
            let _ = f.into_temp_path().keep();
        }
        Ok(())
    }

    /// Gives the file the permissions of `like` (an executable stays executable).
    pub fn permissions_of(&self, like: &Path) -> Result<(), IoError> {
        let perms = std::fs::metadata(like).map_err(io_at(like))?.permissions();
        self.as_file()
            .set_permissions(perms)
            .map_err(io_at(&self.dest))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // The temp removes itself as it drops (after this).
        signals::forget(&self.registered);
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
    /// ld's policy ([`Outputs::for_link`]).
    linker: bool,
}

impl Outputs {
    /// For a command that reads `inputs` (their side files and packs included). The thread
    /// that cleans up on a signal starts with the first temp registered (or child started),
    /// not here: a link left to the real linker never needs it.
    pub fn new(inputs: &[&Path]) -> Outputs {
        Outputs {
            reads: alias::Reads::of(inputs),
            swept: Default::default(),
            created: Vec::new(),
            committed: false,
            verbatim: false,
            linker: false,
        }
    }

    /// For `fatpack ld`: outputs committed under ld's policy (module docs). Whether the
    /// output is an input is the link's own check, made as ld makes it.
    pub fn for_link() -> Outputs {
        let mut outs = Outputs::new(&[]);
        outs.linker = true;
        outs
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
            signals::sweep_beside(TEMP_PREFIX, dir);
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
        let (f, path) = signals::register_made(|| {
            let f = b.tempfile_in(dir).map_err(io_at(dir))?;
            let path = f.path().to_path_buf();
            Ok::<_, CommitError>((f, path))
        })?;
        signals::hold(f.as_file());
        remember(&path, dest);
        Ok(Staged {
            temp: Some(Temp::File(f)),
            _held: None,
            registered: path.clone(),
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
        self.temp_dir_in(folder_of(dest), &prefix, dest)
    }

    fn temp_dir_in(&self, dir: &Path, prefix: &str, dest: &Path) -> Result<Staged, CommitError> {
        let (t, path) = signals::register_made(|| {
            let t = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir_in(dir)
                .map_err(io_at(dir))?;
            let path = t.path().to_path_buf();
            Ok::<_, CommitError>((t, path))
        })?;
        let held = std::fs::File::open(&path).map_err(io_at(dir))?;
        signals::hold(&held);
        remember(&path, dest);
        Ok(Staged {
            temp: Some(Temp::Dir(t)),
            _held: Some(held),
            registered: path.clone(),
            path,
            dest: dest.to_path_buf(),
        })
    }

    /// A temp folder beside `dest` in which another program (the real linker) creates the
    /// output: [`Staged::path`] is where it writes, committed as `dest`. For a `dest` that is
    /// a device or a FIFO, the folder is made in `$TMPDIR` and nothing beside `dest`.
    pub fn made_by_linker(&self, dest: &Path) -> Result<Staged, CommitError> {
        let mut s = if special(dest) {
            self.check(dest)?;
            let prefix = format!("{TEMP_PREFIX}{}-", std::process::id());
            self.temp_dir_in(&std::env::temp_dir(), &prefix, dest)?
        } else {
            self.temp_dir(dest)?
        };
        if let Some(Temp::Dir(d)) = s.temp.take() {
            s.temp = Some(Temp::Made { _folder: d });
        }
        s.path = s.path.join("out");
        remember(&s.path, dest);
        Ok(s)
    }

    /// A rewritten binary put in place with the permissions of `like` (an executable stays
    /// executable), after its new side file if it has one (prune, repack).
    pub fn commit_binary(
        self,
        binary: Staged,
        like: &Path,
        side: Option<Staged>,
    ) -> Result<(), CommitError> {
        binary.permissions_of(like)?;
        let mut set: Vec<Staged> = side.into_iter().collect();
        set.push(binary);
        self.commit(set)
    }

    /// Puts every staged output in place, in the order given (each after those it depends
    /// on: stores and packs before the binary that records them), or none of them.
    pub fn commit(mut self, staged: Vec<Staged>) -> Result<(), CommitError> {
        self.commit_set(staged)
    }

    fn commit_set(&mut self, staged: Vec<Staged>) -> Result<(), CommitError> {
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
            if matches!(s.temp, Some(Temp::File(_) | Temp::Made { .. })) && s.dest.is_dir() {
                return Err(CommitError::IsFolder(s.dest.clone()));
            }
            if let (Some(Temp::File(f)), false) = (&s.temp, self.linker) {
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
        // A signal waits for the renames, and once they are done it ends the command with
        // 0: what was asked for is in place ([`signals::committing`]).
        signals::committing(|| match (self.linker, &staged[..]) {
            (true, [one]) => replace_like_ld(one),
            _ => rename_all(self, staged),
        })?;
        for d in dirs.iter().filter(|_| !self.linker) {
            // The renames themselves made durable.
            if let Ok(f) = std::fs::File::open(d) {
                let _ = f.sync_all();
            }
        }
        self.committed = true;
        Ok(())
    }
}

/// Whether `path` exists as something other than a regular file, a symlink or a folder (a
/// device, a FIFO): what ld writes into rather than replaces.
pub fn special(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| !m.is_file() && !m.is_dir() && !m.file_type().is_symlink())
}

/// A lone output put in place as ld puts its own ([`Outputs::for_link`]): a device or FIFO
/// written into, an old regular file or symlink unlinked, then the rename.
fn replace_like_ld(s: &Staged) -> Result<(), CommitError> {
    if special(&s.dest) {
        let mut from = std::fs::File::open(&s.path).map_err(io_at(&s.dest))?;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&s.dest)
            .map_err(io_at(&s.dest))?;
        std::io::copy(&mut from, &mut to).map_err(io_at(&s.dest))?;
        return Ok(());
    }
    match std::fs::remove_file(&s.dest) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_at(&s.dest)(e).into()),
        _ => {}
    }
    // The temp folder (now empty) goes as `s` drops.
    std::fs::rename(&s.path, &s.dest).map_err(|e| io_at(&s.dest)(e).into())
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
            // Its folder, now empty, is removed.
            Some(Temp::Made { .. }) | None => {}
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
