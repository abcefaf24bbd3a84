//! What `--fatpack-verbose` says about a link: each step's time and peak memory (recorded
//! by the step runner, `Session::step`), the notes steps leave (route, store, early link),
//! and the figures of the closing report (`Session::report`, the last step's).

/// What the step runner records of each step.
pub(super) struct Step {
    pub(super) name: &'static str,
    /// Wall seconds.
    pub(super) seconds: f64,
    /// This process's peak RSS (MiB) when the step ended.
    pub(super) peak_rss_mib: f64,
    /// How many times an ELF file's headers were parsed during the step.
    pub(super) elf_parses: usize,
}

/// The account of one link for `--fatpack-verbose`.
pub(super) struct Account {
    /// Every step run, in order ([`Step`]), as the step runner recorded it.
    pub(super) steps: Vec<Step>,
    /// This process's resident set (MiB) when the real linker started (`--fatpack-verbose`).
    pub(super) rss_during_link: f64,
    /// How the store was written: made ready beside the linker, or why not
    /// (`--fatpack-verbose`).
    pub(super) store_note: String,
    /// Where the rewrite's time went (`--fatpack-verbose`).
    pub(super) rewrite_times: super::plan::RewriteTimes,
    /// Host ELF files the scan read (archive members included) (`--fatpack-verbose`).
    pub(super) elf_files: usize,
    /// Which route the link took, and why (`--fatpack-verbose`).
    pub(super) route_note: String,
    /// Whether the link was started before the scan, and what became of it
    /// (`--fatpack-verbose`).
    pub(super) early_note: &'static str,
    /// Whether the link ran in a child of a fork (`super::fork`), and why
    /// (`--fatpack-verbose`).
    pub(super) fork_note: String,
    /// Where the time of the steps after the real link went, part by part: they hold up
    /// the link's end, so each is named (`--fatpack-verbose`).
    pub(super) after_link: Parts,
}

/// The parts of a step, each with its wall seconds, in order.
#[derive(Default)]
pub(crate) struct Parts(Vec<(&'static str, f64)>);

impl Parts {
    /// Runs `f` as the part `name`, timed.
    pub(crate) fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let t = std::time::Instant::now();
        let r = f();
        self.0.push((name, t.elapsed().as_secs_f64()));
        r
    }

    /// "name 0.012s, ..." in milliseconds' precision; None where nothing was timed.
    pub(super) fn line(&self) -> Option<String> {
        let parts: Vec<String> = self.0.iter().map(|(n, s)| format!("{n} {s:.3}s")).collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

impl Account {
    /// The ELF header parses of the steps named `names`, as the step runner counted them.
    pub(super) fn parses_in(&self, names: &[&str]) -> usize {
        self.steps
            .iter()
            .filter(|s| names.contains(&s.name))
            .map(|s| s.elf_parses)
            .sum()
    }
}

impl Default for Account {
    fn default() -> Self {
        Account {
            steps: Vec::new(),
            rss_during_link: 0.0,
            store_note: String::new(),
            rewrite_times: Default::default(),
            elf_files: 0,
            route_note: "copy: the inputs with device code copied with stubs".into(),
            early_note: "not started (--fatpack-early-link, or the route cannot be direct)",
            fork_note: String::new(),
            after_link: Parts::default(),
        }
    }
}

/// This process's resident set now (MiB), from `/proc/self/statm`; 0 if it cannot be read.
pub(super) fn current_rss_mib() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    (pages * page) as f64 / 1048576.0
}

/// What `getrusage` reports of this process (`RUSAGE_SELF`) or of its finished children
/// (`RUSAGE_CHILDREN`: the real linker); all 0 if it cannot.
#[derive(Clone, Copy, Default)]
pub(super) struct Usage {
    /// Peak resident set (MiB); of the children, the largest one's.
    pub(super) peak_rss_mib: f64,
    /// CPU seconds in user mode and in the kernel.
    pub(super) user_s: f64,
    pub(super) sys_s: f64,
}

pub(super) fn usage(who: libc::c_int) -> Usage {
    // SAFETY: an all-zero rusage is a valid value of a plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for the call.
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return Usage::default();
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Usage {
        peak_rss_mib: u.ru_maxrss as f64 / 1024.0,
        user_s: secs(u.ru_utime),
        sys_s: secs(u.ru_stime),
    }
}
