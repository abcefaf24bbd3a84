//! The end of a big link, left behind: the process the build waits for ends as soon as the
//! output is in place, and a child that did the work ends after it. Letting go of what a
//! link that read a gigabyte of static libraries mapped and allocated, and the kernel's
//! teardown of the process, took 9-14 ms after static cuBLAS's link on the GPU machine, and
//! 2-3 ms are left with the fork (BENCHMARKS.md): time the build would otherwise wait for.
//! mold does the same (its `--fork`).
//!
//! How: before the link's first thread, temp file or child, the process forks. The parent
//! waits on a pipe and passes the signals a build sends (INT, TERM, HUP, QUIT) on to the
//! child. The child does the link; once its output is in place and its temps are gone (or,
//! for a failed link, once `main` is done), it lets go of stdin, stdout and stderr (nothing
//! that reads a command's output to its end, as ninja does, then waits for the child's exit)
//! and writes its exit status into the pipe ([`report`]). The parent exits with that status.
//! A child that ends without writing it (killed; or the real linker run in its place, for a
//! link not worth packing) is waited for, and its end is the parent's: the same exit
//! status, or the same signal.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use super::options::{Fork, PackOptions};
use crate::ld::LinkLine;

/// The inputs' bytes from which `--fatpack-fork=auto` forks: below them the end costs
/// little (2 ms for 300 MiB of objects on the dev machine) and the fork itself 0.1-0.3 ms.
pub const FORK_FROM: u64 = 64 << 20;

/// The signals passed on from the parent to the child.
const FORWARDED: [c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// In the child: the pipe's writing end, until [`report`] (-1: not a child of a fork).
static REPORT: AtomicI32 = AtomicI32::new(-1);

/// In the parent: the child's pid, for the signal handler.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// Forks where `opts` and the inputs of `line` ask for it and this process runs one thread;
/// returns in the child (or where no fork was made) what was done, for `--fatpack-verbose`.
/// The parent never returns.
pub(super) fn fork_if_worth_it(opts: &PackOptions, line: &LinkLine) -> String {
    if opts.fork == Fork::No {
        return "one process (--fatpack-fork or FATPACK_FORK: no)".into();
    }
    let bytes = input_bytes(line);
    let mib = bytes as f64 / f64::from(1 << 20);
    let wanted = opts.fork == Fork::Yes || bytes >= FORK_FROM;
    if !wanted {
        return format!(
            "one process (objects and archives of {mib:.1} MiB; forked from {} MiB)",
            FORK_FROM >> 20
        );
    }
    // The dry run writes nothing worth it. A thread would not be in the child (a lock it
    // held, never released).
    if opts.dry_run {
        return "one process (a dry run)".into();
    }
    if !one_thread() {
        return "one process (another thread was running)".into();
    }
    match fork_and_wait() {
        true => format!(
            "the link ran in a child, and the command ended once the output was in place \
             (objects and archives of {mib:.1} MiB)"
        ),
        false => "one process (the fork failed)".into(),
    }
}

/// The bytes of the objects and archives the link reads (what the scan maps).
fn input_bytes(line: &LinkLine) -> u64 {
    line.files()
        .iter()
        .filter(|f| f.may_hold_linked_device_code())
        .filter_map(|f| f.meta().map(|m| m.len()))
        .sum()
}

/// Whether this process runs one thread (`Threads:` of /proc/self/status; no answer: no).
fn one_thread() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .is_some_and(|n| n.trim() == "1")
    })
}

/// Forks; in the child returns true, where the fork failed false. The parent waits and
/// ends as the child does.
fn fork_and_wait() -> bool {
    use std::io::Write;
    // Bytes buffered now would be written twice, once by each process.
    let _ = std::io::stdout().flush();
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return false;
    }
    let [read, write] = fds;
    // SAFETY: this process runs one thread (checked by the caller), so the child's state is
    // whole: no lock is held by a thread the child lacks.
    match unsafe { libc::fork() } {
        -1 => {
            // SAFETY: closing the two descriptors pipe2 just made.
            unsafe {
                libc::close(read);
                libc::close(write);
            }
            false
        }
        0 => {
            // SAFETY: the reading end is the parent's; this process only writes.
            unsafe { libc::close(read) };
            REPORT.store(write, Ordering::Release);
            true
        }
        child => {
            // SAFETY: the writing end is the child's; the parent only reads.
            unsafe { libc::close(write) };
            wait_for(child, read)
        }
    }
}

extern "C" fn forward(sig: c_int) {
    let child = CHILD.load(Ordering::Acquire);
    if child > 0 {
        // SAFETY: kill is async-signal-safe; the pid is this process's child.
        unsafe { libc::kill(child, sig) };
    }
}

/// The parent's part: the child's exit status, or its end, becomes this process's.
fn wait_for(child: libc::pid_t, read: c_int) -> ! {
    CHILD.store(child, Ordering::Release);
    for sig in FORWARDED {
        // SAFETY: a handler that only calls kill, installed with an empty mask; the
        // sigaction struct is zeroed and then filled in.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as extern "C" fn(c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    let mut status = [0u8; 1];
    loop {
        // SAFETY: reads at most one byte into `status`.
        let n = unsafe { libc::read(read, status.as_mut_ptr().cast(), 1) };
        if n == 1 {
            // SAFETY: _exit ends this process at once; it has nothing of its own to clean
            // up (the child owns the link's temps and output).
            unsafe { libc::_exit(c_int::from(status[0])) }
        }
        if n == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    // The child ended without a word: its end is this process's.
    let mut ws: c_int = 0;
    loop {
        // SAFETY: waits for this process's own child, writing its status into `ws`.
        let r = unsafe { libc::waitpid(child, &mut ws, 0) };
        if r == child {
            break;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // SAFETY: as above.
            unsafe { libc::_exit(1) }
        }
    }
    if libc::WIFEXITED(ws) {
        // SAFETY: as above.
        unsafe { libc::_exit(libc::WEXITSTATUS(ws)) }
    }
    if libc::WIFSIGNALED(ws) {
        end_by(libc::WTERMSIG(ws));
    }
    // SAFETY: as above.
    unsafe { libc::_exit(1) }
}

/// Ends this process by signal `sig`, as the child ended (no core file: the child's
/// would be the one worth having).
fn end_by(sig: c_int) {
    // SAFETY: plain process-state calls with valid arguments: no core file, the signal's
    // default action, the signal unblocked, then raised.
    unsafe {
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

/// In the child of a fork: the command is done, with `status`. Stdin, stdout and stderr
/// become /dev/null (nothing is said after this), then the parent is told, and ends. Does
/// nothing in a process that did not fork.
pub fn report(status: u8) {
    let fd = REPORT.swap(-1, Ordering::AcqRel);
    if fd < 0 {
        return;
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: plain descriptor calls: /dev/null opened, put in place of 0, 1 and 2, closed;
    // then one byte written from a live buffer, and the pipe's end closed.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            for to in 0..3 {
                libc::dup2(null, to);
            }
            libc::close(null);
        }
        let byte = [status];
        let _ = libc::write(fd, byte.as_ptr().cast(), 1);
        libc::close(fd);
    }
}
