//! `fatpack ld`: the packed link, step by step (docs/DESIGN.md):
//! locate device code in the inputs the command line names → rewrite those objects and
//! archives with stubs → link with the runtime, the glue and `--wrap`s into a temp output →
//! read which modules the link used → write their store into (or beside) the output →
//! patch the digest → rename into place.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use cubin_store::WriteOptions;

use super::abi;
use super::{glue, runtime};
use crate::inputs::{self, DeviceSection, FileKind};
use crate::ld::{self, real as real_ld, InputFileKind, InputId, LinkLine, OutputKind};
use crate::packed;
use crate::rewrite::{archive, rewrite_object, Extracted};

/// How device code is kept out of the way of the host code's relocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The default: a store outside every loaded segment, and the runtime.
    Packed,
    /// No store, no runtime: the fatbin sections move past `.bss` (linker-scripts/).
    Tail,
}

/// The tail-mode script, shipped inside the binary so that fatpack needs no data files.
pub const TAIL_SCRIPT: &str = include_str!("../../linker-scripts/fatbin-tail.ld");

/// What `--fatpack-*` options and the environment ask for.
#[derive(Debug, Clone)]
pub struct PackOptions {
    pub mode: Mode,
    pub side_file: bool,
    pub verbose: bool,
    pub level: i32,
}

impl PackOptions {
    fn from_line(line: &LinkLine) -> Result<Self> {
        let verbose = line.fatpack_flag("verbose")
            || std::env::var_os("FATPACK_VERBOSE").is_some_and(|v| v != "0")
            || line
                .expanded_args()
                .iter()
                .any(|a| a == "-v" || a == "--verbose");
        let level = match line.fatpack_value("level") {
            Some(v) => v
                .to_str()
                .and_then(|s| s.parse().ok())
                .filter(|l| (1..=22).contains(l))
                .ok_or_else(|| {
                    anyhow!(
                        "--fatpack-level={}: want a zstd level 1-22",
                        v.to_string_lossy()
                    )
                })?,
            None => cubin_store::DEFAULT_LEVEL,
        };
        let mode = match line
            .fatpack_value("mode")
            .map(|v| v.to_string_lossy().into_owned())
        {
            None => Mode::Packed,
            Some(m) if m == "packed" => Mode::Packed,
            Some(m) if m == "tail" => Mode::Tail,
            Some(m) => bail!("--fatpack-mode={m}: want `packed` or `tail`"),
        };
        Ok(PackOptions {
            mode,
            side_file: line.fatpack_flag("side-file"),
            verbose,
            level,
        })
    }
}

/// One input that carries device code, and what to do with it.
struct Planned {
    id: InputId,
    path: PathBuf,
    kind: FileKind,
    sections: Vec<DeviceSection>,
}

/// Gives every container a module name unique within the link.
#[derive(Default)]
struct Names {
    seen: HashMap<String, usize>,
}

impl Names {
    fn name(&mut self, origin: &str, index: usize) -> String {
        let base = format!("{origin}#{index}");
        let n = self.seen.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}~{}", *n - 1)
        }
    }
}

struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new() -> Self {
        // Only for a person watching: a terminal, not a build log.
        if !std::io::stderr().is_terminal() {
            return Progress(None);
        }
        let pb = indicatif::ProgressBar::new_spinner();
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        Progress(Some(pb))
    }
    fn step(&self, msg: impl Into<String>) {
        if let Some(pb) = &self.0 {
            pb.set_message(format!("fatpack: {}", msg.into()));
        }
    }
    fn done(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

/// Locate the device code of every input the link may read.
fn plan(line: &LinkLine) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    for input in &line.inputs {
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
        // A shared library's device code belongs to it (packed when it was linked, or not):
        // it is not read at all.
        let kind = inputs::sniff(&inputs::map_file(path)?);
        if !matches!(
            kind,
            FileKind::Object | FileKind::Archive | FileKind::ThinArchive
        ) {
            continue;
        }
        let scanned = inputs::locate(path)?;
        let sections: Vec<DeviceSection> = scanned
            .sections
            .into_iter()
            .filter(|s| !s.spans.is_empty())
            .collect();
        if sections.is_empty() {
            continue;
        }
        out.push(Planned {
            id: input.id,
            path: path.clone(),
            kind: scanned.kind,
            sections,
        });
    }
    Ok(out)
}

/// A module's origin as recorded in the store: the path as the command line gave it when
/// relative, else its file name, so that the store (and its digest) does not depend on the
/// build folder; nvcc's temporary-file prefix (`tmpxft_00002b42_00000000-6_`, which holds a
/// process id) is dropped for the same reason. Names stay unique: [`Names`] numbers repeats.
fn origin_of(p: &Path) -> String {
    let shown = if p.is_relative() {
        p.display().to_string()
    } else {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    strip_nvcc_temp_prefix(&shown)
}

/// `tmpxft_<hex>_<hex>-<n>_rest` → `rest` (in the last path component).
fn strip_nvcc_temp_prefix(s: &str) -> String {
    let (dir, base) = match s.rfind('/') {
        Some(i) => (&s[..=i], &s[i + 1..]),
        None => ("", s),
    };
    let stripped = base.strip_prefix("tmpxft_").and_then(|rest| {
        let (pid, rest) = rest.split_once('_')?;
        let (ctr, rest) = rest.split_once('-')?;
        let (n, rest) = rest.split_once('_')?;
        let hex = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit());
        (hex(pid)
            && hex(ctr)
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !rest.is_empty())
        .then_some(rest)
    });
    match stripped {
        Some(rest) => format!("{dir}{rest}"),
        None => s.to_string(),
    }
}

/// Write the rewritten copy of one planned input into `dir`; returns its path.
fn rewrite_input(
    p: &Planned,
    seq: usize,
    dir: &Path,
    names: &mut Names,
    extracted: &mut Vec<Extracted>,
) -> Result<PathBuf> {
    let base = p
        .path
        .file_name()
        .map(OsStr::to_owned)
        .unwrap_or_else(|| OsString::from("input"));
    let mut file_name = OsString::from(format!("{seq:04}-"));
    file_name.push(&base);
    let dest = dir.join(file_name);
    let map = inputs::map_file(&p.path)?;
    let mut name_for = |o: &str, i: usize| names.name(o, i);
    match p.kind {
        FileKind::Object => {
            let origin = origin_of(&p.path);
            let (bytes, ex) = rewrite_object(&origin, &map, &p.sections, &mut name_for)?;
            extracted.extend(ex);
            std::fs::write(&dest, bytes).with_context(|| format!("writing {}", dest.display()))?;
        }
        FileKind::Archive | FileKind::ThinArchive => {
            let shown = origin_of(&p.path);
            let mut members = Vec::new();
            for m in inputs::archive::members(&p.path, &shown, &map)? {
                // This member's sections, by where their bytes are (names can repeat in an archive).
                let mut secs: Vec<DeviceSection> = p
                    .sections
                    .iter()
                    .filter(|s| {
                        s.file == m.file && m.range.0 <= s.file_offset && s.file_offset < m.range.1
                    })
                    .cloned()
                    .collect();
                // Stores record the short origin (see origin_of).
                for s in &mut secs {
                    s.origin = m.origin.clone();
                }
                let (name, origin, bytes) = (m.name, m.origin, m.bytes);
                let data = if secs.is_empty() {
                    bytes.to_vec()
                } else {
                    let (b, ex) = rewrite_object(&origin, &bytes, &secs, &mut name_for)?;
                    extracted.extend(ex);
                    b
                };
                members.push(archive::Member { name, data });
            }
            std::fs::write(&dest, archive::write_archive(&members))
                .with_context(|| format!("writing {}", dest.display()))?;
        }
        _ => unreachable!("plan() keeps objects and archives only"),
    }
    Ok(dest)
}

fn e_machine(path: &Path) -> Option<u16> {
    let map = inputs::map_file(path).ok()?;
    inputs::elf_machine(&map).or_else(|| runtime::archive_machine(&map))
}

/// Run `fatpack ld ARGS`; returns the exit code.
pub fn run(argv0: Option<&OsStr>, args: Vec<OsString>) -> Result<i32> {
    real_ld::check_depth()?;
    let real = real_ld::find_real_ld(argv0)?;
    let mut line = LinkLine::parse(&args)?;
    let plain = |line: &LinkLine| -> Result<i32> {
        let argv = line.render(&BTreeMap::new(), &[], &[])?;
        Ok(real_ld::exit_code(real_ld::run(&real, &argv)?))
    };
    if line.is_info_only() {
        return plain(&line);
    }
    let opts = PackOptions::from_line(&line)?;
    // A partial link keeps device code as it is: its output is an input to a later link,
    // which packs it (several containers per section are handled there).
    if line.kind == OutputKind::Relocatable {
        return plain(&line);
    }
    // Tail mode reads no input: it needs neither the library search nor a scan.
    if opts.mode == Mode::Tail {
        return tail_link(&line, &real);
    }
    // Before any work: a bad FATPACK_RUNTIME is the first thing to hear about.
    let runtime_source = runtime::Source::from_env()?;
    let mut cache = ld::DefaultsCache::new();
    ld::resolve_with(&mut line, &real, &mut cache)?;
    let progress = Progress::new();
    progress.step("scanning inputs");
    let t0 = Instant::now();
    let planned = plan(&line)?;
    if planned.is_empty() {
        progress.done();
        return plain(&line);
    }
    let out_dir = line
        .output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let work = tempfile::Builder::new()
        .prefix("fatpack-ld-")
        .tempdir()
        .context("creating a temp dir")?;
    let mut names = Names::default();
    let mut extracted = Vec::new();
    let mut replace = BTreeMap::new();
    for (seq, p) in planned.iter().enumerate() {
        progress.step(format!("rewriting {}", p.path.display()));
        let dest = rewrite_input(p, seq, work.path(), &mut names, &mut extracted)?;
        replace.insert(p.id, dest);
    }
    // The rewritten copies are plain objects or regular archives, whatever the inputs were.
    let first = replace.values().next().expect("planned is not empty");
    let machine = e_machine(first).ok_or_else(|| {
        anyhow!(
            "{}: cannot tell its architecture",
            planned[0].path.display()
        )
    })?;
    let arch = glue::architecture(machine).ok_or_else(|| {
        anyhow!(
            "{}: unsupported machine {machine}",
            planned[0].path.display()
        )
    })?;
    let glue_path = work.path().join("fatpack-glue.o");
    std::fs::write(&glue_path, glue::glue_object(arch)?)?;
    let runtime = runtime_source.materialise(work.path(), machine)?;
    // The output is linked to a temp name beside it and renamed when complete: a failed
    // link leaves nothing behind. ld takes the last -o.
    // ld creates the file itself, so it gets the modes a plain link would give it.
    let tmp_dir = tempfile::Builder::new()
        .prefix(".fatpack-out-")
        .tempdir_in(out_dir)
        .with_context(|| format!("creating a temp dir in {}", out_dir.display()))?;
    let tmp_out = tmp_dir.path().join("out");
    // The runtime goes first, pulled in by -u, so that the libraries the driver adds later
    // (libc, libgcc_s, cudart) resolve what it needs.
    let mut prepend: Vec<OsString> = vec!["-u".into(), "__wrap___cudaRegisterFatBinary".into()];
    prepend.push(glue_path.clone().into_os_string());
    prepend.push(runtime.clone().into_os_string());
    // `--exclude-libs` hides the runtime inside a shared library; an executable needs no
    // hiding, and hiding there breaks links against DSOs that reference cudart.
    let mut append: Vec<OsString> = abi::link_args(line.kind == OutputKind::SharedLibrary)
        .into_iter()
        .map(OsString::from)
        .collect();
    append.push("-o".into());
    append.push(tmp_out.clone().into_os_string());
    let argv = line.render(&replace, &prepend, &append)?;
    progress.step("linking");
    let t_link = Instant::now();
    let status = real_ld::run(&real, &argv)?;
    let link_s = t_link.elapsed().as_secs_f64();
    if !status.success() {
        progress.done();
        return Ok(real_ld::exit_code(status));
    }
    progress.step("writing the store");
    let used = packed::linked_modules(&tmp_out)?;
    let by_name: HashMap<&str, &Extracted> =
        extracted.iter().map(|e| (e.module.as_str(), e)).collect();
    let mut modules = Vec::with_capacity(used.len());
    for s in &used {
        let m = by_name
            .get(s.as_str())
            .ok_or_else(|| anyhow!("{}: links a fatpack module `{}` that this link did not pack (a packed object from another link?)", line.output.display(), s))?;
        modules.push(*m);
    }
    let wopts = WriteOptions {
        level: opts.level,
        dictionary: None,
    };
    let summary = if opts.side_file {
        let w = cubin_store::StoreWriter::create_atomic(packed::side_path(&line.output), wopts)?;
        let mut w = w;
        for m in &modules {
            crate::store::add_module(&mut w, m)?;
        }
        w.commit()?
    } else {
        packed::append_store(&tmp_out, |w| -> Result<_> {
            Ok(crate::store::write_store(w, &modules, wopts)?.1)
        })?
    };
    packed::patch_digest(&tmp_out, &summary.digest)?;
    std::fs::rename(&tmp_out, &line.output)
        .with_context(|| format!("renaming the output to {}", line.output.display()))?;
    progress.done();
    if opts.verbose {
        eprintln!(
            "fatpack: {}: packed {} modules ({} entries, {} unique blobs): {:.1} MiB of device code stored in {:.1} MiB{}; link {:.2}s, total {:.2}s",
            line.output.display(),
            summary.modules,
            summary.entries,
            summary.blobs,
            summary.raw_bytes as f64 / 1048576.0,
            summary.file_len as f64 / 1048576.0,
            if opts.side_file { " (side file)" } else { "" },
            link_s,
            t0.elapsed().as_secs_f64()
        );
        eprintln!("fatpack:   runtime: {}", runtime_source.what());
        for p in &planned {
            eprintln!("fatpack:   rewrote {}", p.path.display());
        }
    }
    Ok(0)
}

/// Tail mode: the same link plus the script that moves the fatbin sections past `.bss`.
fn tail_link(line: &LinkLine, real: &Path) -> Result<i32> {
    let version = real_ld::capture(real, &["--version"])?;
    let banner = String::from_utf8_lossy(&version.stdout);
    if banner.contains("GNU gold") {
        bail!("--fatpack-mode=tail needs GNU ld or lld: gold does not support INSERT in linker scripts (the default packed mode works with gold)");
    }
    let work = tempfile::Builder::new()
        .prefix("fatpack-ld-")
        .tempdir()
        .context("creating a temp dir")?;
    let script = work.path().join("fatbin-tail.ld");
    std::fs::write(&script, TAIL_SCRIPT)
        .with_context(|| format!("writing {}", script.display()))?;
    let argv = line.render(
        &BTreeMap::new(),
        &[],
        &["-T".into(), script.into_os_string()],
    )?;
    Ok(real_ld::exit_code(real_ld::run(real, &argv)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn nvcc_temp_prefix_is_dropped() {
        let f = super::strip_nvcc_temp_prefix;
        assert_eq!(
            f("tmpxft_00002b42_00000000-6_nv_rdc_dlink.o"),
            "nv_rdc_dlink.o"
        );
        assert_eq!(f("sub/tmpxft_1a_2-10_x.o"), "sub/x.o");
        assert_eq!(f("tmpxft_zz_00-6_x.o"), "tmpxft_zz_00-6_x.o");
        assert_eq!(f("kernels.o"), "kernels.o");
        assert_eq!(f("tmpxft_1_2-3_"), "tmpxft_1_2-3_");
    }
}
