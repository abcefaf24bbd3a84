//! What a signal leaves behind: nothing. Every temp file and folder fatpack creates beside an
//! output or in `$TMPDIR` is registered here while it exists; SIGINT, SIGTERM and SIGHUP remove
//! them (after stopping the real linker, if one runs, with the same signal) and then fatpack
//! dies of the signal, as an ordinary tool would. SIGXFSZ is caught so that the write that
//! crossed the file-size limit fails with `EFBIG` instead of killing the process: the error
//! then names the file and the ordinary error path removes the temps. What SIGKILL leaves
//! is swept by the next run ([`sweep`]): temp names carry their creator's pid, and each
//! temp is held with a shared `flock` while it lives, so that a process in another pid
//! namespace (a container sharing the folder), whose pid looks dead from here, keeps its
//! files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};

/// Paths to remove if a signal ends the process.
static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set when a signal is being handled: the process is about to end by it.
static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Held while outputs are renamed into place; `true` once they all are.
static COMMITTED: Mutex<bool> = Mutex::new(false);
/// The real linker's pid while it runs, else 0.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// Held while a child is being started: a signal then waits until its pid is known, so that
/// it is never left running.
static SPAWNING: Mutex<()> = Mutex::new(());

fn paths() -> MutexGuard<'static, Vec<PathBuf>> {
    PATHS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the thread that cleans up on a signal (once per process).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
        let Ok(mut signals) =
            signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGXFSZ])
        else {
            return;
        };
        std::thread::spawn(move || {
            for sig in signals.forever() {
                if sig == SIGXFSZ {
                    // The write returns EFBIG; the error path cleans up.
                    continue;
                }
                ENDING.store(true, Ordering::SeqCst);
                // A commit under way finishes first (never half of a set of outputs), and none
                // starts after this: the lock is held until the process ends.
                let commit = COMMITTED.lock().unwrap_or_else(|e| e.into_inner());
                let committed = *commit;
                let _starting = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
                let child = CHILD.load(Ordering::Acquire);
                if child > 0 {
                    // SAFETY: a plain syscall; the pid is the child we started.
                    unsafe { libc::kill(child, sig) };
                }
                for p in paths().drain(..) {
                    remove(&p);
                }
                if committed {
                    // The outputs are whole and in place: the command did what it was asked.
                    eprintln!(
                        "fatpack: signal {sig} after the output was put in place; it is \
                         complete"
                    );
                    std::process::exit(0);
                }
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        });
    });
}

fn remove(p: &Path) {
    match p.symlink_metadata() {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir_all(p);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(p);
        }
        Err(_) => {}
    }
}

/// Called by a command that failed, before it says so: if a signal is being handled, the
/// failure is the signal's doing (its clean-up removed what the command was writing), so
/// this waits for the handler to end the process by the signal, as the user asked, rather
/// than report an error the user did not cause.
pub fn yield_to_signal() {
    if ENDING.load(Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

/// Runs `rename` (which puts a command's outputs in place) with signals held off until it
/// returns; once it has succeeded, a signal ends the process with 0 rather than by the
/// signal: the command's work is done (a late SIGTERM must not tell a build it failed).
pub fn committing<T, E>(rename: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    install();
    let mut done = COMMITTED.lock().unwrap_or_else(|e| e.into_inner());
    let out = rename()?;
    *done = true;
    Ok(out)
}

/// Makes a temp with `make` (which returns it and its path) and has it removed if a signal
/// ends the process before [`forget`] is called for its path. Nothing is left between the two
/// for a signal to slip into: the handler is installed before the temp exists, and it waits
/// for the list of paths, held here until this one is on it.
pub fn register_made<T, E>(
    make: impl FnOnce() -> Result<(T, PathBuf), E>,
) -> Result<(T, PathBuf), E> {
    install();
    let mut v = paths();
    let (t, path) = make()?;
    v.push(path.clone());
    Ok((t, path))
}

/// `path` was removed or put in place: a signal no longer concerns it.
pub fn forget(path: &Path) {
    let mut v = paths();
    if let Some(i) = v.iter().rposition(|p| p == path) {
        v.swap_remove(i);
    }
}

/// Runs a child (`start` spawns it) known to the signal handler from its start to its end,
/// and collects its output.
pub fn run_child<E>(
    start: impl FnOnce() -> Result<std::process::Child, E>,
) -> Result<std::io::Result<std::process::Output>, E> {
    Ok(spawn_child(start)?.wait())
}

/// Starts a child (`start` spawns it, its stdout and stderr piped), known to the signal
/// handler until it is waited for. Its output is read as it comes, on two threads, so that
/// a child left running while this process works is never blocked on a full pipe.
pub fn spawn_child<E>(
    start: impl FnOnce() -> Result<std::process::Child, E>,
) -> Result<Running, E> {
    install();
    let mut child = {
        let _starting = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
        let c = start()?;
        CHILD.store(i32::try_from(c.id()).unwrap_or(0), Ordering::Release);
        c
    };
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        r.map(|mut r| {
            std::thread::spawn(move || {
                let mut v = Vec::new();
                r.read_to_end(&mut v).map(|_| v)
            })
        })
    };
    let stdout = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let stderr = drain(child.stderr.take().map(|r| Box::new(r) as _));
    Ok(Running {
        child: Some(child),
        stdout,
        stderr,
    })
}

type Drain = Option<std::thread::JoinHandle<std::io::Result<Vec<u8>>>>;

/// A child started by [`spawn_child`]. Dropped without [`Running::wait`], it is killed and
/// reaped: a child started on a guess that proved wrong leaves nothing running.
pub struct Running {
    child: Option<std::process::Child>,
    stdout: Drain,
    stderr: Drain,
}

impl Running {
    /// Waits for the child to end; its status and everything it wrote.
    pub fn wait(mut self) -> std::io::Result<std::process::Output> {
        let Some(mut child) = self.child.take() else {
            return Err(std::io::Error::other("the child was already waited for"));
        };
        let status = child.wait();
        CHILD.store(0, Ordering::Release);
        let collect = |d: Drain| match d.map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("reading the child's output failed")),
            None => Ok(Vec::new()),
        };
        let (stdout, stderr) = (collect(self.stdout.take()), collect(self.stderr.take()));
        Ok(std::process::Output {
            status: status?,
            stdout: stdout?,
            stderr: stderr?,
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Not yet reaped, so the pid is still this child's.
            let _ = child.kill();
            let _ = child.wait();
            CHILD.store(0, Ordering::Release);
        }
        // The reading threads end when the pipes close: with the child, or, where it left
        // children of its own (an LTO plugin's), with theirs. Nothing waits for them.
    }
}

/// Takes a shared `flock` on `f`, held until it is closed: the temp it names is in use.
pub fn hold(f: &std::fs::File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor the caller owns; no memory is involved. Failure (a
    // filesystem without locks) only means the pid alone protects the file.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
}

/// Whether some process holds `path` ([`hold`]).
fn held(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
    else {
        return false;
    };
    // SAFETY: as in `hold`.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// A temp folder `<dir>/<prefix><pid>-XXXXXX`, held, registered, removed on drop.
pub struct TempFolder {
    dir: tempfile::TempDir,
    _held: std::fs::File,
}

impl TempFolder {
    pub fn new(prefix: &str, dir: &Path) -> std::io::Result<TempFolder> {
        sweep_beside(prefix, dir);
        let (t, path) = register_made(|| {
            let t = tempfile::Builder::new()
                .prefix(&format!("{prefix}{}-", std::process::id()))
                .tempdir_in(dir)?;
            let path = t.path().to_path_buf();
            Ok::<_, std::io::Error>((t, path))
        })?;
        let f = std::fs::File::open(&path)?;
        hold(&f);
        Ok(TempFolder { dir: t, _held: f })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        forget(self.dir.path());
    }
}

/// Sweeps running beside the work ([`sweep_beside`]), joined by [`finish_sweeps`].
static SWEEPS: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

/// [`sweep`] on a thread of its own. Why: a sweep reads the whole folder, and the folders
/// swept are `$TMPDIR` (on a shared build machine, thousands of entries) and the output's
/// (a build folder); the link need not wait for that (0.5 ms of every packed link with
/// 1,400 entries in `/tmp`: BENCHMARKS.md, "The fixed cost of a link that packs"). It never
/// touches this process's temps (their pid is alive, and they are held), so it may run
/// beside their making. [`finish_sweeps`] waits for it before the process ends: the next
/// run still finds the folder swept. Where no thread can be started, it sweeps here.
pub fn sweep_beside(prefix: &str, dir: &Path) {
    let (p, d) = (prefix.to_owned(), dir.to_path_buf());
    match std::thread::Builder::new()
        .name("fatpack-sweep".into())
        .spawn(move || sweep(&p, &d))
    {
        Ok(h) => SWEEPS.lock().unwrap_or_else(|e| e.into_inner()).push(h),
        Err(_) => sweep(prefix, dir),
    }
}

/// Waits for every sweep [`sweep_beside`] started (called as the process ends).
pub fn finish_sweeps() {
    let running = std::mem::take(&mut *SWEEPS.lock().unwrap_or_else(|e| e.into_inner()));
    for h in running {
        let _ = h.join();
    }
}

/// Removes `<dir>/<prefix><pid>-*` files and folders whose process no longer exists (left by
/// SIGKILL or a power cut) and that no process holds.
pub fn sweep(prefix: &str, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid <= 0 || alive(pid) || held(&e.path()) {
            continue;
        }
        remove(&e.path());
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temp of a dead pid is swept unless a process (in another pid namespace, say)
    /// still holds it.
    #[test]
    fn sweep_removes_dead_temps_nobody_holds() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let d = tempfile::tempdir().unwrap();
        let held_path = d.path().join(format!(".t-{dead}-held"));
        let free_path = d.path().join(format!(".t-{dead}-free"));
        std::fs::write(&held_path, b"x").unwrap();
        std::fs::create_dir(&free_path).unwrap();
        let live = d.path().join(format!(".t-{}-mine", std::process::id()));
        std::fs::write(&live, b"x").unwrap();
        let f = std::fs::File::open(&held_path).unwrap();
        hold(&f);
        sweep(".t-", d.path());
        assert!(held_path.exists() && live.exists() && !free_path.exists());
        drop(f);
        sweep(".t-", d.path());
        assert!(!held_path.exists() && live.exists());
    }
}
