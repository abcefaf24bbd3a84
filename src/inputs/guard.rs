//! Inputs that change while they are mapped. fatpack maps its inputs (a link's objects and
//! archives, a file to prune or inspect); if another process truncates one meanwhile, the
//! next read past the new end would end fatpack with SIGBUS: no message, temp files left.
//!
//! Instead, every input mapping is registered here, and a SIGBUS inside one is answered by
//! mapping a page of zeros over the page that faulted and noting which input it was: the
//! read goes on (and sees zeros), and the command, before it commits anything
//! ([`crate::commit`], the link's own commit) and when it reports an error, finds
//! [`changed`] set and fails naming the file. A SIGBUS anywhere else keeps its default
//! action.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

/// How many mappings are watched (a link of thousands of inputs maps each once).
const SLOTS: usize = 1 << 14;

static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
/// Slots in use.
static USED: AtomicUsize = AtomicUsize::new(0);
/// The slot of the first input that faulted, plus one (0: none did).
static FAULTED: AtomicUsize = AtomicUsize::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// Each slot's file, read only outside the handler.
static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

/// Watches `bytes` (a mapping of `path`) from now on.
pub fn register(bytes: &[u8], path: &Path) {
    if bytes.is_empty() {
        return;
    }
    INSTALL.call_once(install);
    let mut paths = PATHS.lock().unwrap_or_else(|e| e.into_inner());
    let slot = USED.load(Ordering::Acquire);
    if slot >= SLOTS {
        return;
    }
    paths.push(path.to_path_buf());
    STARTS[slot].store(bytes.as_ptr() as usize, Ordering::Release);
    LENS[slot].store(bytes.len(), Ordering::Release);
    USED.store(slot + 1, Ordering::Release);
}

/// The input that changed (shrank) while it was mapped, if one did.
pub fn changed() -> Option<PathBuf> {
    let slot = FAULTED.load(Ordering::Acquire).checked_sub(1)?;
    let paths = PATHS.lock().unwrap_or_else(|e| e.into_inner());
    paths.get(slot).cloned()
}

fn install() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        PAGE.store(page as usize, Ordering::Relaxed);
    }
    // SAFETY: a zeroed sigaction is a valid starting point; the handler only does what a
    // signal handler may (atomics, mmap, sigaction), and the previous action is not needed
    // (fatpack sets no SIGBUS handler of its own).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

/// The SIGBUS handler: zeros over the page if it is in a watched mapping (the newest one
/// that holds it: an address may be reused after a mapping ends), else the default action.
extern "C" fn on_sigbus(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    let used = USED.load(Ordering::Acquire).min(SLOTS);
    for slot in (0..used).rev() {
        let (start, len) = (
            STARTS[slot].load(Ordering::Acquire),
            LENS[slot].load(Ordering::Acquire),
        );
        if addr < start || addr >= start + len {
            continue;
        }
        let at = addr & !(page - 1);
        // SAFETY: the page lies in a read-only mapping of an input that this process made
        // and still holds; replacing it with an anonymous page of zeros changes nothing
        // but what the faulting read sees (the file's bytes there are gone anyway).
        let done = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if done != libc::MAP_FAILED {
            let _ = FAULTED.compare_exchange(0, slot + 1, Ordering::AcqRel, Ordering::Acquire);
            return;
        }
        break;
    }
    // Not an input of ours (or the page could not be replaced): the default action, taken
    // when the faulting instruction runs again.
    // SAFETY: resetting a signal's action is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
    }
}
