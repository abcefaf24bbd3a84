//! `fatpack ld`: the packed link as a list of named, timed steps over one [`Session`]
//! (docs/DESIGN.md, "The link"): resolve inputs as ld would ([`super::scan`]) → scan them for
//! device code → choose a route ([`super::route`]): the direct route links the inputs as
//! given and stubs the output ([`super::route_direct`]), the copy route rewrites copies of
//! them with stubs ([`super::route_copy`]) → add the runtime and the glue → link into a temp
//! output ([`super::real_link`]) → write the store of the modules the link used
//! ([`super::store_step`]) → put the output in place ([`super::output`]). `--fatpack-dry-run`
//! runs the same first steps and prints the rest ([`super::dry_run`]).

use std::ffi::{OsStr, OsString};
use std::time::Instant;

use super::options::{Mode, PackOptions};
use super::plan::Planned;
use super::real_link::{plain_argv, plain_link};
use super::session::{process_start, Linked, Rewritten, RuntimeFiles, Session};
use super::store_step::Preparing;
use super::tail::tail_link;
use super::LinkError;
use crate::ld::{real as real_ld, LinkLine, OutputKind};

/// Run `fatpack ld ARGS`; returns the exit code.
pub fn run(argv0: Option<&OsStr>, args: Vec<OsString>) -> Result<i32, LinkError> {
    real_ld::check_depth()?;
    let real = real_ld::find_real_ld(argv0)?;
    let line = LinkLine::parse(&args)?;
    if line.is_info_only() {
        // `fatpack ld --help`: fatpack's own options first, then the real linker's.
        if line.info == Some(crate::ld::InfoRequest::Help) {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", super::options::options_help());
            let _ = out.flush();
        }
        return plain_link(&real, &line);
    }
    let opts = PackOptions::from_line(&line)?;
    if let Some(n) = opts.threads {
        crate::parallel::set_threads(n);
    }
    // A partial link keeps device code as it is: its output is an input to a later link,
    // which packs it (several containers per section are handled there). Tail mode reads no
    // input: it needs neither the library search nor a scan.
    let unpacked = line.kind == OutputKind::Relocatable || opts.mode == Mode::Tail;
    if unpacked && opts.dry_run {
        return super::dry_run::report_unpacked(&real, &line, &opts);
    }
    if line.kind == OutputKind::Relocatable {
        let code = plain_link(&real, &line)?;
        say(
            &opts,
            &line,
            code,
            "partial link (-r): device code kept as it is, for the final link to pack",
        );
        return Ok(code);
    }
    if opts.mode == Mode::Tail {
        let code = tail_link(&line, &real)?;
        say(&opts, &line, code, "tail mode: .nv_fatbin placed after .bss, in a read-only segment of its own; no store, no runtime");
        return Ok(code);
    }
    keep_large_blocks_mapped();
    let mut s = Session::new(real, line, opts)?;
    s.step("resolve inputs", Session::resolve_inputs)?;
    super::old_output::refuse_an_input(&s.line)?;
    // Before the first thread, temp file or child of the link.
    s.account.fork_note = super::fork::fork_if_worth_it(&s.opts, &s.line);
    let early = s.step("start the link early", Session::start_early)?;
    let planned = s.step("scan inputs", Session::scan_inputs)?;
    if s.opts.dry_run {
        // What the steps that write would do, said instead of done.
        s.progress.done();
        return super::dry_run::report(&s, &planned);
    }
    if let Some(why) = super::worth_packing::left_unpacked(&s, &planned) {
        drop((early, planned));
        // The real linker writes the output itself now: the unlink beside the early link
        // must not race with it.
        s.old_output.settle();
        s.progress.done();
        if !s.opts.verbose {
            // Nothing is left to do after the real linker (an early link's temp folder went
            // with `early`): it takes this process's place, one process less for every link
            // without device code. Only the verbose line needs this process back.
            return Err(real_ld::exec(&s.real, &plain_argv(&s.line)?).into());
        }
        let code = plain_link(&s.real, &s.line)?;
        say(
            &s.opts,
            &s.line,
            code,
            &format!("{why}: the line went to the real linker unchanged"),
        );
        return Ok(code);
    }
    let (mut planned, mut early) = (planned, early);
    match s.route_for(&planned) {
        Ok(script) => {
            if let Some(code) = s.direct(&planned, script, early)? {
                return Ok(code);
            }
        }
        Err(why) => {
            if early.take().is_some() {
                s.account.early_note = "stopped: the link takes the copy route";
            }
            s.account.route_note = format!("copy: {why}");
        }
    }
    let rewritten = s.step("rewrite inputs", |s| s.rewrite_inputs(&mut planned))?;
    let runtime = s.step("add runtime and glue", |s| {
        s.add_runtime(&planned[0].path, &rewritten)
    })?;
    // The store's work runs beside the linker; a failed link stops it (on drop).
    let ready = s.prepare_store(&rewritten);
    let (code, linked) = s.step("link", |s| s.link(&rewritten, &runtime))?;
    if let Some(r) = &ready {
        r.linked();
    }
    if code != 0 {
        s.progress.done();
        return Ok(code);
    }
    s.finish(planned, rewritten, runtime, linked, ready)
}

impl Session {
    /// After a successful link: the store, the output put in place, the report.
    pub(super) fn finish(
        &mut self,
        planned: Vec<Planned>,
        rewritten: Rewritten,
        runtime: RuntimeFiles,
        mut linked: Linked,
        ready: Option<Preparing>,
    ) -> Result<i32, LinkError> {
        let s = self;
        let stored = s.step("write store", |s| {
            s.write_store(&rewritten, &mut linked, ready)
        })?;
        let (summary, mapping) = (stored.summary, stored.mapping);
        let linked = s.step("commit output", |s| s.commit(linked, stored.pending_side))?;
        s.progress.done();
        s.report(&planned, &summary, mapping.as_ref());
        // What the steps do not include, so that `--fatpack-verbose` accounts for the whole
        // command: the time before the first step, and letting go of the rewritten inputs
        // (temp files) and the inputs' mappings.
        let (verbose, started) = (s.opts.verbose, s.started);
        let t = Instant::now();
        drop((rewritten, runtime, linked, planned));
        s.maps = Default::default();
        if verbose {
            eprintln!(
                "fatpack:   before the first step {:.3}s; cleanup after the last (temp files, mappings) {:.3}s",
                started
                    .checked_duration_since(process_start())
                    .map_or(0.0, |d| d.as_secs_f64()),
                t.elapsed().as_secs_f64()
            );
        }
        // The command is done, its output in place and its temp files gone: the parent of a
        // fork ends now, and what is still held (the session, the inputs' mappings where the
        // store's work holds them too: 5 ms of unmapping and freeing after static cuBLAS's
        // link on the GPU machine, BENCHMARKS.md) is let go by the child alone.
        super::fork::report(0);
        Ok(0)
    }
}

/// `--fatpack-verbose`: what fatpack did with a link it did not pack.
pub(super) fn say(opts: &PackOptions, line: &LinkLine, code: i32, what: &str) {
    if opts.verbose && code == 0 {
        eprintln!("fatpack: {}: {what}", line.output.display());
    }
}

/// Makes every block of 128 KiB or more its own mapping, given back to the system when it is
/// freed. glibc raises that threshold to the size of the largest such block freed, after
/// which blocks of that size come from the heap and stay resident once freed: the section
/// headers the scan keeps for each archive member (hundreds of KB each for objects built
/// with `-ffunction-sections`) are let go as the rewrite goes, and the rewritten members
/// that replace them would otherwise not reuse that memory (measured: 15 MiB more at the
/// rewrite's peak for 200 members of 3,000 sections).
pub(super) fn keep_large_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; it is called before this
    // process's other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}
