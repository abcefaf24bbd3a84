//! `fatpack prune` over a whole package, one build shipped per GPU:
//!
//! - a folder (an installed prefix, a Nix output, a conda package's files): copied, every
//!   ELF file with device code in it pruned, everything else as it was: symlinks stay
//!   symlinks, hard links stay hard links, modes stay ([`folder`]);
//! - a Python wheel: checked whole against its `RECORD` before anything of it is trusted,
//!   every ELF member pruned, `RECORD` written anew from what was written, and the GPUs it
//!   still serves recorded as a PEP 817/825 wheel variant (`variant.json`, the
//!   `nvidia :: sm_arch` property) or, for per-variant indexes, in the version's local
//!   label ([`wheel`], [`variant`]).
//!
//! Every package is treated as hostile: member names that would land outside the install
//! folder, duplicates, members `RECORD` does not vouch for, and damaged device code are
//! refused, naming the member, and nothing is committed. The output is built beside its
//! destination and renamed into place only once whole and read back; the input is never
//! modified.

mod compress;
mod conda;
mod deb;
mod folder;
mod format;
mod index;
mod kind;
mod members;
mod metadata;
mod names;
mod parallel_bzip2;
mod record;
mod sniff;
pub mod split;
mod tarball;
pub mod variant;
mod wheel;
mod zip_layout;

pub use compress::Effort;
pub use format::{EachBinary, PackageFormat};
pub use index::{index, IndexReport};
pub use kind::{for_each_binary, PackageKind};
pub use variant::WheelForm;

use std::path::{Path, PathBuf};

use crate::commit::{Outputs, Staged};
use crate::inputs::{self, FileKind};
use crate::prune::{prune_data, InputBytes, PruneError, PruneReport, Selection};
pub use crate::prune::{PackageFile, Relocate, Written};

/// How a prune writes what it writes, beyond what it keeps.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// How a wheel records what it was pruned for.
    pub wheel_form: WheelForm,
    /// A folder or a file: paths to replace in every file and link (`--replace-path`).
    pub relocate: Relocate,
    /// A conda or Debian package: how hard its rewritten archives are compressed.
    pub compression: Effort,
}

/// `fatpack prune`: `input` pruned into `output`, keeping only what `sel` selects. A
/// package (any [`PackageKind`]): every ELF file in it pruned, and the package written
/// anew; anything else, the file itself ([`crate::prune::prune_file`]).
pub fn prune(
    input: &Path,
    output: &Path,
    sel: &Selection,
    opts: &Options,
) -> Result<PruneReport, PruneError> {
    let outs = Outputs::new(&[input]);
    outs.check(output)?;
    // One decision of what a path is, shared with split and inspect ([`PackageKind::of`]).
    match PackageKind::of(input) {
        None => crate::prune::prune_file(input, output, sel, &opts.relocate, outs),
        Some(kind) => kind::prune_as(kind.format(), input, output, sel, opts, outs),
    }
}

/// Splits the package `input` (any [`PackageKind`]) into `into`; `effort`: how hard
/// a conda or Debian package's archives are compressed. `None` if `input` is no package.
pub fn split_package(
    input: &Path,
    into: &Path,
    effort: Effort,
) -> Result<Option<split::PackageSplit>, PruneError> {
    match PackageKind::of(input) {
        None => Ok(None),
        Some(kind) => kind.format().split(input, into, effort).map(Some),
    }
}

/// Whether prune rewrites `data` (the file `path`): an ELF file or archive with device code.
/// One whose device code cannot be read fails the whole package, as it fails alone: a
/// package never ships a damaged fat binary unpruned under a label that says it was pruned.
fn has_device_code(path: &Path, data: &[u8]) -> Result<bool, PruneError> {
    let damaged = |why: String| {
        PruneError::Input(inputs::InputError::Malformed {
            origin: path.display().to_string(),
            message: format!("a damaged ELF file: {why}"),
        })
    };
    // A 64-bit little-endian ELF file (the class of every host fatpack reads) whose headers
    // do not read is damaged, and fails the package as it fails alone: it could be a fat
    // binary, and copied unpruned it would ship under a label that says it was pruned.
    // Other classes (32-bit firmware, big-endian) cannot hold device code: copied.
    if data.starts_with(b"\x7fELF") && data.get(4..6) == Some(&[2, 1]) {
        if let Err(e) = crate::elf::Layout::parse(data) {
            return Err(damaged(e.to_string()));
        }
    }
    let kind = inputs::sniff(data);
    if !matches!(
        kind,
        FileKind::Object | FileKind::SharedLibrary | FileKind::Executable | FileKind::Archive
    ) {
        return Ok(false);
    }
    // A packed output: its device code is in its store, which prune rewrites.
    if crate::packed::slot_range(data).is_some() {
        return Ok(true);
    }
    if let (_, Some(layout)) = inputs::classify(data) {
        if let Some(why) = layout.bad_segment(data.len() as u64) {
            return Err(damaged(why.to_string()));
        }
    }
    let scanned = inputs::scan_at(path, data, inputs::Depth::Spans)?;
    Ok(scanned.sections.iter().any(|d| !d.spans.is_empty()))
}

/// Prunes one member into a temp file beside `dest` (where it will go): `Some(file)` if it
/// has device code (the file keeps the holes an in-place prune punches). `shown` names it
/// in errors.
fn prune_member(
    shown: &Path,
    data: &InputBytes,
    sel: &Selection,
    dest: &Path,
    outs: &Outputs,
    out: &mut PruneReport,
) -> Result<Option<Staged>, PruneError> {
    match prune_with_side(shown, data, sel, dest, outs, out)? {
        Some((_, Some(_))) => Err(PruneError::Package {
            path: shown.to_path_buf(),
            message: "a packed binary with a side-file store, which a package cannot carry \
                      beside it; prune the folder it is installed in"
                .into(),
        }),
        Some((tmp, None)) => Ok(Some(tmp)),
        None => Ok(None),
    }
}

/// [`prune_member`] that also gives back a packed binary's new side-file store (which a
/// folder writes beside the binary, as `BIN.fatpack`).
fn prune_with_side(
    shown: &Path,
    bytes: &InputBytes,
    sel: &Selection,
    dest: &Path,
    outs: &Outputs,
    out: &mut PruneReport,
) -> Result<Option<(Staged, Option<Staged>)>, PruneError> {
    let data = bytes.data();
    if !has_device_code(shown, data)? {
        return Ok(None);
    }
    let mut tmp = outs.file(dest)?;
    let release = |off, len| bytes.release(off, len);
    let (report, side) = prune_data(shown, data, &release, sel, tmp.named(), dest, outs)?;
    *out = report;
    Ok(Some((tmp, side)))
}

/// Adds one pruned file to a package's report.
fn add(report: &mut PruneReport, path: String, before: u64, after: u64, one: PruneReport) {
    report.entries_before += one.entries_before;
    report.entries_after += one.entries_after;
    report.bytes_before += one.bytes_before;
    report.bytes_after += one.bytes_after;
    report.runs.merge(&one.runs);
    for (cap, names) in &one.chosen {
        for (name, n) in names {
            *report
                .chosen
                .entry(*cap)
                .or_default()
                .entry(name.clone())
                .or_default() += n;
        }
    }
    report.files.push(PackageFile {
        path,
        size_before: before,
        size_after: after,
        report: one,
    });
}

/// What a package variant may claim: the GPUs that still get, from every module of every
/// file, the entry the whole package gave them. A package with no fat binary, or whose
/// prune leaves no GPU served as before, is refused: its variant would claim nothing.
fn claims(input: &Path, report: &PruneReport, sel: &Selection) -> Result<Vec<u32>, PruneError> {
    let refuse = |m: &str| {
        Err(PruneError::Package {
            path: input.to_path_buf(),
            message: m.to_string(),
        })
    };
    if report.files.is_empty() {
        return refuse(
            "has no ELF file with device code in it: nothing to prune, and no GPU to label it for",
        );
    }
    let claims = report.runs.capabilities();
    if claims.is_empty() {
        return refuse(
            "after this prune no GPU gets from it what the whole package gave it: the \
             variant would claim nothing; refused",
        );
    }
    // The label names the GPUs asked for: each must be one the package serves as before, or
    // the label would say one thing and the properties another (an sm90 variant pruned
    // `--for 8.0` has nothing for 8.0, and still runs only on 9.0).
    if let Selection::For(t) = sel {
        let missing: Vec<String> = t
            .gpus
            .iter()
            .filter(|c| !claims.contains(c))
            .map(|&c| fatpack_format::select::capability_string(c))
            .collect();
        if !missing.is_empty() {
            let serves: Vec<String> = claims
                .iter()
                .map(|&c| fatpack_format::select::capability_string(c))
                .collect();
            return refuse(&format!(
                "gives GPU {} no code of its own (it serves {}): a package labelled for it \
                 would not run there as the label says; refused",
                missing.join(", "),
                serves.join(", ")
            ));
        }
    }
    Ok(claims)
}

/// Where a package goes: `output` itself if it carries the package's name (`name`, which
/// the package's installers check: `why`), or that name inside the folder `output`, which
/// is made if missing (a package's name carries its version and label, so `-o` names the
/// folder it goes into, as `split --into` does).
fn destination(
    output: &Path,
    name: &str,
    why: &str,
    outs: &mut Outputs,
) -> Result<PathBuf, PruneError> {
    if let Err(why) = metadata::plain_file_name(name) {
        return Err(PruneError::Package {
            path: output.to_path_buf(),
            message: format!("the package's name {name:?} is {why}; refused"),
        });
    }
    let named = output.file_name().and_then(|n| n.to_str());
    if output.is_dir() {
        return Ok(output.join(name));
    }
    if named == Some(name) {
        return Ok(output.to_path_buf());
    }
    let looks_like_a_package = named.is_some_and(|n| {
        [".whl", ".conda", ".tar.bz2", ".deb"]
            .iter()
            .any(|e| n.ends_with(e))
    });
    if looks_like_a_package {
        return Err(PruneError::Package {
            path: output.to_path_buf(),
            message: format!(
                "the pruned package must be called {name} ({why}); name a folder to get it"
            ),
        });
    }
    // A folder to write the package into, made now (and removed again if the command fails).
    outs.folder(output)?;
    Ok(output.join(name))
}

/// The entries of a folder, sorted by name (the same order on every file system).
fn sorted_entries(dir: &Path) -> Result<Vec<std::fs::DirEntry>, PruneError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(crate::error::io_at(dir))?
        .collect::<Result<_, _>>()
        .map_err(crate::error::io_at(dir))?;
    entries.sort_by_key(|e| e.file_name());
    Ok(entries)
}

/// Prunes a file spooled from a package's archive (`e`, whose name `input!name` is shown in
/// errors) where it lies: its spool file becomes the pruned one, its sha256 and size follow.
/// Returns the file's report and its size before, if it had device code.
fn prune_spooled(
    input: &Path,
    e: &mut tarball::Entry,
    sel: &Selection,
    scratch: &Path,
    outs: &Outputs,
) -> Result<Option<(PruneReport, u64)>, PruneError> {
    let Some((path, sha, len)) = &mut e.data else {
        return Ok(None);
    };
    // Only an ELF file or an archive can hold device code: anything else is never read.
    if !sniff::file_is_binary(path)? {
        return Ok(None);
    }
    let data = InputBytes::read(path, &Relocate::default())?;
    let shown = PathBuf::from(format!("{}!{}", input.display(), e.name));
    let mut one = PruneReport::default();
    let Some(tmp) = prune_member(&shown, &data, sel, &scratch.join("pruned"), outs, &mut one)?
    else {
        return Ok(None);
    };
    drop(data);
    std::fs::rename(tmp.path(), &*path).map_err(crate::error::io_at(path))?;
    let before = *len;
    (*sha, *len) = tarball::sha256_file(path)?;
    Ok(Some((one, before)))
}

/// What is wrong with a zip file the zip reader refused, in words: its i/o errors say only
/// "i/o error", and a truncated wheel is the common case.
pub(super) fn zip_problem(e: &zip::result::ZipError) -> String {
    match e {
        zip::result::ZipError::Io(io) => {
            format!("truncated or damaged: its zip directory cannot be read ({io})")
        }
        other => format!("not a readable zip file: {other}"),
    }
}
