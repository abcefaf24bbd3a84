//! `fatpack split` of a conda package (`.conda` or `.tar.bz2`) whose binaries fatpack packed:
//! the roles of [`crate::package::split`], in conda's terms, all in one channel folder:
//!
//! - `{name}-host`: every file of the input, each packed binary replaced by its host part;
//!   the input's `depends`, `constrains` and other metadata, renamed.
//! - `{name}-{label}` (`cutfix-sm90`, `cutfix-compute90`): one architecture's packs at the
//!   paths of their binaries, depending on the host at the input's version and build.
//! - `{name}` (the input's own name, version, build and build number): no files, depending
//!   on the host and every device package. What is installed when nothing selects a GPU (a
//!   CPU build box, a client without CEP 46, a package depending on `{name}`) runs
//!   everywhere the fat package ran.
//! - Variants of `{name}` (build `{build}_{label}`), one per set of device packages some GPU
//!   loads from exactly, depending on the host, those device packages, `cuda-arch` over the
//!   GPUs the set serves as the fat package did, and `__cuda_arch` itself: as prune's conda
//!   variants ([`super`]), only a machine whose client names its GPU (CEP 46, or
//!   `CONDA_OVERRIDE_CUDA_ARCH`) can take one, and the build number, raised by more the fewer
//!   GPUs a variant serves, makes the solver take the one made for the machine's GPU.
//!
//! The input is checked as prune checks it (every file against `paths.json`, names, links);
//! every package written is read back against its own `paths.json` and `index.json`; all
//! are committed together or none.

use std::collections::BTreeMap;
use std::path::Path;

use fatpack_format::select::REAL_GPUS;
use fatpack_format::split::PackKind;

use super::{self as conda, Format, Spooled, CUDA_ARCH, VIRTUAL};
use crate::commit::{Outputs, Staged};
use crate::error::io_at;
use crate::package::compress::Effort;
use crate::package::split::{pack_label, Found, PackageSplit, Role, Written};
use crate::package::tarball::{self, Entry};
use crate::package::variant;
use crate::prune::PruneError;

/// Splits the conda package `input` into the channel folder `into` (see the module's doc).
pub fn split_conda(input: &Path, into: &Path, effort: Effort) -> Result<PackageSplit, PruneError> {
    let format = conda::format_of(input).ok_or_else(|| PruneError::Package {
        path: input.to_path_buf(),
        message: "not named as a conda package (.conda or .tar.bz2)".into(),
    })?;
    let stem = conda::conda_stem(input)?;
    let mut outs = Outputs::new(&[input]);
    let all_path = into.join(format!("{stem}{}", format.suffix()));
    outs.check(&all_path)?;
    outs.folder(into)?;
    let scratch = outs.scratch(&all_path)?;
    let mut pkg = conda::spool(input, &stem, format, scratch.path())?;
    let paths = conda::read_json(input, &pkg.entries, "info/paths.json")?;
    let index = conda::read_json(input, &pkg.entries, "info/index.json")?;
    let conda::Identity {
        build,
        build_number,
    } = conda::identity(input, &index, &stem)?;
    conda::check(input, &pkg.entries, &paths)?;
    let (found, changed) = split_entries(input, &mut pkg.entries, scratch.path())?;
    found.check_any(input, "package")?;
    let text = |k: &str| index[k].as_str().unwrap_or_default().to_string();
    let ctx = Ctx {
        outs: &outs,
        into,
        scratch: scratch.path(),
        format,
        effort,
        name: text("name"),
        version: text("version"),
        build,
        index: &index,
        metadata_json: pkg.metadata_json.clone(),
    };
    let mut written = Written::default();

    let hints = found.hints(&|label| {
        let package = format!("{}-{label}", ctx.name);
        let command = format!("conda install {package}={}={}", ctx.version, ctx.build);
        (package, command)
    });
    written.add(ctx.host(pkg, &stem, paths, &changed, &hints)?, Role::Host)?;
    let labels = written.devices(&found, |kind, label| ctx.device(&found, kind, label))?;
    let every: Vec<&str> = labels.iter().map(String::as_str).collect();
    written.add(ctx.selector(&every, None, build_number)?, Role::All)?;
    for (set, served) in found.exact_sets() {
        if set.len() == labels.len() {
            // What the package under the project's name gives every machine already.
            continue;
        }
        let parts: Vec<String> = set.iter().map(|&k| pack_label(k)).collect();
        let label = variant::joined("sm", &parts).replace('.', "_");
        let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
        let bump = 1 + (REAL_GPUS.len() - served.len()) as u64;
        let spec = format!("{CUDA_ARCH} {}", conda::cuda_arch_spec(&served));
        written.add(
            ctx.selector(&refs, Some((&label, &spec)), build_number + bump)?,
            Role::Variant(format!("{label} (depends on {spec})")),
        )?;
    }
    drop(scratch);
    written.commit(outs, found)
}

/// Per changed file: its new sha256 and size.
type Changed = BTreeMap<String, (String, u64)>;

/// Splits every packed binary among `entries` where it was spooled: the entry's file becomes
/// its host part. Returns what was found and each changed file's new sha256 and size (hard
/// links to it included).
fn split_entries(
    input: &Path,
    entries: &mut [Entry],
    scratch: &Path,
) -> Result<(Found, Changed), PruneError> {
    let mut found = Found::default();
    let mut changed = BTreeMap::new();
    let progress = crate::progress::Progress::new();
    let count = entries.len();
    for (i, e) in entries.iter_mut().enumerate().filter(|(_, e)| !e.info) {
        progress.step(format!("split: {} ({}/{count})", e.name, i + 1));
        let Some((path, sha, len)) = &mut e.data else {
            continue;
        };
        if !crate::package::sniff::file_is_binary(path)? {
            continue;
        }
        let Some(host) = found.member(input, &e.name, path, &scratch.join(format!("split-{i}")))?
        else {
            continue;
        };
        (*sha, *len) = tarball::sha256_file(&host)?;
        *path = host;
        changed.insert(e.name.clone(), (sha.clone(), *len));
    }
    progress.done();
    for e in entries.iter().filter(|e| !e.info) {
        if let tarball::Kind::HardLink(t) = &e.kind {
            found.hard_link(&e.name, t);
            if let Some(line) = changed.get(t).cloned() {
                changed.insert(e.name.clone(), line);
            }
        }
    }
    Ok((found, changed))
}

/// What every package written shares.
struct Ctx<'a> {
    outs: &'a Outputs,
    into: &'a Path,
    scratch: &'a Path,
    format: Format,
    effort: Effort,
    name: String,
    version: String,
    build: String,
    /// The input's `index.json`: each package's starts from it.
    index: &'a serde_json::Value,
    /// A `.conda`'s `metadata.json`, carried into each.
    metadata_json: Option<Vec<u8>>,
}

impl Ctx<'_> {
    /// `{name}-{suffix} =={version} {build}`: one package of this split, exactly.
    fn pin(&self, suffix: &str) -> String {
        format!("{}-{suffix} =={} {}", self.name, self.version, self.build)
    }

    /// The host: the input's entries (packed binaries now their host parts) under the name
    /// `{name}-host`, `paths.json` lines of the changed files anew.
    fn host(
        &self,
        mut pkg: Spooled,
        stem: &str,
        mut paths: serde_json::Value,
        changed: &Changed,
        hints: &[(String, String)],
    ) -> Result<Staged, PruneError> {
        let mut index = self.index.clone();
        index["name"] = serde_json::json!(format!("{}-host", self.name));
        let dir = self.scratch.join("hints");
        std::fs::create_dir(&dir).map_err(io_at(&dir))?;
        let mut listed = Vec::new();
        for (i, (at, text)) in hints.iter().enumerate() {
            let file = dir.join(i.to_string());
            std::fs::write(&file, text).map_err(io_at(&file))?;
            let e = Entry::new_file(at, file, false, 0o644)?;
            let (_, sha, len) = e.data.as_ref().expect("a new file has data");
            listed.push(serde_json::json!({"_path": at, "path_type": "hardlink",
                "sha256": sha, "size_in_bytes": len}));
            pkg.entries.push(e);
        }
        if let Some(list) = paths["paths"].as_array_mut() {
            list.extend(listed);
        }
        for p in paths["paths"].as_array_mut().into_iter().flatten() {
            if let Some((sha, len)) = p["_path"].as_str().and_then(|n| changed.get(n)) {
                p["sha256"] = serde_json::json!(sha);
                p["size_in_bytes"] = serde_json::json!(len);
            }
        }
        conda::replace_json(&mut pkg.entries, "info/index.json", &index, self.scratch)?;
        conda::replace_json(&mut pkg.entries, "info/paths.json", &paths, self.scratch)?;
        let new_stem = format!("{}-host-{}-{}", self.name, self.version, self.build);
        self.write(pkg, stem, &new_stem)
    }

    /// A device package: the packs of `kind` (and their hard links) at their binaries'
    /// paths.
    fn device(&self, found: &Found, kind: PackKind, label: &str) -> Result<Staged, PruneError> {
        let mut files = Vec::new();
        for (member, file) in &found.devices[&kind] {
            files.push(Entry::new_file(member, file.clone(), false, 0o644)?);
        }
        for (alias, target) in found.links.get(&kind).into_iter().flatten() {
            files.push(Entry::new_hard_link(alias, target, false));
        }
        let mut index = self.bare_index(&format!("{}-{label}", self.name), None);
        index["depends"] = serde_json::json!([self.pin("host")]);
        index["summary"] = serde_json::json!(format!(
            "{} device code of {} {}, installed beside {}-host (fatpack split)",
            kind.describe(),
            self.name,
            self.version,
            self.name
        ));
        self.new_package(files, index)
    }

    /// The package under the project's name (`variant`: none), or one of its variants (its
    /// label and `cuda-arch` dependency): no files, depending on the host and the device
    /// packages `labels`.
    fn selector(
        &self,
        labels: &[&str],
        variant: Option<(&str, &str)>,
        build_number: u64,
    ) -> Result<Staged, PruneError> {
        let mut index = self.bare_index(&self.name, variant.map(|v| v.0));
        let mut depends = vec![self.pin("host")];
        depends.extend(labels.iter().map(|l| self.pin(l)));
        if let Some((_, spec)) = variant {
            depends.push(spec.to_string());
            depends.push(VIRTUAL.to_string());
        }
        index["depends"] = serde_json::json!(depends);
        index["build_number"] = serde_json::json!(build_number);
        self.new_package(Vec::new(), index)
    }

    /// The input's `index.json` for a package of no files of its own: renamed, build
    /// `{build}_{label}` for a variant; what only the input's files need dropped.
    fn bare_index(&self, name: &str, label: Option<&str>) -> serde_json::Value {
        let mut index = self.index.clone();
        if let Some(obj) = index.as_object_mut() {
            for key in ["constrains", "track_features", "features", "run_exports"] {
                obj.remove(key);
            }
        }
        index["name"] = serde_json::json!(name);
        if let Some(l) = label {
            index["build"] = serde_json::json!(format!("{}_{l}", self.build));
        }
        index
    }

    /// A new package of `files` (and `info/index.json`, `info/paths.json`, `info/files`).
    fn new_package(
        &self,
        mut files: Vec<Entry>,
        index: serde_json::Value,
    ) -> Result<Staged, PruneError> {
        let name = index["name"].as_str().unwrap_or_default().to_string();
        let build = index["build"].as_str().unwrap_or_default().to_string();
        let stem = format!("{name}-{}-{build}", self.version);
        let lines: Vec<serde_json::Value> = files
            .iter()
            .map(|e| {
                let (_, sha, len) = tarball::bytes_of(&files, e).expect("a file or a link to one");
                serde_json::json!({"_path": e.name, "path_type": "hardlink",
                    "sha256": sha, "size_in_bytes": len})
            })
            .collect();
        let list: String = files.iter().map(|e| format!("{}\n", e.name)).collect();
        let paths = serde_json::json!({"paths": lines, "paths_version": 1});
        let dir = self.scratch.join(format!("info-{stem}"));
        std::fs::create_dir(&dir).map_err(io_at(&dir))?;
        for (file, text) in [
            ("index.json", conda::pretty(&index)),
            ("paths.json", conda::pretty(&paths)),
            ("files", list),
        ] {
            let at = dir.join(file);
            std::fs::write(&at, text).map_err(io_at(&at))?;
            files.push(Entry::new_file(&format!("info/{file}"), at, true, 0o644)?);
        }
        let pkg = Spooled {
            entries: files,
            outer: match self.format {
                Format::Conda => vec![
                    "metadata.json".to_string(),
                    format!("pkg-{stem}.tar.zst"),
                    format!("info-{stem}.tar.zst"),
                ],
                Format::TarBz2 => Vec::new(),
            },
            metadata_json: self.metadata_json.clone(),
        };
        self.write(pkg, &stem, &stem)
    }

    fn write(&self, pkg: Spooled, stem: &str, new_stem: &str) -> Result<Staged, PruneError> {
        let dest = self
            .into
            .join(format!("{new_stem}{}", self.format.suffix()));
        if let Err(why) = crate::package::metadata::plain_file_name(&format!("{new_stem}.conda")) {
            return Err(PruneError::Package {
                path: dest,
                message: format!("the package's name is {why}; refused"),
            });
        }
        self.outs.check(&dest)?;
        conda::write_checked(
            pkg,
            (self.format, self.effort),
            stem,
            new_stem,
            self.outs,
            &dest,
        )
    }
}
