//! The real linker: finding it without finding ourselves, and running it.
//!
//! The wrapper may be installed as an `ld` symlink in a folder given to `gcc -B<folder>` (gcc
//! looks there first), and that folder may be first on PATH too, so every candidate is
//! compared with our own executable and skipped if it is us. Two wrappers that each take the
//! other for the real linker would still call each other forever; [`DEPTH_ENV`] counts the
//! nesting and ends that.

use std::env;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};

/// Names the real linker (a path, or a name looked up on PATH); overrides everything else.
pub const REAL_LD_ENV: &str = crate::environment::REAL_LD;
/// How many fatpack wrappers are above this process; set on every linker we start.
pub const DEPTH_ENV: &str = crate::environment::LD_DEPTH;
/// A wrapper that finds more than this many wrappers above it refuses to run a linker.
pub const MAX_DEPTH: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum RealLdError {
    #[error(
        "no `{name}` on PATH other than fatpack itself (fatpack never substitutes another \
         linker); install it, or set {REAL_LD_ENV} to the real linker"
    )]
    NotFound { name: String },
    #[error("{REAL_LD_ENV}={value}: no such executable")]
    BadOverride { value: String },
    #[error("{REAL_LD_ENV}={value} is fatpack itself, not a linker")]
    OverrideIsSelf { value: String },
    #[error(
        "linker wrappers call each other in a loop ({DEPTH_ENV}={depth}); set {REAL_LD_ENV} to the real linker"
    )]
    Loop { depth: u32 },
    #[error("{DEPTH_ENV}={value}: not a number")]
    BadDepth { value: String },
    #[error("cannot run {}: {source}", path.display())]
    Spawn {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The linker name to look for when invoked as `argv0`: the `-fuse-ld` names (`ld`,
/// `ld.bfd`, `ld.gold`, `ld.lld`, ...) and target-prefixed ones (`x86_64-linux-gnu-ld`) are
/// kept; anything else (`fatpack`) means `ld`.
pub fn linker_name(argv0: Option<&OsStr>) -> OsString {
    let base = argv0
        .and_then(|a| Path::new(a).file_name())
        .map(OsStr::as_bytes)
        .unwrap_or(b"");
    let is_ld = base == b"ld"
        || base.starts_with(b"ld.")
        || base.ends_with(b"-ld")
        || base.windows(4).any(|w| w == b"-ld.");
    if is_ld {
        OsStr::from_bytes(base).to_owned()
    } else {
        OsString::from("ld")
    }
}

/// Who we are, by device and inode: a symlink to us, a path through symlinked folders and a
/// hard link all stat to the same file (and a path that does not is not us). One `stat` per
/// candidate, where resolving each path component by component took one call per component.
pub(super) struct SelfId {
    pub(super) inode: Option<(u64, u64)>,
}

impl SelfId {
    fn of(exe: Option<&Path>) -> SelfId {
        SelfId {
            inode: exe
                .and_then(|p| fs::metadata(p).ok())
                .map(|m| (m.dev(), m.ino())),
        }
    }

    fn is(&self, candidate: &Path) -> bool {
        fs::metadata(candidate).is_ok_and(|m| self.is_file(&m))
    }

    /// Whether `m` (a candidate's metadata) is our own file's.
    fn is_file(&self, m: &fs::Metadata) -> bool {
        Some((m.dev(), m.ino())) == self.inode
    }
}

pub(super) fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| executable(&m))
}

fn executable(m: &fs::Metadata) -> bool {
    m.is_file() && m.permissions().mode() & 0o111 != 0
}

/// Everything the search depends on, so that tests need not touch the environment.
#[derive(Debug, Clone, Default)]
pub struct Finder {
    /// The value of [`REAL_LD_ENV`].
    pub override_ld: Option<OsString>,
    /// argv\[0\] of the wrapper.
    pub invoked_as: Option<OsString>,
    /// The value of PATH.
    pub path: Option<OsString>,
    /// Our own executable, never returned.
    pub self_exe: Option<PathBuf>,
}

impl Finder {
    pub fn from_env(argv0: Option<&OsStr>) -> Finder {
        Finder {
            override_ld: env::var_os(REAL_LD_ENV).filter(|v| !v.is_empty()),
            invoked_as: argv0.map(OsStr::to_owned),
            path: env::var_os("PATH"),
            // Only its identity is used: a stat of the link the kernel keeps for this
            // process's executable is one call, where its path is two.
            self_exe: Some(PathBuf::from("/proc/self/exe")),
        }
    }

    fn on_path(&self, name: &OsStr, me: &SelfId) -> Option<PathBuf> {
        let path = self.path.as_deref()?;
        env::split_paths(path).find_map(|dir| {
            // An empty PATH entry is the current directory.
            let dir = if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir
            };
            // One stat per directory tells both.
            let cand = dir.join(name);
            let m = fs::metadata(&cand).ok()?;
            (executable(&m) && !me.is_file(&m)).then_some(cand)
        })
    }

    pub fn find(&self) -> Result<PathBuf, RealLdError> {
        let me = SelfId::of(self.self_exe.as_deref());
        if let Some(v) = &self.override_ld {
            let shown = v.to_string_lossy().into_owned();
            let cand = if v.as_bytes().contains(&b'/') {
                PathBuf::from(v)
            } else {
                self.on_path(v, &me)
                    .ok_or_else(|| RealLdError::BadOverride {
                        value: shown.clone(),
                    })?
            };
            if !is_executable(&cand) {
                return Err(RealLdError::BadOverride { value: shown });
            }
            if me.is(&cand) {
                return Err(RealLdError::OverrideIsSelf { value: shown });
            }
            return Ok(cand);
        }
        // Never another linker than the one asked for: `-fuse-ld=lld` without an ld.lld
        // fails with plain gcc, and so it does here.
        let name = linker_name(self.invoked_as.as_deref());
        if let Some(p) = self.on_path(&name, &me) {
            return Ok(p);
        }
        Err(RealLdError::NotFound {
            name: name.to_string_lossy().into_owned(),
        })
    }
}

/// The real linker for a wrapper invoked as `argv0`, from the environment.
pub fn find_real_ld(argv0: Option<&OsStr>) -> Result<PathBuf, RealLdError> {
    Finder::from_env(argv0).find()
}

/// Reads a [`DEPTH_ENV`] value (unset is 0).
pub fn parse_depth(value: Option<&OsStr>) -> Result<u32, RealLdError> {
    match value {
        None => Ok(0),
        Some(v) => v
            .to_str()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| RealLdError::BadDepth {
                value: v.to_string_lossy().into_owned(),
            }),
    }
}

/// How many wrappers are above this process.
pub fn current_depth() -> Result<u32, RealLdError> {
    parse_depth(env::var_os(DEPTH_ENV).as_deref())
}

/// Fails if this process is already nested deeper than [`MAX_DEPTH`] wrappers.
pub fn check_depth() -> Result<u32, RealLdError> {
    let depth = current_depth()?;
    if depth > MAX_DEPTH {
        return Err(RealLdError::Loop { depth });
    }
    Ok(depth)
}

/// A command for the real linker with `args` (argv\[0\] not included), marked one level
/// deeper.
pub fn command<S: AsRef<OsStr>>(ld: &Path, args: &[S]) -> Result<Command, RealLdError> {
    let depth = check_depth()?;
    let mut cmd = Command::new(ld);
    cmd.args(args).env(DEPTH_ENV, (depth + 1).to_string());
    Ok(cmd)
}

/// Runs the real linker with our stdio and waits for it.
pub fn run<S: AsRef<OsStr>>(ld: &Path, args: &[S]) -> Result<ExitStatus, RealLdError> {
    command(ld, args)?
        .status()
        .map_err(|source| RealLdError::Spawn {
            path: ld.to_owned(),
            source,
        })
}

/// Starts the real linker with its output piped back (`wait_with_output` collects it).
pub fn spawn_captured<S: AsRef<OsStr>>(
    ld: &Path,
    args: &[S],
) -> Result<std::process::Child, RealLdError> {
    command(ld, args)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RealLdError::Spawn {
            path: ld.to_owned(),
            source,
        })
}

/// Runs the real linker and collects its output (for `ld --verbose` and the like).
pub fn capture<S: AsRef<OsStr>>(ld: &Path, args: &[S]) -> Result<Output, RealLdError> {
    command(ld, args)?
        .stdin(Stdio::null())
        .output()
        .map_err(|source| RealLdError::Spawn {
            path: ld.to_owned(),
            source,
        })
}

/// Replaces this process with the real linker; returns only if that fails. What std's
/// `Command` would do for an exec, done directly: it copies the whole environment first,
/// and a link without device code spends its time on nothing else here.
pub fn exec<S: AsRef<OsStr>>(ld: &Path, args: &[S]) -> RealLdError {
    let depth = match check_depth() {
        Ok(d) => d,
        Err(e) => return e,
    };
    let spawn = |source| RealLdError::Spawn {
        path: ld.to_owned(),
        source,
    };
    let c = |s: &OsStr| {
        std::ffi::CString::new(s.as_bytes()).map_err(|_| {
            spawn(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an argument holds a NUL byte",
            ))
        })
    };
    let mut owned = Vec::with_capacity(args.len() + 1);
    for a in std::iter::once(ld.as_os_str()).chain(args.iter().map(AsRef::as_ref)) {
        match c(a) {
            Ok(s) => owned.push(s),
            Err(e) => return e,
        }
    }
    let mut argv: Vec<*const libc::c_char> = owned.iter().map(|s| s.as_ptr()).collect();
    argv.push(std::ptr::null());
    let depth_var = format!("{DEPTH_ENV}={}", depth + 1);
    let depth_var = std::ffi::CString::new(depth_var).expect("no NUL in a number");
    let prefix = format!("{DEPTH_ENV}=");
    let mut envp: Vec<*const libc::c_char> = Vec::with_capacity(64);
    // SAFETY: `environ` is the process's NULL-terminated array of NUL-terminated strings;
    // nothing changes it meanwhile (this process runs one thread on this path).
    unsafe {
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            if !std::ffi::CStr::from_ptr(*p)
                .to_bytes()
                .starts_with(prefix.as_bytes())
            {
                envp.push(*p);
            }
            p = p.add(1);
        }
    }
    envp.push(depth_var.as_ptr());
    envp.push(std::ptr::null());
    // The program starts as std's Command would start it: SIGPIPE back to its default (an
    // ignored signal stays ignored across exec) and no signal blocked.
    // SAFETY: plain signal-state calls with valid arguments; `argv` and `envp` are
    // NULL-terminated arrays of pointers into strings that outlive the call.
    let err = unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(owned[0].as_ptr(), argv.as_ptr(), envp.as_ptr());
        io::Error::last_os_error()
    };
    spawn(err)
}

extern "C" {
    /// The process's environment, as execve takes it.
    static environ: *const *const libc::c_char;
}

/// The exit code to pass on: the linker's own, or 128 + signal as a shell reports it.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let n = |s: &str| linker_name(Some(OsStr::new(s)));
        assert_eq!(n("/usr/bin/ld"), "ld");
        assert_eq!(n("ld.gold"), "ld.gold");
        assert_eq!(n("/x/ld.lld"), "ld.lld");
        assert_eq!(n("x86_64-linux-gnu-ld.bfd"), "x86_64-linux-gnu-ld.bfd");
        assert_eq!(n("aarch64-linux-gnu-ld"), "aarch64-linux-gnu-ld");
        assert_eq!(n("fatpack"), "ld");
        assert_eq!(linker_name(None), "ld");
    }

    #[test]
    fn depth_values() {
        assert_eq!(parse_depth(None).unwrap(), 0);
        assert_eq!(parse_depth(Some(OsStr::new("1"))).unwrap(), 1);
        assert!(matches!(
            parse_depth(Some(OsStr::new("x"))),
            Err(RealLdError::BadDepth { .. })
        ));
    }
}
