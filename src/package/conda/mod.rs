//! A conda package pruned (`.conda` or `.tar.bz2`), as CEP 46 lets a channel serve one
//! build per GPU: the fat package and its variants sit in one channel, and the solver picks.
//!
//! - Each variant depends on the `cuda-arch` metapackage over exactly the GPUs it still
//!   serves as the whole build did (`cuda-arch ==9.0`, `>=8.6,<=9.0|==10.0`). That is the
//!   convention of CEP 46's implementation (conda-incubator/nvidia-virtual-packages) and
//!   conda-forge: one `cuda-arch` version per compute capability, each `run_constrained`
//!   by the virtual package `__cuda_arch` (the lowest compute capability of the machine's
//!   GPUs), so on a machine with a GPU exactly one `cuda-arch` is installable and a variant
//!   whose range misses it cannot be taken: the solver falls back to the fat package.
//!   Each variant also depends on `__cuda_arch` itself: where no client provides it (a CPU
//!   build box, a client without CEP 46) `cuda-arch`'s constraint holds vacuously, and the
//!   variant's higher build number would win on every GPU; so there only the fat package
//!   installs, unless the user names the GPU (`CONDA_OVERRIDE_CUDA_ARCH=9.0`).
//! - Its build string gains the label (`h1234_0` -> `h1234_0_sm90`) and its build number
//!   is raised past the fat package's, by more the fewer GPUs it claims: where a variant
//!   fits, the solver prefers it to the fat package, and the most tailored one to a wider
//!   one.
//! - `info/paths.json` is the contract: before anything is pruned, every file of the
//!   package is checked against it (listed, same sha256 and size, same kind), names that
//!   leave the prefix, duplicates and links out of the prefix are refused; the new
//!   `paths.json` lists the pruned files' new hashes and sizes.
//!
//! The package is spooled entry by entry into a scratch folder under numbered names (never
//! under the names the archive gives), so memory stays bounded and a hostile name never
//! reaches the file system.

mod split;

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use fatpack_format::select::{capability_string, REAL_GPUS};

use super::compress::{Codec, Effort};
use super::tarball::{self, spool_tar, write_tar, Entry, Kind};
use super::variant;
use super::PackageFormat;
use super::{add, metadata, names, prune_spooled, Written};
use crate::commit::{Outputs, Staged};
use crate::error::io_at;
use crate::prune::{PruneError, PruneReport, Selection};

/// The two package formats conda reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `.conda`: a stored zip of `metadata.json`, `pkg-*.tar.zst` and `info-*.tar.zst`.
    Conda,
    /// `.tar.bz2`: one bzip2 tar.
    TarBz2,
}

impl Format {
    /// The file name's suffix.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Format::Conda => ".conda",
            Format::TarBz2 => ".tar.bz2",
        }
    }
}

/// The format `input` is named as, if a conda package.
pub(crate) fn format_of(input: &Path) -> Option<Format> {
    let name = input.file_name()?.to_str()?;
    if name.ends_with(".conda") {
        Some(Format::Conda)
    } else if name.ends_with(".tar.bz2") {
        Some(Format::TarBz2)
    } else {
        None
    }
}

/// `info/*.json` are read whole; nothing larger is one.
const SMALL: u64 = 64 << 20;

fn bad(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The package, spooled.
pub(super) struct Spooled {
    pub entries: Vec<Entry>,
    /// `.conda`: the outer zip's members in order (name, bytes for `metadata.json`).
    pub outer: Vec<String>,
    pub metadata_json: Option<Vec<u8>>,
}

/// Spools the package `input` (`stem`: `{name}-{version}-{build}`, which names the inner
/// archives of a `.conda`).
pub(super) fn spool(
    input: &Path,
    stem: &str,
    format: Format,
    spool: &Path,
) -> Result<Spooled, PruneError> {
    let file = std::fs::File::open(input).map_err(io_at(input))?;
    let mut entries = Vec::new();
    match format {
        Format::TarBz2 => {
            let bz = Codec::Bzip2
                .reader(BufReader::new(file))
                .map_err(io_at(input))?;
            spool_tar(input, "its tar archive", bz, false, spool, &mut entries)?;
            for e in &mut entries {
                e.info = e.name == "info" || e.name.starts_with("info/");
            }
            Ok(Spooled {
                entries,
                outer: Vec::new(),
                metadata_json: None,
            })
        }
        Format::Conda => {
            let mut zip = zip::ZipArchive::new(BufReader::new(file))
                .map_err(|e| bad(input, super::zip_problem(&e)))?;
            super::zip_layout::check(input, &mut zip)?;
            let mut outer = Vec::new();
            let mut metadata_json = None;
            for i in 0..zip.len() {
                let mut m = zip
                    .by_index(i)
                    .map_err(|e| bad(input, format!("member {i}: {e}")))?;
                let name = m.name().to_string();
                outer.push(name.clone());
                if name == "metadata.json" {
                    let mut b = Vec::new();
                    (&mut m)
                        .take(SMALL + 1)
                        .read_to_end(&mut b)
                        .map_err(|e| bad(input, format!("metadata.json: {e}; refused")))?;
                    if b.len() as u64 > SMALL {
                        return Err(bad(input, "metadata.json: too large for what it is"));
                    }
                    metadata_json = Some(b);
                } else if name == format!("pkg-{stem}.tar.zst")
                    || name == format!("info-{stem}.tar.zst")
                {
                    let info = name.starts_with("info-");
                    let zst = zstd::stream::read::Decoder::new(&mut m).map_err(io_at(input))?;
                    spool_tar(input, &name, zst, info, spool, &mut entries)?;
                } else {
                    return Err(bad(
                        input,
                        format!("member {name:?} is not part of a .conda package; refused"),
                    ));
                }
            }
            for part in [
                "metadata.json".to_string(),
                format!("pkg-{stem}.tar.zst"),
                format!("info-{stem}.tar.zst"),
            ] {
                if !outer.contains(&part) {
                    return Err(bad(input, format!("no {part} in it")));
                }
            }
            Ok(Spooled {
                entries,
                outer,
                metadata_json,
            })
        }
    }
}

/// `{name}-{version}-{build}` from the file name.
pub(super) fn conda_stem(input: &Path) -> Result<String, PruneError> {
    let name = input
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    name.strip_suffix(".conda")
        .or_else(|| name.strip_suffix(".tar.bz2"))
        .map(str::to_string)
        .ok_or_else(|| {
            bad(
                input,
                "not named {name}-{version}-{build}.conda or .tar.bz2",
            )
        })
}

/// The ELF files and archives of the package, spooled under `scratch`: (name, file).
pub(super) fn spool_binaries(
    input: &Path,
    format: Format,
    scratch: &Path,
) -> Result<Vec<(String, PathBuf)>, PruneError> {
    let stem = conda_stem(input)?;
    tarball::binaries(spool(input, &stem, format, scratch)?.entries)
}

pub(super) fn read_json(
    input: &Path,
    entries: &[Entry],
    name: &str,
) -> Result<serde_json::Value, PruneError> {
    let e = entries.iter().find(|e| e.name == name).ok_or_else(|| {
        bad(
            input,
            format!("no {name} in it: it cannot be checked; refused"),
        )
    })?;
    let (path, _, len) = e
        .data
        .as_ref()
        .ok_or_else(|| bad(input, format!("{name} is not a file")))?;
    if *len > SMALL {
        return Err(bad(
            input,
            format!("{name}: {len} bytes, too large for what it is"),
        ));
    }
    let text = std::fs::read(path).map_err(io_at(path))?;
    serde_json::from_slice(&text).map_err(|e| bad(input, format!("{name}: {e}")))
}

/// Every entry outside `info/` against `paths.json`: listed, the same kind, sha256 and size;
/// every line of `paths.json` present; no name twice; no link out of the prefix.
pub(super) fn check(
    input: &Path,
    entries: &[Entry],
    paths: &serde_json::Value,
) -> Result<(), PruneError> {
    let listed = paths["paths"]
        .as_array()
        .ok_or_else(|| bad(input, "info/paths.json has no \"paths\" list"))?;
    let mut want: BTreeMap<&str, &serde_json::Value> = BTreeMap::new();
    for p in listed {
        let path = p["_path"]
            .as_str()
            .ok_or_else(|| bad(input, "info/paths.json: an entry without _path"))?;
        if want.insert(path, p).is_some() {
            return Err(bad(
                input,
                format!("info/paths.json lists {path} twice; refused"),
            ));
        }
    }
    tarball::check_tree(input, entries, names::Absolute::Refused)?;
    for e in entries {
        if e.info {
            continue;
        }
        let Some(p) = want.remove(e.name.as_str()) else {
            if e.kind == Kind::Dir {
                continue;
            }
            return Err(bad(
                input,
                format!(
                    "{} is not in info/paths.json: nothing vouches for it; refused",
                    e.name
                ),
            ));
        };
        let path_type = p["path_type"].as_str().unwrap_or("hardlink");
        let kind_ok = matches!(
            (path_type, &e.kind),
            ("hardlink", Kind::File | Kind::HardLink(_))
                | ("softlink", Kind::Symlink(_))
                | ("directory", Kind::Dir)
        );
        if !kind_ok {
            return Err(bad(
                input,
                format!("{}: info/paths.json says {path_type}; refused", e.name),
            ));
        }
        // A hard link is checked as the file it shares bytes with: paths.json lists it with
        // that file's sha256 and size.
        if let Some((_, sha, len)) = tarball::bytes_of(entries, e) {
            let sha_ok = p["sha256"].as_str() == Some(sha.as_str());
            let len_ok = p["size_in_bytes"].as_u64().is_none_or(|s| s == *len);
            if !sha_ok || !len_ok {
                return Err(bad(
                    input,
                    format!(
                        "{} does not match info/paths.json (its sha256 or size differs: damaged \
                         or altered); refused",
                        e.name
                    ),
                ));
            }
        }
    }
    if let Some(missing) = want.keys().next() {
        return Err(bad(
            input,
            format!("info/paths.json lists {missing}, which is not in the package; refused"),
        ));
    }
    Ok(())
}

/// What `index.json` says the package is, each field checked against conda's syntax and
/// against the file name (`{name}-{version}-{build}`): the output's name and metadata are
/// built from these alone.
pub(super) struct Identity {
    pub build: String,
    pub build_number: u64,
}

pub(super) fn identity(
    input: &Path,
    index: &serde_json::Value,
    stem: &str,
) -> Result<Identity, PruneError> {
    let text = |key: &str| {
        index[key].as_str().ok_or_else(|| {
            bad(
                input,
                format!("info/index.json has no {key} string; refused"),
            )
        })
    };
    let (name, version, build) = (text("name")?, text("version")?, text("build")?);
    for (key, value, check) in [
        ("name", name, metadata::conda_name as fn(&str) -> _),
        ("version", version, metadata::conda_version),
        ("build", build, metadata::conda_build),
    ] {
        check(value).map_err(|why| {
            bad(
                input,
                format!("info/index.json {key}: {value:?} is {why}; refused"),
            )
        })?;
    }
    let build_number = metadata::conda_build_number(&index["build_number"]).map_err(|why| {
        bad(
            input,
            format!(
                "info/index.json build_number {}: {why}; refused",
                index["build_number"]
            ),
        )
    })?;
    if stem != format!("{name}-{version}-{build}") {
        return Err(bad(
            input,
            format!(
                "its file name does not match its info/index.json ({name}-{version}-{build}); \
                 refused"
            ),
        ));
    }
    Ok(Identity {
        build: build.to_string(),
        build_number,
    })
}

/// The metapackage a variant depends on (see the module header).
pub const CUDA_ARCH: &str = "cuda-arch";
/// CEP 46's virtual package: the lowest compute capability of the machine's GPUs.
pub(super) const VIRTUAL: &str = "__cuda_arch";

/// A dependency on a GPU's capability, direct or through the metapackage: a re-pruned
/// variant's is replaced, never stacked.
pub(super) fn is_cuda_arch_dep(dep: &str) -> bool {
    let name = dep
        .split([' ', '=', '<', '>', '!'])
        .next()
        .unwrap_or_default();
    name == CUDA_ARCH || name == VIRTUAL
}

/// `==9.0`, `>=8.6,<=9.0|==10.0`: the real GPUs `claims`, runs of them as ranges.
pub fn cuda_arch_spec(claims: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    let mut prev: Option<usize> = None;
    for &c in claims {
        let at = REAL_GPUS.iter().position(|&g| g == c);
        match (runs.last_mut(), prev, at) {
            (Some(run), Some(p), Some(i)) if i == p + 1 => run.1 = c,
            _ => runs.push((c, c)),
        }
        prev = at;
    }
    runs.iter()
        .map(|&(a, b)| match a == b {
            true => format!("=={}", capability_string(a)),
            false => format!(">={},<={}", capability_string(a), capability_string(b)),
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// A conda package: verified, every fat ELF file pruned, relabelled, `paths.json` and
/// `index.json` written anew. `output`: the new package, or a folder to write it into.
pub(crate) fn prune_conda(
    input: &Path,
    format: Format,
    output: &Path,
    sel: &Selection,
    effort: Effort,
    mut outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let stem = conda_stem(input)?;
    let scratch = outs.scratch(output)?;
    let mut pkg = spool(input, &stem, format, scratch.path())?;
    let paths = read_json(input, &pkg.entries, "info/paths.json")?;
    let mut index = read_json(input, &pkg.entries, "info/index.json")?;
    identity(input, &index, &stem)?;
    check(input, &pkg.entries, &paths)?;
    let mut report = PruneReport::default();
    let mut changed: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let progress = crate::progress::Progress::new();
    let count = pkg.entries.len();
    for (i, e) in pkg.entries.iter_mut().enumerate().filter(|(_, e)| !e.info) {
        progress.step(format!("prune: {} ({}/{count})", e.name, i + 1));
        let Some((one, before)) = prune_spooled(input, e, sel, scratch.path(), &outs)? else {
            continue;
        };
        let (_, sha, len) = e.data.as_ref().expect("a pruned entry is a file");
        add(&mut report, e.name.clone(), before, *len, one);
        changed.insert(e.name.clone(), (sha.clone(), *len));
    }
    let claims = super::claims(input, &report, sel)?;
    let label = variant::label(sel).replace('.', "_");
    let Identity {
        build,
        build_number,
        ..
    } = identity(input, &index, &stem)?;
    let new_build = format!("{build}_{label}");
    let bump = 1 + (REAL_GPUS.len() - claims.len()) as u64;
    let build_number = build_number + bump;
    let spec = format!("{CUDA_ARCH} {}", cuda_arch_spec(&claims));
    index["build"] = serde_json::json!(new_build);
    index["build_number"] = serde_json::json!(build_number);
    // The virtual package itself, too: `cuda-arch`'s constraint on it holds vacuously where
    // it is absent (a CPU build box, a client without CEP 46), and there the variant's
    // higher build number would win on every GPU. Without `__cuda_arch` (or
    // `CONDA_OVERRIDE_CUDA_ARCH`) no variant is installable: the fat package is taken.
    let specs = [spec.clone(), VIRTUAL.to_string()];
    match index["depends"].as_array_mut() {
        Some(deps) => {
            deps.retain(|d| !d.as_str().is_some_and(is_cuda_arch_dep));
            deps.extend(specs.iter().map(|s| serde_json::json!(s)));
        }
        None => index["depends"] = serde_json::json!(specs),
    }
    // A hard link to a pruned file shares its new bytes, and so its new line.
    for e in pkg.entries.iter().filter(|e| !e.info) {
        if let Kind::HardLink(t) = &e.kind {
            if let Some(line) = changed.get(t).cloned() {
                changed.insert(e.name.clone(), line);
            }
        }
    }
    let mut new_paths = paths;
    for p in new_paths["paths"].as_array_mut().into_iter().flatten() {
        if let Some((sha, len)) = p["_path"].as_str().and_then(|n| changed.get(n)) {
            p["sha256"] = serde_json::json!(sha);
            p["size_in_bytes"] = serde_json::json!(len);
        }
    }
    replace_json(&mut pkg.entries, "info/index.json", &index, scratch.path())?;
    replace_json(
        &mut pkg.entries,
        "info/paths.json",
        &new_paths,
        scratch.path(),
    )?;
    let old_tail = stem.strip_suffix(&build).ok_or_else(|| {
        bad(
            input,
            format!("its name does not end in its build string {build}"),
        )
    })?;
    let new_stem = format!("{old_tail}{new_build}");
    let file_name = format!("{new_stem}{}", format.suffix());
    let dest = super::destination(
        output,
        &file_name,
        "conda checks it against index.json",
        &mut outs,
    )?;
    outs.check(&dest)?;
    let tmp = write_checked(pkg, (format, effort), &stem, &new_stem, &outs, &dest)?;
    drop(new_paths);
    tmp.permissions_of(input)?;
    drop(scratch);
    outs.commit(vec![tmp])?;
    report.package = Some(Written {
        path: dest,
        version: index["version"].as_str().map(str::to_string),
        label: Some(format!("{new_build} (depends on {spec})")),
        claims,
        beside_fat: None,
    });
    Ok(report)
}

/// Sets the spooled file `name` to `doc`, as conda-build writes it (sorted keys, 2 spaces).
pub(super) fn replace_json(
    entries: &mut [Entry],
    name: &str,
    doc: &serde_json::Value,
    scratch: &Path,
) -> Result<(), PruneError> {
    let Some(e) = entries.iter_mut().find(|e| e.name == name) else {
        return Ok(());
    };
    let text = pretty(doc);
    let at = scratch.join(format!("new-{}", name.replace('/', "-")));
    std::fs::write(&at, &text).map_err(io_at(&at))?;
    e.data = Some((at, String::new(), text.len() as u64));
    Ok(())
}

/// Writes `pkg` as the package `dest` (named `{new_stem}` and the format's suffix; its
/// `.conda` parts were named after `stem`), then reads it back from the file alone, spooled
/// again and checked against its own `paths.json` and `index.json`, before it may be
/// committed. The entries held for writing go first (a package of 50,000 entries would
/// hold them twice).
pub(super) fn write_checked(
    pkg: Spooled,
    (format, effort): (Format, Effort),
    stem: &str,
    new_stem: &str,
    outs: &Outputs,
    dest: &Path,
) -> Result<Staged, PruneError> {
    let mut tmp = outs.file(dest)?;
    write_package(&pkg, format, effort, stem, new_stem, &mut tmp, dest)?;
    drop(pkg);
    let back_scratch = outs.scratch(dest)?;
    let back = spool(tmp.path(), new_stem, format, back_scratch.path())
        .map_err(|e| bad(dest, format!("does not read back: {e}")))?;
    let back_paths = read_json(dest, &back.entries, "info/paths.json")?;
    check(dest, &back.entries, &back_paths)?;
    identity(
        dest,
        &read_json(dest, &back.entries, "info/index.json")?,
        new_stem,
    )?;
    Ok(tmp)
}

/// JSON as conda-build writes it (sorted keys, 2 spaces).
pub(super) fn pretty(doc: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).expect("a JSON value serializes");
    text.push('\n');
    text
}

fn write_package(
    pkg: &Spooled,
    format: Format,
    effort: Effort,
    stem: &str,
    new_stem: &str,
    tmp: &mut Staged,
    dest: &Path,
) -> Result<(), PruneError> {
    let io = io_at(dest);
    match format {
        Format::TarBz2 => {
            let file = std::io::BufWriter::new(tmp.as_file());
            Codec::Bzip2
                .encode(effort, file, |w| write_tar(&pkg.entries, |_| true, w))
                .and_then(|mut w| w.flush())
                .map_err(&io)?;
        }
        Format::Conda => {
            let file = tmp.named().as_file_mut();
            let mut zw = zip::ZipWriter::new(file);
            let opts = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored)
                .last_modified_time(zip::DateTime::default())
                .large_file(true);
            for name in &pkg.outer {
                let zerr = |e: zip::result::ZipError| bad(dest, e.to_string());
                if name == "metadata.json" {
                    zw.start_file(name.as_str(), opts).map_err(zerr)?;
                    zw.write_all(pkg.metadata_json.as_deref().unwrap_or_default())
                        .map_err(&io)?;
                    continue;
                }
                let info = name.starts_with("info-");
                let new_name = name.replacen(stem, new_stem, 1);
                zw.start_file(new_name.as_str(), opts).map_err(zerr)?;
                Codec::Zstd
                    .encode(effort, &mut zw, |w| {
                        write_tar(&pkg.entries, |e| e.info == info, w)
                    })
                    .map_err(&io)?;
            }
            zw.finish().map_err(|e| bad(dest, e.to_string()))?;
        }
    }
    Ok(())
}

/// A conda package, `.conda` or `.tar.bz2`, as the package layer sees it ([`PackageFormat`]).
pub(crate) struct Conda;

impl PackageFormat for Conda {
    fn name(&self) -> &'static str {
        "conda package"
    }

    fn claims(&self, path: &Path) -> bool {
        format_of(path).is_some()
    }

    fn prune(
        &self,
        input: &Path,
        output: &Path,
        sel: &Selection,
        opts: &super::Options,
        outs: Outputs,
    ) -> Result<PruneReport, PruneError> {
        let format = format_of(input).expect("a conda package's name");
        prune_conda(input, format, output, sel, opts.compression, outs)
    }

    fn split(
        &self,
        input: &Path,
        into: &Path,
        effort: super::Effort,
    ) -> Result<super::split::PackageSplit, PruneError> {
        split::split_conda(input, into, effort)
    }

    fn for_each_binary(
        &self,
        input: &Path,
        scratch: &Path,
        f: super::EachBinary<'_>,
    ) -> Result<(), PruneError> {
        let format = format_of(input).expect("a conda package's name");
        for (name, path) in spool_binaries(input, format, scratch)? {
            f(&name, &path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_become_one_cuda_arch_range_per_run() {
        assert_eq!(cuda_arch_spec(&[90]), "==9.0");
        assert_eq!(cuda_arch_spec(&[86, 87, 88, 89, 90]), ">=8.6,<=9.0");
        assert_eq!(cuda_arch_spec(&[80, 90]), "==8.0|==9.0");
        assert_eq!(cuda_arch_spec(&[80, 90, 100, 101]), "==8.0|>=9.0,<=10.1");
    }

    #[test]
    fn a_capability_dependency_is_recognised_in_every_spelling() {
        for dep in [
            "cuda-arch ==9.0",
            "cuda-arch>=8.6",
            "__cuda_arch ==9.0",
            "cuda-arch",
        ] {
            assert!(is_cuda_arch_dep(dep), "{dep}");
        }
        for dep in [
            "cuda-arch-tools",
            "cuda-version >=12",
            "__cuda >=12",
            "libcublas",
        ] {
            assert!(!is_cuda_arch_dep(dep), "{dep}");
        }
    }
}
