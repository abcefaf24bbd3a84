//! The one context of a `fatpack ld` run ([`Session`]): the command line, the inputs it maps
//! (each once), the account of what each step did, and the step runner that times them.
//! What the steps hand each other (the rewritten or named inputs, the runtime files, the
//! real link's temp output) is defined here.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::account::{usage, Account, Step};
use super::options::PackOptions;
use super::plan::Planned;
use super::LinkError;
use super::{cleanup, glue, names, runtime};
use crate::error::io_at;
use crate::inputs;
use crate::ld::{InputId, LinkLine};
use crate::progress::Progress;
use crate::rewrite::Extracted;

/// One `fatpack ld` run: the command line, the inputs it maps (each once), and what each step
/// made. [`super::steps::run`] is the list of steps.
pub(super) struct Session {
    pub(super) real: PathBuf,
    pub(super) line: LinkLine,
    pub(super) opts: PackOptions,
    pub(super) runtime: runtime::Source,
    pub(super) maps: std::sync::Arc<inputs::Maps>,
    pub(super) progress: Progress,
    pub(super) started: Instant,
    /// What `--fatpack-verbose` reports: each step's time and memory (the step runner's),
    /// and the notes the steps leave.
    pub(super) account: Account,
    /// The output was linked from the inputs as given (the direct route).
    pub(super) linked_as_given: bool,
    /// The old output, unlinked while the real link runs ([`super::old_output`]).
    pub(super) old_output: super::old_output::OldOutput,
    /// How the output is put in place: ld's policy ([`crate::commit::Outputs::for_link`]);
    /// taken by the commit.
    pub(super) outs: crate::commit::Outputs,
}

/// What the rewrite step made.
pub(super) struct Rewritten {
    /// Rewritten inputs, the glue object and the runtime archive: a temp folder removed on
    /// drop, or `<output>.fatpack-temps/` with `--fatpack-save-temps`.
    pub(super) work: Work,
    /// Every container taken out of an input, under its module name.
    pub(super) extracted: Vec<Extracted>,
    /// Input id -> its rewritten copy, or a copy of its script naming rewritten copies.
    pub(super) replace: BTreeMap<InputId, PathBuf>,
    /// Every file the rewrite wrote, with the user's file it stands for.
    pub(super) copies: Vec<(PathBuf, PathBuf)>,
    /// The link's ELF machine (from its inputs).
    pub(super) machine: u16,
    /// Arguments for the real linker after the user's (the direct route's tail script).
    pub(super) extra: Vec<OsString>,
    /// The direct route: the source file each extracted module's object names first.
    pub(super) sources: Vec<super::stub_output::Source>,
}

/// The glue object and the runtime archive, as files for the real linker.
pub(super) struct RuntimeFiles {
    pub(super) glue: PathBuf,
    pub(super) runtime: PathBuf,
}

/// The real link's output: a temp file beside the real one (put in place at the end), in
/// a folder of its own.
pub(super) struct Linked {
    pub(super) staged: crate::commit::Staged,
    pub(super) out: PathBuf,
    /// The output open with its headers as they are, where a step after the link already
    /// read them (the direct route's cut): the store step reads them only if this is None.
    pub(super) opened: Option<crate::elf::OpenElf>,
}

/// A real link started and not yet waited for ([`Session::start_link`]); dropped, the
/// linker is stopped and its temp output removed.
pub(super) struct Linking {
    pub(super) running: crate::commit::signals::Running,
    pub(super) user_names: names::UserNames,
    pub(super) linked: Linked,
}

/// The folder of a link's own files.
pub(super) enum Work {
    Temp(crate::commit::signals::TempFolder),
    Kept(PathBuf),
}

impl Work {
    pub(super) fn path(&self) -> &Path {
        match self {
            Work::Temp(t) => t.path(),
            Work::Kept(p) => p,
        }
    }
}

/// Where `--fatpack-save-temps` keeps what a link made.
pub(super) fn saved_temps(output: &Path) -> PathBuf {
    let mut s = output.as_os_str().to_owned();
    s.push(".fatpack-temps");
    PathBuf::from(s)
}

/// The link's ELF machine, from the headers the scan read of its first input with device
/// code.
pub(super) fn machine_of(planned: &[Planned]) -> Result<u16, LinkError> {
    let first = &planned[0];
    first
        .machine()
        .ok_or_else(|| LinkError::UnknownMachine(first.path.clone()))
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
            account: Account::default(),
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
        let (t, parses) = (Instant::now(), crate::elf::parse_count());
        let r = f(self);
        self.account.steps.push(Step {
            name,
            seconds: t.elapsed().as_secs_f64(),
            peak_rss_mib: usage(libc::RUSAGE_SELF).peak_rss_mib,
            elf_parses: crate::elf::parse_count() - parses,
        });
        r
    }

    /// The folder of the link's own files: a temp folder, or `<output>.fatpack-temps/`.
    pub(super) fn work_folder(&self) -> Result<Work, LinkError> {
        Ok(if self.opts.save_temps {
            let dir = saved_temps(&self.line.output);
            if dir.exists() {
                std::fs::remove_dir_all(&dir).map_err(io_at(&dir))?;
            }
            std::fs::create_dir_all(&dir).map_err(io_at(&dir))?;
            Work::Kept(dir)
        } else {
            Work::Temp(cleanup::temp_folder(
                cleanup::WORK_PREFIX,
                &std::env::temp_dir(),
            )?)
        })
    }

    /// The runtime archive for the link's machine and the glue object with the digest slot.
    pub(super) fn add_runtime(
        &mut self,
        first: &Path,
        r: &Rewritten,
    ) -> Result<RuntimeFiles, LinkError> {
        let arch = glue::architecture(r.machine).ok_or_else(|| LinkError::UnsupportedMachine {
            path: first.to_path_buf(),
            machine: runtime::machine_name(r.machine),
        })?;
        let dir = r.work.path();
        let glue = dir.join("fatpack-glue.o");
        std::fs::write(&glue, glue::glue_object(arch)?).map_err(io_at(&glue))?;
        let runtime = self.runtime.materialise(dir, r.machine)?;
        Ok(RuntimeFiles { glue, runtime })
    }
}

/// When this process began its work (`main`'s first statement marks it).
pub(super) static PROCESS_START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Marks the start of the process, for `--fatpack-verbose`'s account of a link.
pub fn mark_process_start() {
    PROCESS_START.get_or_init(Instant::now);
}

pub(super) fn process_start() -> Instant {
    *PROCESS_START.get_or_init(Instant::now)
}
