//! fatpack's temp folders never outlive a link: removed when the link ends, when fatpack is
//! sent SIGINT, SIGTERM or SIGHUP (the real linker is stopped with the same signal first,
//! then fatpack dies of it, as an ordinary linker would), and, for what SIGKILL leaves
//! behind, by the next link, which sweeps folders whose process is gone (their names carry
//! its pid).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, Once};

use super::error::io_at;
use super::LinkError;

/// Folders to remove if a signal ends the link.
static FOLDERS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// The real linker's pid while it runs, else 0.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// Held while the real linker is being started: a signal then waits until its pid is known,
/// so that it is never left running.
static SPAWNING: Mutex<()> = Mutex::new(());

/// Prefix of the private folder in `$TMPDIR` and of the temp output's folder beside the
/// output, followed by the pid.
pub(super) const WORK_PREFIX: &str = "fatpack-ld-";
pub(super) const OUT_PREFIX: &str = ".fatpack-out-";

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    FOLDERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the thread that cleans up on a signal (once per process).
fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let _starting = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
                let child = CHILD.load(Ordering::Acquire);
                if child > 0 {
                    // SAFETY: a plain syscall; the pid is the real linker we started.
                    unsafe { libc::kill(child, sig) };
                }
                for f in lock().drain(..) {
                    let _ = std::fs::remove_dir_all(f);
                }
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        });
    });
}

/// A temp folder `<dir>/<prefix><pid>-XXXXXX`, removed on drop or on a signal.
pub(super) fn temp_folder(prefix: &str, dir: &Path) -> Result<tempfile::TempDir, LinkError> {
    install();
    sweep(prefix, dir);
    let t = tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", std::process::id()))
        .tempdir_in(dir)
        .map_err(io_at("creating a temp dir in", dir))?;
    lock().push(t.path().to_path_buf());
    Ok(t)
}

/// Runs the real linker (`start` spawns it), known to the signal handler from its start to
/// its end, and collects its output.
pub(super) fn run_linker(
    start: impl FnOnce() -> Result<std::process::Child, crate::ld::real::RealLdError>,
) -> Result<std::process::Output, LinkError> {
    let child = {
        let _starting = SPAWNING.lock().unwrap_or_else(|e| e.into_inner());
        let c = start()?;
        CHILD.store(i32::try_from(c.id()).unwrap_or(0), Ordering::Release);
        c
    };
    let out = child.wait_with_output();
    CHILD.store(0, Ordering::Release);
    out.map_err(|e| io_at("waiting for", Path::new("the real linker"))(e))
}

/// Removes `<dir>/<prefix><pid>-*` folders whose process no longer exists (left by SIGKILL).
fn sweep(prefix: &str, dir: &Path) {
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
        if pid <= 0 || alive(pid) || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let _ = std::fs::remove_dir_all(e.path());
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
