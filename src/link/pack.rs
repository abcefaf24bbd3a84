//! `fatpack ld`: the packed link as a list of named, timed steps over one [`Session`]
//! (docs/DESIGN.md): resolve inputs as ld would → scan them for device code → rewrite those
//! objects and archives with stubs → add the runtime and the glue → link into a temp output
//! → write the store of the modules the link used (and its digest) → rename into place.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Instant;

use cubin_store::WriteOptions;

use super::abi;
use super::direct::NotStubbed;
use super::error::io_at;
use super::inputs::{rewrite_input, Names, Planned};
use super::options::{EarlyLink, Mode, PackOptions, Route};
use super::tail::tail_link;
use super::LinkError;
use super::{cleanup, glue, names, runtime};
use crate::inputs::{self, DeviceSection};
use crate::ld::{self, real as real_ld, InputFileKind, InputId, LinkLine, OutputKind};
use crate::packed;
use crate::progress::Progress;
use crate::rewrite::Extracted;
use crate::size::human;

/// One `fatpack ld` run: the command line, the inputs it maps (each once), and what each step
/// made. [`run`] is the list of steps.
pub(super) struct Session {
    pub(super) real: PathBuf,
    pub(super) line: LinkLine,
    pub(super) opts: PackOptions,
    runtime: runtime::Source,
    maps: std::sync::Arc<inputs::Maps>,
    pub(super) progress: Progress,
    started: Instant,
    /// Each step's name and seconds, for `--fatpack-verbose`.
    /// Each step's name, wall seconds, and this process's peak RSS (MiB) when it ended.
    timings: Vec<(&'static str, f64, f64)>,
    /// This process's resident set (MiB) when the real linker started (`--fatpack-verbose`).
    rss_during_link: f64,
    /// How the store was written: made ready beside the linker, or why not
    /// (`--fatpack-verbose`).
    store_note: String,
    /// Where the rewrite's time went (`--fatpack-verbose`).
    rewrite_times: super::inputs::RewriteTimes,
    /// Host ELF files the scan read (archive members included), and how many ELF header
    /// parses the scan and the rewrite made: each input is parsed once, and the rewrite
    /// edits the headers the scan read (`--fatpack-verbose`).
    elf_files: usize,
    elf_parses: usize,
    /// Which route the link took, and why (`--fatpack-verbose`).
    route_note: String,
    /// Whether the link was started before the scan, and what became of it
    /// (`--fatpack-verbose`).
    early_note: &'static str,
    /// The output was linked from the inputs as given (the direct route).
    linked_as_given: bool,
    /// The old output, unlinked while the real link runs ([`super::old_output`]).
    old_output: super::old_output::OldOutput,
    /// How the output is put in place: ld's policy ([`crate::commit::Outputs::for_link`]);
    /// taken by the commit.
    outs: crate::commit::Outputs,
}

/// What the rewrite step made.
struct Rewritten {
    /// Rewritten inputs, the glue object and the runtime archive: a temp folder removed on
    /// drop, or `<output>.fatpack-temps/` with `--fatpack-save-temps`.
    work: Work,
    /// Every container taken out of an input, under its module name.
    extracted: Vec<Extracted>,
    /// Input id -> its rewritten copy.
    replace: BTreeMap<InputId, PathBuf>,
    /// The link's ELF machine (from its inputs).
    machine: u16,
    /// Arguments for the real linker after the user's (the direct route's tail script).
    extra: Vec<OsString>,
    /// The direct route: the source file each extracted module's object names first.
    sources: Vec<super::direct::Source>,
}

/// The glue object and the runtime archive, as files for the real linker.
struct RuntimeFiles {
    glue: PathBuf,
    runtime: PathBuf,
}

/// The real link's output: a temp file beside the real one (put in place at the end), in
/// a folder of its own.
struct Linked {
    staged: crate::commit::Staged,
    out: PathBuf,
}

/// A real link started and not yet waited for ([`Session::start_link`]); dropped, the
/// linker is stopped and its temp output removed.
struct Linking {
    running: crate::commit::signals::Running,
    user_names: names::UserNames,
    linked: Linked,
}

/// The direct route's link, started before the scan on the guess that the scan will find
/// device code and leave the direct route open ([`Session::start_early`]). The line it runs
/// does not depend on what the scan finds, only on the link's machine, which is checked
/// against the scan's before it is used.
struct Early {
    r: Rewritten,
    runtime: RuntimeFiles,
    linking: Linking,
}

/// The store being made ready beside the real linker ([`Session::prepare_store`]).
struct Preparing {
    signals: std::sync::Arc<crate::store::ready::Signals>,
    handle: Option<
        std::thread::JoinHandle<Result<crate::store::ready::Ready, crate::store::PackError>>,
    >,
}

impl Preparing {
    /// The real linker is done: the rest of the work may take every CPU.
    fn linked(&self) {
        self.signals
            .linking
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }

    /// The linker used `names`: only those are still to be made ready.
    fn use_only(&self, names: &[String]) {
        let _ = self.signals.used.set(names.iter().cloned().collect());
    }

    /// Waits for it.
    fn finish(mut self) -> Result<crate::store::ready::Ready, crate::store::PackError> {
        match self.handle.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            // A panic there is a bug; the store is then written after the link.
            Some(Err(_)) | None => Err(crate::store::PackError::Cancelled),
        }
    }
}

impl Drop for Preparing {
    /// A link that failed, or an error before the store: the work stops at its next window.
    fn drop(&mut self) {
        self.signals
            .cancel
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// What the store step wrote.
struct Stored {
    summary: cubin_store::StoreSummary,
    /// A side-file store written but not yet in place (it goes with the binary).
    pending_side: Option<crate::commit::Staged>,
    /// Where the store was mapped with the image (None: side file, or no header to spare).
    mapping: Option<packed::Mapping>,
}

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
    if opts.dry_run {
        return super::dry_run::report(real, line, opts);
    }
    // A partial link keeps device code as it is: its output is an input to a later link,
    // which packs it (several containers per section are handled there).
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
    // Tail mode reads no input: it needs neither the library search nor a scan.
    if opts.mode == Mode::Tail {
        let code = tail_link(&line, &real)?;
        say(&opts, &line, code, "tail mode: .nv_fatbin placed after .bss, in a read-only segment of its own; no store, no runtime");
        return Ok(code);
    }
    keep_large_blocks_mapped();
    let mut s = Session::new(real, line, opts)?;
    s.step("resolve inputs", Session::resolve_inputs)?;
    super::old_output::refuse_an_input(&s.line)?;
    let early = s.step("start the link early", Session::start_early)?;
    let planned = s.step("scan inputs", Session::scan_inputs)?;
    if planned.is_empty() {
        drop(early);
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
        say(&s.opts, &s.line, code, "no device code in the objects and archives linked: the line went to the real linker unchanged");
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
                s.early_note = "stopped: the link takes the copy route";
            }
            s.route_note = format!("copy: {why}");
        }
    }
    let rewritten = s.step("rewrite inputs", |s| s.rewrite_inputs(&mut planned))?;
    let runtime = s.step("add runtime and glue", |s| {
        s.add_runtime(&planned[0].path, &rewritten)
    })?;
    // The store's work runs beside the linker; a failed link stops it (on drop).
    let ready = s.prepare_store(&rewritten);
    let (code, linked) = s.step("link", |s| s.link(&planned, &rewritten, &runtime))?;
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
    /// The direct route ([`super::direct`]): the exit code of a link it finished or that
    /// failed; None where its output cannot be cut (nothing is kept of it, and the copy
    /// route follows).
    fn direct(
        &mut self,
        planned: &[Planned],
        script: &str,
        early: Option<Early>,
    ) -> Result<Option<i32>, LinkError> {
        // The early link is the direct route's link, if it was made for the same machine.
        let early = match early {
            Some(e) if machine_of(planned).ok() == Some(e.r.machine) => {
                self.early_note = "started before the scan, and used";
                Some(e)
            }
            Some(_) => {
                self.early_note = "stopped: the scan found another machine";
                None
            }
            None => None,
        };
        let (r, runtime, linking) = match early {
            Some(Early {
                mut r,
                runtime,
                linking,
            }) => {
                self.step("name modules", |s| {
                    (r.extracted, r.sources) = super::direct::modules(planned, &s.maps)?;
                    Ok(())
                })?;
                (r, runtime, linking)
            }
            None => {
                let r = self.step("name modules", |s| s.direct_inputs(planned, script))?;
                let runtime = self.step("add runtime and glue", |s| {
                    s.add_runtime(&planned[0].path, &r)
                })?;
                let linking = self.start_link(planned, &r, &runtime)?;
                (r, runtime, linking)
            }
        };
        let ready = self.prepare_store(&r);
        let (code, linked) = self.step("link", |s| s.finish_link(linking))?;
        if let Some(p) = &ready {
            p.linked();
        }
        if code != 0 {
            self.progress.done();
            return Ok(Some(code));
        }
        match self.step("stub output", |s| s.stub_output(&r, &linked))? {
            Ok(()) => {}
            Err(NotStubbed::Refused(why)) => {
                self.route_note =
                    format!("copy: the direct route's output could not be cut ({why})");
                return Ok(None);
            }
            // The link is still made, through copies, but this must be heard of.
            Err(NotStubbed::Failed(why)) => {
                eprintln!(
                    "fatpack: warning: {}: {why}; linking through copies of the inputs instead",
                    self.line.output.display()
                );
                self.route_note = format!("copy: the direct route's cut failed its check ({why})");
                return Ok(None);
            }
        }
        // `finish` takes the planned inputs for its report only.
        let planned = planned
            .iter()
            .map(|p| Planned {
                id: p.id,
                path: p.path.clone(),
                kind: p.kind,
                sections: Vec::new(),
            })
            .collect();
        self.finish(planned, r, runtime, linked, ready).map(Some)
    }
}

impl Session {
    /// After a successful link: the store, the output put in place, the report.
    fn finish(
        &mut self,
        planned: Vec<Planned>,
        rewritten: Rewritten,
        runtime: RuntimeFiles,
        linked: Linked,
        ready: Option<Preparing>,
    ) -> Result<i32, LinkError> {
        let s = self;
        let stored = s.step("write store", |s| s.write_store(&rewritten, &linked, ready))?;
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
                "fatpack:   before the first step {:.2}s; cleanup after the last (temp files, mappings) {:.2}s",
                started
                    .checked_duration_since(process_start())
                    .map_or(0.0, |d| d.as_secs_f64()),
                t.elapsed().as_secs_f64()
            );
        }
        Ok(0)
    }
}

/// When this process began its work (`main`'s first statement marks it).
static PROCESS_START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Marks the start of the process, for `--fatpack-verbose`'s account of a link.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

fn process_start() -> Instant {
    *PROCESS_START.get_or_init(Instant::now)
}

/// What a packed link adds before and after the user's arguments: the runtime first,
/// pulled in by -u, so that the libraries the driver adds later (libc, libgcc_s, cudart)
/// resolve what it needs; then the `--wrap`s, with `--exclude-libs` hiding the runtime inside
/// a shared library (an executable needs no hiding, and hiding there breaks links against
/// DSOs that reference cudart); and the output last (ld takes the last -o).
pub(super) fn link_extras(
    glue: OsString,
    runtime: OsString,
    shared: bool,
    output: OsString,
) -> (Vec<OsString>, Vec<OsString>) {
    let prepend = vec![
        "-u".into(),
        "__wrap___cudaRegisterFatBinary".into(),
        glue,
        runtime,
    ];
    let mut append: Vec<OsString> = abi::link_args(shared)
        .into_iter()
        .map(OsString::from)
        .collect();
    append.extend(["-o".into(), output]);
    (prepend, append)
}

/// Where `--fatpack-save-temps` keeps what a link made.
pub(super) fn saved_temps(output: &Path) -> PathBuf {
    let mut s = output.as_os_str().to_owned();
    s.push(".fatpack-temps");
    PathBuf::from(s)
}

/// The folder of a link's own files.
enum Work {
    Temp(crate::commit::signals::TempFolder),
    Kept(PathBuf),
}

impl Work {
    fn path(&self) -> &Path {
        match self {
            Work::Temp(t) => t.path(),
            Work::Kept(p) => p,
        }
    }
}

/// `--fatpack-verbose`: what fatpack did with a link it did not pack.
fn say(opts: &PackOptions, line: &LinkLine, code: i32, what: &str) {
    if opts.verbose && code == 0 {
        eprintln!("fatpack: {}: {what}", line.output.display());
    }
}

/// An earlier side-file link's `<output>.fatpack`, now that the output keeps its store
/// inside: left there it would be read as this binary's store by tools and people. Only a
/// file that is a fatpack store is removed.
fn remove_stale_side_file(output: &Path) {
    let side = packed::side_path(output);
    let mut magic = [0u8; 8];
    let is_store = std::fs::File::open(&side)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && (magic == cubin_store::MAGIC || fatpack_format::split::is_manifest(&magic));
    if is_store {
        let _ = std::fs::remove_file(&side);
    }
}

/// The link's ELF machine, from the headers the scan read of its first input with device
/// code.
fn machine_of(planned: &[Planned]) -> Result<u16, LinkError> {
    let first = &planned[0];
    first
        .machine()
        .ok_or_else(|| LinkError::UnknownMachine(first.path.clone()))
}

/// Whether the line links cudart or cudadevrt (static or shared): a link likely to hold
/// device code.
fn names_cudart(line: &LinkLine) -> bool {
    line.inputs.iter().any(|i| {
        i.resolved
            .as_deref()
            .and_then(Path::file_name)
            .and_then(OsStr::to_str)
            .is_some_and(|n| n.starts_with("libcudart") || n.starts_with("libcudadevrt"))
    })
}

/// The ELF machine of the line's first object file (`e_machine`, read from its header as
/// the scan reads it), as the link's machine before the scan has read any input.
fn first_object_machine(line: &LinkLine) -> Option<u16> {
    let path = line
        .inputs
        .iter()
        .filter(|i| !i.binary && i.file_kind == Some(InputFileKind::Elf))
        .find_map(|i| i.resolved.as_deref())?;
    let mut head = [0u8; 24];
    std::io::Read::read_exact(&mut std::fs::File::open(path).ok()?, &mut head).ok()?;
    inputs::elf_machine(&head)
}

/// The bytes of device code in the planned inputs, and their other bytes (what the copy
/// route writes: an archive is copied whole, its containers replaced by stubs).
fn device_and_other_bytes(planned: &[Planned]) -> (u64, u64) {
    let (mut device, mut other) = (0u64, 0u64);
    for p in planned {
        let d: u64 = p.sections.iter().flat_map(|s| &s.spans).map(|s| s.1).sum();
        let len = std::fs::metadata(&p.path).map_or(d, |m| m.len());
        device += d;
        other += len.saturating_sub(d);
    }
    (device, other)
}

/// The line as given, for the real linker: nothing to pack.
pub(super) fn plain_link(real: &Path, line: &LinkLine) -> Result<i32, LinkError> {
    Ok(real_ld::exit_code(real_ld::run(real, &plain_argv(line)?)?))
}

/// The real linker's arguments for the line as given (nothing replaced, nothing added).
fn plain_argv(line: &LinkLine) -> Result<Vec<OsString>, LinkError> {
    Ok(line.render(&BTreeMap::new(), &[], &[])?)
}

impl Session {
    pub(super) fn new(real: PathBuf, line: LinkLine, opts: PackOptions) -> Result<Self, LinkError> {
        // Before any work: a bad FATPACK_RUNTIME is the first thing to hear about.
        let runtime = runtime::Source::from_env()?;
        Ok(Session {
            real,
            line,
            opts,
            runtime,
            maps: Default::default(),
            progress: Progress::new(),
            started: Instant::now(),
            timings: Vec::new(),
            rss_during_link: 0.0,
            store_note: String::new(),
            rewrite_times: Default::default(),
            elf_files: 0,
            elf_parses: 0,
            route_note: "copy: the inputs with device code copied with stubs".into(),
            early_note: "not started (--fatpack-early-link, or the route cannot be direct)",
            linked_as_given: false,
            old_output: Default::default(),
            outs: crate::commit::Outputs::for_link(),
        })
    }

    /// Runs one named, timed step.
    pub(super) fn step<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&mut Self) -> Result<T, LinkError>,
    ) -> Result<T, LinkError> {
        self.progress.step(name);
        let t = Instant::now();
        let r = f(self);
        self.timings.push((
            name,
            t.elapsed().as_secs_f64(),
            peak_rss_mib(libc::RUSAGE_SELF),
        ));
        r
    }

    /// Where ld would find each input (`-l` search, scripts), as ld does.
    pub(super) fn resolve_inputs(&mut self) -> Result<(), LinkError> {
        let mut cache = ld::DefaultsCache::new();
        ld::resolve_with(&mut self.line, &self.real, &mut cache)?;
        Ok(())
    }

    /// Locate the device code of every object and archive the link may read. A shared
    /// library's device code belongs to it (packed when it was linked, or not): it is not
    /// read at all.
    pub(super) fn scan_inputs(&mut self) -> Result<Vec<Planned>, LinkError> {
        let parses = crate::elf::parse_count();
        let mut planned = Vec::new();
        // A library named twice (`-lgcc ... -lgcc`) is looked at once.
        let mut device_free: std::collections::HashSet<PathBuf> = Default::default();
        for input in &self.line.inputs {
            if input.binary {
                continue;
            }
            let Some(path) = &input.resolved else {
                continue;
            };
            if !matches!(
                input.file_kind,
                Some(InputFileKind::Elf | InputFileKind::Archive | InputFileKind::ThinArchive)
            ) {
                continue;
            }
            if device_free.contains(path) {
                continue;
            }
            let map = self.maps.get(path)?;
            if cannot_hold_device_code(input.file_kind, &map) {
                device_free.insert(path.clone());
                continue;
            }
            // Identifies the file, and reads the device code of an object or archive.
            let scanned = inputs::locate(path, &map, &self.maps)?;
            if scanned.kind == inputs::FileKind::Other {
                refuse_unknown_elf_with_device_code(path, &map)?;
            }
            self.elf_files += scanned.elf_files;
            // Reading entry headers maps whole runs of the file (fault-around, large
            // folios): let them go before the next input, or the scan alone would hold
            // every input resident.
            self.maps.release(path, 0, map.len() as u64);
            let sections: Vec<DeviceSection> = scanned
                .sections
                .into_iter()
                .filter(|s| !s.spans.is_empty())
                .collect();
            if sections.is_empty() {
                continue;
            }
            planned.push(Planned {
                id: input.id,
                path: path.clone(),
                kind: scanned.kind,
                sections,
            });
        }
        self.elf_parses += crate::elf::parse_count() - parses;
        Ok(planned)
    }

    /// A copy of each planned input with its containers replaced by stubs, in a private temp
    /// folder; the link's machine from the first of them.
    fn rewrite_inputs(&mut self, planned: &mut [Planned]) -> Result<Rewritten, LinkError> {
        let work = self.work_folder()?;
        // From the headers the scan read, before the rewrite lets them go.
        let machine = machine_of(planned)?;
        let parses = crate::elf::parse_count();
        let mut names = Names::default();
        let (mut extracted, mut replace) = (Vec::new(), BTreeMap::new());
        let count = planned.len();
        for (seq, p) in planned.iter_mut().enumerate() {
            self.progress.step(format!(
                "rewriting input {}/{}: {}",
                seq + 1,
                count,
                p.path.display()
            ));
            let dest = rewrite_input(
                p,
                seq,
                work.path(),
                &mut names,
                &mut extracted,
                &self.maps,
                &mut self.rewrite_times,
            )?;
            replace.insert(p.id, dest);
        }
        self.elf_parses += crate::elf::parse_count() - parses;
        self.maps.release_all();
        Ok(Rewritten {
            work,
            extracted,
            replace,
            machine,
            extra: Vec::new(),
            sources: Vec::new(),
        })
    }

    /// The folder of the link's own files: a temp folder, or `<output>.fatpack-temps/`.
    fn work_folder(&self) -> Result<Work, LinkError> {
        Ok(if self.opts.save_temps {
            let dir = saved_temps(&self.line.output);
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(io_at("removing", &dir))?;
            }
            std::fs::create_dir_all(&dir).map_err(io_at("creating", &dir))?;
            Work::Kept(dir)
        } else {
            Work::Temp(cleanup::temp_folder(
                cleanup::WORK_PREFIX,
                &std::env::temp_dir(),
            )?)
        })
    }

    /// The direct route's inputs: the user's, as given, with the tail script `script`, and
    /// the name of every module they hold (nothing is copied).
    fn direct_inputs(&mut self, planned: &[Planned], script: &str) -> Result<Rewritten, LinkError> {
        let work = self.work_folder()?;
        let machine = machine_of(planned)?;
        let path = super::tail::write_script(work.path(), script)?;
        let (extracted, sources) = super::direct::modules(planned, &self.maps)?;
        Ok(Rewritten {
            extracted,
            sources,
            replace: BTreeMap::new(),
            machine,
            extra: super::tail::script_args(&path),
            work,
        })
    }

    /// The direct route's link, started before the scan where it is likely to be the link
    /// made ([`Early`], [`EarlyLink`]): the route is not `copy`, this linker takes the tail
    /// script, and the first object gives the machine. Where the scan then finds no device code, or sends
    /// the link down the copy route, this link is stopped and the one made instead is
    /// exactly what it would have been without it: only the scan's time is gained or lost.
    fn start_early(&mut self) -> Result<Option<Early>, LinkError> {
        let guess = match self.opts.early_link {
            EarlyLink::No => false,
            EarlyLink::Yes => true,
            EarlyLink::Auto => names_cudart(&self.line),
        };
        if !guess || self.opts.route == Route::Copy || self.opts.save_temps {
            return Ok(None);
        }
        let (Ok(script), Some(machine)) = (self.direct_script(), first_object_machine(&self.line))
        else {
            return Ok(None);
        };
        if glue::architecture(machine).is_none() {
            return Ok(None);
        }
        let work = self.work_folder()?;
        let path = super::tail::write_script(work.path(), script)?;
        let r = Rewritten {
            extracted: Vec::new(),
            sources: Vec::new(),
            replace: BTreeMap::new(),
            machine,
            extra: super::tail::script_args(&path),
            work,
        };
        let runtime = self.add_runtime(&self.line.output.clone(), &r)?;
        let linking = self.start_link(&[], &r, &runtime)?;
        self.early_note = "started before the scan";
        Ok(Some(Early {
            r,
            runtime,
            linking,
        }))
    }

    /// Whether this link takes the direct route ([`Route`]): the tail script for its
    /// linker, or why not.
    pub(super) fn route_for(&self, planned: &[Planned]) -> Result<&'static str, String> {
        match self.opts.route {
            Route::Copy => return Err("--fatpack-route=copy".into()),
            Route::Direct => {}
            Route::Auto => {
                let (device, other) = device_and_other_bytes(planned);
                if device > other {
                    return Err(format!(
                        "the inputs with device code hold more of it ({device} bytes) than \
                         other bytes ({other}), so copying them writes less than linking them \
                         as given"
                    ));
                }
            }
        }
        self.direct_script()
            .map_err(|why| format!("the direct route is not for this link: {why}"))
    }

    /// Whether this link can take the direct route: the tail script for its linker, or
    /// why not.
    fn direct_script(&self) -> Result<&'static str, String> {
        if !self.line.scripts.is_empty() {
            return Err("the line gives its own linker script".into());
        }
        super::tail::script_for(&self.real).map_err(|e| match e {
            LinkError::TailUnsupported { linker, why } => format!("{linker} {why}"),
            e => e.to_string(),
        })
    }

    /// The direct route's output, its containers replaced by stubs and cut short; or why
    /// that cannot be done (the copy route is then taken).
    fn stub_output(
        &mut self,
        r: &Rewritten,
        linked: &Linked,
    ) -> Result<Result<(), NotStubbed>, LinkError> {
        let done = super::direct::stub_output(&linked.out, &r.extracted, &r.sources, &self.maps)?;
        if let Ok(d) = &done {
            self.linked_as_given = true;
            self.route_note = format!(
                "direct: the inputs linked as given, {} containers replaced by stubs in the output, {} of {} kept",
                d.containers,
                human(d.after),
                human(d.before)
            );
        }
        Ok(done.map(|_| ()))
    }

    /// The runtime archive for the link's machine and the glue object with the digest slot.
    fn add_runtime(&mut self, first: &Path, r: &Rewritten) -> Result<RuntimeFiles, LinkError> {
        let arch = glue::architecture(r.machine).ok_or_else(|| LinkError::UnsupportedMachine {
            path: first.to_path_buf(),
            machine: runtime::machine_name(r.machine),
        })?;
        let dir = r.work.path();
        let glue = dir.join("fatpack-glue.o");
        std::fs::write(&glue, glue::glue_object(arch)?).map_err(io_at("writing", &glue))?;
        let runtime = self.runtime.materialise(dir, r.machine)?;
        Ok(RuntimeFiles { glue, runtime })
    }

    /// The real link of the rewritten line into a temp output beside the real one (so a
    /// failed link leaves nothing behind; ld creates the file itself, so it gets the modes a
    /// plain link would give it). Returns the real linker's exit code.
    fn link(
        &mut self,
        planned: &[Planned],
        r: &Rewritten,
        files: &RuntimeFiles,
    ) -> Result<(i32, Linked), LinkError> {
        let linking = self.start_link(planned, r, files)?;
        self.finish_link(linking)
    }

    /// Starts the real link of the rewritten line into a temp output ([`Session::link`]).
    fn start_link(
        &mut self,
        planned: &[Planned],
        r: &Rewritten,
        files: &RuntimeFiles,
    ) -> Result<Linking, LinkError> {
        let special = crate::commit::special(&self.line.output);
        if special && self.opts.side_file {
            return Err(LinkError::Option(format!(
                "--fatpack-side-file needs a regular output file: {} is not one",
                self.line.output.display()
            )));
        }
        // Beside the output, so that committing is a rename; a device or FIFO (`-o
        // /dev/null`) is written into instead, and nothing is created next to it. An error
        // about the temp output (disk full while the store is mapped) names the user's.
        let staged = self.outs.made_by_linker(&self.line.output)?;
        let tmp_out = staged.path().to_path_buf();
        let copies: Vec<(PathBuf, PathBuf)> = planned
            .iter()
            .filter_map(|p| Some((r.replace.get(&p.id)?.clone(), p.path.clone())))
            .collect();
        let user_names = names::UserNames::new(
            &copies,
            &tmp_out,
            &self.line.output,
            r.work.path(),
            &files.runtime,
        );
        let (prepend, mut append) = link_extras(
            files.glue.clone().into_os_string(),
            files.runtime.clone().into_os_string(),
            self.line.kind == OutputKind::SharedLibrary,
            tmp_out.clone().into_os_string(),
        );
        append.splice(0..0, r.extra.iter().cloned());
        let argv = self.line.render(&r.replace, &prepend, &append)?;
        if let Work::Kept(dir) = &r.work {
            // The real link's command line, writing into the temps folder: `ld @ld.rsp`.
            let kept_out = dir.join("out");
            let rerun: Vec<OsString> = argv
                .iter()
                .map(|a| {
                    if a.as_os_str() == tmp_out.as_os_str() {
                        kept_out.clone().into_os_string()
                    } else {
                        a.clone()
                    }
                })
                .collect();
            let rsp = dir.join("ld.rsp");
            ld::write_response_file(&rsp, &rerun).map_err(io_at("writing", &rsp))?;
            eprintln!(
                "fatpack: {}: temps kept in {} (`{} @{}` reruns the real link)",
                self.line.output.display(),
                dir.display(),
                self.real.display(),
                rsp.display()
            );
        }
        give_back_free_memory();
        if self.opts.verbose {
            self.rss_during_link = current_rss_mib();
        }
        let running = cleanup::start_linker(|| real_ld::spawn_captured(&self.real, &argv))?;
        // As ld unlinks it when it opens its output; a side-file pair is replaced together.
        if !special && !self.opts.side_file {
            self.old_output.start(&self.line.output);
        }
        Ok(Linking {
            running,
            user_names,
            linked: Linked {
                staged,
                out: tmp_out,
            },
        })
    }

    /// Waits for a link [`Session::start_link`] started; its exit code.
    fn finish_link(&mut self, linking: Linking) -> Result<(i32, Linked), LinkError> {
        let Linking {
            running,
            user_names,
            linked,
        } = linking;
        // What ld says and writes about files is passed on naming the user's files.
        let out = cleanup::wait_linker(running)?;
        let status = out.status;
        use std::io::Write;
        let _ = std::io::stdout().write_all(&user_names.map(&out.stdout));
        let _ = std::io::stderr().write_all(&user_names.messages(&out.stderr));
        let (depfiles, maps) = names::reports(&self.line.expanded_args());
        for (files, fix) in [
            (
                &depfiles,
                &(|t: &[u8]| user_names.depfile(t)) as &dyn Fn(&[u8]) -> Vec<u8>,
            ),
            (&maps, &|t: &[u8]| user_names.map(t)),
        ] {
            for f in files.iter().filter(|f| f.is_file()) {
                let text = std::fs::read(f).map_err(io_at("reading", f))?;
                std::fs::write(f, fix(&text)).map_err(io_at("writing", f))?;
            }
        }
        let code = if status.success() {
            0
        } else {
            real_ld::exit_code(status)
        };
        Ok((code, linked))
    }

    /// Starts making the store ready on the CPUs the real linker leaves idle
    /// ([`crate::store::ready`]): every module the rewrite took out, before the linker says
    /// which it uses. Not for a release store (its groups are made from the used modules).
    fn prepare_store(&self, r: &Rewritten) -> Option<Preparing> {
        if self.opts.release.is_some() {
            return None;
        }
        let signals = std::sync::Arc::new(crate::store::ready::Signals::default());
        signals
            .linking
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (maps, modules, dir) = (
            self.maps.clone(),
            r.extracted.clone(),
            r.work.path().to_path_buf(),
        );
        let (level, frames, sig) = (self.opts.level, self.opts.frames, signals.clone());
        let handle = std::thread::Builder::new()
            .name("fatpack-store".into())
            .spawn(move || crate::store::ready::prepare(&modules, &maps, level, frames, &dir, &sig))
            .ok()?;
        Some(Preparing {
            signals,
            handle: Some(handle),
        })
    }

    /// The store of the modules the link really used (read back from the output's stubs),
    /// into the output's `.fatpack` section or the side file, and its digest into the slot:
    /// from what [`Session::prepare_store`] made ready, or, where that failed (a module the
    /// link may not use could not be read), from the inputs now.
    fn write_store(
        &mut self,
        r: &Rewritten,
        linked: &Linked,
        ready: Option<Preparing>,
    ) -> Result<Stored, LinkError> {
        let tmp_out = &linked.out;
        let used = packed::linked_modules(tmp_out)?;
        let ready = match ready.map(|r| {
            r.use_only(&used);
            r.finish()
        }) {
            Some(Ok(ready)) => {
                self.store_note = format!(
                    "made ready beside the linker in {:.2}s ({} of {} modules, {} of blobs kept)",
                    ready.seconds,
                    ready.module_count(),
                    r.extracted.len(),
                    human(ready.kept_bytes),
                );
                Some(ready)
            }
            Some(Err(e)) => {
                self.store_note = format!("written after the link (made ready: {e})");
                None
            }
            None => {
                self.store_note = "written after the link (release store)".into();
                None
            }
        };
        let by_name: HashMap<&str, &Extracted> =
            r.extracted.iter().map(|e| (e.module.as_str(), e)).collect();
        let mut modules = Vec::with_capacity(used.len());
        for s in &used {
            let m = by_name
                .get(s.as_str())
                .ok_or_else(|| LinkError::ForeignModule {
                    output: self.line.output.clone(),
                    module: s.clone(),
                })?;
            modules.push(*m);
        }
        let wopts = WriteOptions {
            level: self.opts.level,
            dictionary: None,
            frames: self.opts.frames,
        };
        let maps = &self.maps;
        // On a terminal: modules and bytes stored so far.
        let total: u64 = modules.iter().map(|m| m.len).sum();
        let (progress, mut done) = (&self.progress, 0u64);
        let mut before = |i: usize| {
            progress.step(format!(
                "storing module {}/{} ({} of {} of fatbins)",
                i + 1,
                modules.len(),
                human(done),
                human(total)
            ));
            done += modules[i].len;
        };
        let from = match &ready {
            Some(ready) => crate::store::Source::Ready(ready),
            None => crate::store::Source::Inputs {
                maps,
                release: self.opts.release,
            },
        };
        let (summary, pending_side) = if self.opts.side_file {
            let mut side = self.outs.file(&packed::side_path(&self.line.output))?;
            let summary = side.write_with(|w| -> Result<_, LinkError> {
                Ok(crate::store::write_link_store(
                    w,
                    &modules,
                    wopts,
                    &from,
                    &mut before,
                )?)
            })?;
            // Put in place with the binary, in commit, never before.
            (summary, Some(side))
        } else {
            let summary = packed::append_store(tmp_out, |w| -> Result<_, LinkError> {
                Ok(crate::store::write_link_store(w, &modules, wopts, &from, &mut before)?.1)
            })?;
            (summary, None)
        };
        let mapping = packed::finish(tmp_out, &summary.digest, !self.opts.side_file)?;
        Ok(Stored {
            summary,
            pending_side,
            mapping,
        })
    }

    /// The finished output put in place as ld puts its own ([`crate::commit::Outputs::for_link`]):
    /// with its side file, if any, the old pair or the new pair. The old output was unlinked
    /// beside the real link ([`super::old_output`]); the commit unlinks again whatever came
    /// since. Returns what is left of `linked` (its temp folder, removed as it drops).
    fn commit(
        &mut self,
        linked: Linked,
        pending_side: Option<crate::commit::Staged>,
    ) -> Result<PathBuf, LinkError> {
        self.old_output.settle();
        let side = pending_side.is_some();
        let mut set: Vec<crate::commit::Staged> = pending_side.into_iter().collect();
        set.push(linked.staged);
        std::mem::replace(&mut self.outs, crate::commit::Outputs::for_link()).commit(set)?;
        if !side {
            remove_stale_side_file(&self.line.output);
        }
        Ok(linked.out)
    }

    /// What was packed, and where the time went (`--fatpack-verbose`).
    fn report(
        &self,
        planned: &[Planned],
        summary: &cubin_store::StoreSummary,
        mapping: Option<&packed::Mapping>,
    ) {
        if !self.opts.verbose {
            return;
        }
        let link_s = self
            .timings
            .iter()
            .find(|(n, ..)| *n == "link")
            .map_or(0.0, |t| t.1);
        eprintln!(
            "fatpack: {}: packed {} modules ({} entries, {} unique blobs): {} of device code stored in {}{}; link {:.2}s, total {:.2}s",
            self.line.output.display(),
            summary.modules,
            summary.entries,
            summary.blobs,
            human(summary.raw_bytes),
            human(summary.file_len),
            if self.opts.side_file { " (side file)" } else { "" },
            link_s,
            self.started.elapsed().as_secs_f64()
        );
        let steps: Vec<String> = self
            .timings
            .iter()
            .map(|(n, t, _)| format!("{n} {t:.2}s"))
            .collect();
        eprintln!("fatpack:   steps: {}", steps.join(", "));
        // The peak only grows, so the step where it jumps is the one that set it.
        let peaks: Vec<String> = self
            .timings
            .iter()
            .map(|(n, _, p)| format!("{n} {p:.0}"))
            .collect();
        eprintln!(
            "fatpack:   peak RSS (MiB) after each step: {}; while the linker ran this process held {:.0}, the linker's own peak {:.0}",
            peaks.join(", "),
            self.rss_during_link,
            peak_rss_mib(libc::RUSAGE_CHILDREN)
        );
        eprintln!(
            "fatpack:   inputs: {} ELF files read (archive members included), their headers parsed {} times by the scan and the rewrite",
            self.elf_files, self.elf_parses
        );
        eprintln!("fatpack:   runtime: {}", self.runtime.what());
        eprintln!("fatpack:   store: {}", self.store_note);
        let rt = &self.rewrite_times;
        if !self.linked_as_given {
            eprintln!(
                "fatpack:   rewrite: archive members read {:.2}s, stubs made {:.2}s, archives indexed and written {:.2}s",
                rt.members, rt.stubs, rt.write
            );
        }
        match (mapping, self.opts.side_file) {
            (Some(m), _) => eprintln!(
                "fatpack:   store mapped with the image: PT_LOAD at {:#x}, {} bytes",
                m.vaddr, m.len
            ),
            (None, true) => {}
            (None, false) => eprintln!(
                "fatpack:   store not mapped (the linker gave the glue note no program \
                 header of its own): the runtime reads it from the file"
            ),
        }
        eprintln!("fatpack:   route: {}", self.route_note);
        eprintln!("fatpack:   early link: {}", self.early_note);
        let done = match self.linked_as_given {
            true => "linked as given",
            false => "rewrote",
        };
        for p in planned {
            eprintln!("fatpack:   {done} {}", p.path.display());
        }
    }
}

/// Hands the C allocator's free memory back to the system before the real linker runs
/// beside this process: the rewritten archive members (hundreds of MB for static cuBLAS)
/// are freed by then, but glibc keeps freed heap memory mapped, and it would stay resident
/// for as long as ld runs.
fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only releases memory malloc holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Makes every block of 128 KiB or more its own mapping, given back to the system when it is
/// freed. glibc raises that threshold to the size of the largest such block freed, after
/// which blocks of that size come from the heap and stay resident once freed: the section
/// headers the scan keeps for each archive member (hundreds of KB each for objects built
/// with `-ffunction-sections`) are let go as the rewrite goes, and the rewritten members
/// that replace them would otherwise not reuse that memory (measured: 15 MiB more at the
/// rewrite's peak for 200 members of 3,000 sections).
fn keep_large_blocks_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; it is called before this
    // process's other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Whether an input cannot hold device code a link rewrites: an object or regular archive
/// with no device section has no section name `.nv_fatbin` or `__nv_relfatbin` anywhere in
/// its bytes. A look for them is far quicker than walking the members' headers (libgcc.a
/// and libc_nonshared.a are in every link); above 16 MiB the walk, which reads less of a
/// large archive, is left to decide. A thin archive's members are files of their own.
fn cannot_hold_device_code(kind: Option<InputFileKind>, data: &[u8]) -> bool {
    const LOOK_BELOW: usize = 16 << 20;
    // One pass for what both names hold; a stray `fatbin` only means the walk decides.
    const BOTH: &[u8] = b"fatbin";
    debug_assert!(inputs::DEVICE_SECTIONS
        .iter()
        .all(|n| memchr::memmem::find(n.as_bytes(), BOTH).is_some()));
    matches!(kind, Some(InputFileKind::Elf | InputFileKind::Archive))
        && data.len() < LOOK_BELOW
        && memchr::memmem::find(data, BOTH).is_none()
}

/// An ELF input of a type that is neither an object, a shared library nor an executable
/// (a damaged `e_type`): the real linker may still take it, but its device code cannot be
/// packed as either, so one with device-code sections is refused, naming it (otherwise the
/// output's check would blame the output for code no stub replaced).
fn refuse_unknown_elf_with_device_code(path: &Path, data: &[u8]) -> Result<(), LinkError> {
    let Ok(layout) = crate::elf::Layout::parse(data) else {
        return Ok(());
    };
    let device = (0..layout.sections.len()).find(|&i| {
        let name = layout.section_name(i);
        inputs::DEVICE_SECTIONS.iter().any(|d| d.as_bytes() == name)
    });
    match device {
        Some(i) => Err(inputs::InputError::Malformed {
            origin: path.display().to_string(),
            message: format!(
                "an ELF file of type {:#x} (not a relocatable object, a shared library or an \
                 executable) holds device code in {}: fatpack cannot tell how to pack it",
                layout.file_type(),
                String::from_utf8_lossy(layout.section_name(i))
            ),
        }
        .into()),
        None => Ok(()),
    }
}

/// This process's resident set now (MiB), from `/proc/self/statm`; 0 if it cannot be read.
fn current_rss_mib() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    (pages * page) as f64 / 1048576.0
}

/// Peak resident set (MiB) of this process (`RUSAGE_SELF`) or of its largest finished child
/// (`RUSAGE_CHILDREN`: the real linker), as `getrusage` reports it; 0 if it cannot.
fn peak_rss_mib(who: libc::c_int) -> f64 {
    // SAFETY: an all-zero rusage is a valid value of a plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for the call.
    if unsafe { libc::getrusage(who, &mut u) } != 0 {
        return 0.0;
    }
    u.ru_maxrss as f64 / 1024.0
}
