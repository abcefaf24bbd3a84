//! `fatpack split` of a Debian package whose binaries fatpack packed: the roles of
//! [`crate::package::split`] in Debian's terms. apt has no notion of the machine's GPU, so there are
//! no variants: the administrator (or a metapackage of theirs) picks.
//!
//! - `{name}-host`: every file and every maintainer script, trigger, `shlibs`, `symbols` and
//!   conffile of the input, each packed binary replaced by its host part; the input's
//!   relations kept, and `Replaces`/`Breaks` on `{name}` before this version, as Debian
//!   policy (7.6.1) asks of files moving between packages.
//! - `{name}-{label}` (`libcut1-sm90`): one architecture's packs at the paths of their
//!   binaries (a hard-linked binary's packs under each of its names), depending on the host
//!   at this exact version.
//! - `{name}` (the input's own name, version and file name): no files, depending on the
//!   host and every device package at this version, providing what the input provided.
//!   `apt install {name}`, and every package depending on `{name}` (its `shlibs` name it),
//!   get everything the fat package held: it runs wherever that ran. One GPU's code:
//!   `apt install {name}-host {name}-sm90`.
//!
//! The input is checked as prune checks it (every file against `md5sums`, names, links);
//! every package written is read back against its own `md5sums`; all are committed together
//! or none.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use fatpack_format::split::PackKind;

use super::{self as deb, Spooled};
use crate::commit::{Outputs, Staged};
use crate::error::io_at;
use crate::package::compress::{Codec, Effort};
use crate::package::split::{Found, PackageSplit, Role, Written};
use crate::package::tarball::{Entry, Kind};
use crate::prune::PruneError;

fn bad(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Splits the Debian package `input` into the folder `into` (see the module's doc).
pub fn split_deb(input: &Path, into: &Path, effort: Effort) -> Result<PackageSplit, PruneError> {
    let mut outs = Outputs::new(&[input]);
    outs.folder(into)?;
    let scratch = outs.scratch(&into.join("split.deb"))?;
    let mut pkg = deb::spool(input, scratch.path())?;
    let mut sums = deb::check(input, &pkg)?;
    let control_path = deb::control_file(input, &pkg.control, "control")?
        .ok_or_else(|| bad(input, "no control file in its control archive"))?;
    let text =
        std::fs::read_to_string(control_path).map_err(|_| bad(input, "control is not text"))?;
    let fields = deb::fields(&text);
    let (name, version, arch) = deb::identity(input, &fields)?;
    let all_path = into.join(deb::file_name(&name, &version, &arch));
    outs.check(&all_path)?;

    let mut found = Found::default();
    let progress = crate::progress::Progress::new();
    for (i, e) in pkg.data.iter_mut().enumerate() {
        progress.step(format!("split: {}", e.name));
        let Some((path, _, len)) = &mut e.data else {
            continue;
        };
        if !crate::package::sniff::file_is_binary(path)? {
            continue;
        }
        let into = scratch.path().join(format!("split-{i}"));
        if let Some(host) = found.member(input, &e.name, path, &into)? {
            *len = std::fs::metadata(&host).map_err(io_at(&host))?.len();
            *path = host;
            if let Some(sum) = sums.get_mut(&e.name) {
                *sum = deb::md5_file(path)?;
            }
        }
    }
    progress.done();
    found.check_any(input, "package")?;
    for e in &pkg.data {
        if let Kind::HardLink(t) = &e.kind {
            found.hard_link(&e.name, t);
            if let (Some(new), true) = (sums.get(t).cloned(), sums.contains_key(&e.name)) {
                sums.insert(e.name.clone(), new);
            }
        }
    }
    let ctx = Ctx {
        codecs: (pkg.control_codec, pkg.data_codec),
        outs: &outs,
        into,
        scratch: scratch.path(),
        effort,
        fields: &fields,
        name: &name,
        version: &version,
        arch: &arch,
    };
    let mut written = Written::default();
    let hints = found.hints(&|label| {
        let package = format!("{name}-{label}");
        let command = format!("apt install {package}={version}");
        (package, command)
    });
    written.add(ctx.host(pkg, sums, &hints)?, Role::Host)?;
    let labels = written.devices(&found, |kind, label| ctx.device(&found, kind, label))?;
    let every: Vec<&str> = labels.iter().map(String::as_str).collect();
    written.add(ctx.all(&every)?, Role::All)?;
    drop(scratch);
    written.commit(outs, found)
}

/// What every package written shares.
struct Ctx<'a> {
    /// The input's control and data archives' codecs: every package's.
    codecs: (Codec, Codec),
    outs: &'a Outputs,
    into: &'a Path,
    scratch: &'a Path,
    effort: Effort,
    /// The input's control fields.
    fields: &'a [(String, String)],
    name: &'a str,
    version: &'a str,
    arch: &'a str,
}

impl Ctx<'_> {
    /// `{name}-{suffix} (= {version})`.
    fn pin(&self, suffix: &str) -> String {
        format!("{}-{suffix} (= {})", self.name, self.version)
    }

    /// The control file of a package of this split: the input's fields but those in `drop`,
    /// then `set` (replacing or adding).
    fn control(&self, drop: &[&str], set: &[(&str, String)]) -> String {
        let mut f: Vec<(String, String)> = self
            .fields
            .iter()
            .filter(|(k, _)| !drop.iter().any(|d| k.eq_ignore_ascii_case(d)))
            .cloned()
            .collect();
        for (k, v) in set {
            match f.iter_mut().find(|(key, _)| key.eq_ignore_ascii_case(k)) {
                Some((_, old)) => *old = v.clone(),
                None => f.push((k.to_string(), v.clone())),
            }
        }
        f.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()
    }

    /// The host: the input, packed binaries now their host parts, renamed.
    fn host(
        &self,
        mut pkg: Spooled,
        mut sums: BTreeMap<String, String>,
        hints: &[(String, String)],
    ) -> Result<Staged, PruneError> {
        let dir = self.scratch.join("hints");
        std::fs::create_dir(&dir).map_err(io_at(&dir))?;
        for (i, (at, text)) in hints.iter().enumerate() {
            let file = dir.join(i.to_string());
            std::fs::write(&file, text).map_err(io_at(&file))?;
            sums.insert(at.clone(), deb::md5_file(&file)?);
            let mut e = Entry::new_file(at, file, false, 0o644)?;
            e.raw = format!("./{at}");
            pkg.data.push(e);
        }
        let earlier = format!("{} (<< {})", self.name, self.version);
        let relation = |key: &str| match deb::field(self.fields, key) {
            Some(old) => format!("{old}, {earlier}"),
            None => earlier.clone(),
        };
        let control = self.control(
            &[],
            &[
                ("Package", format!("{}-host", self.name)),
                ("Installed-Size", installed_kib(&pkg.data).to_string()),
                ("Replaces", relation("Replaces")),
                ("Breaks", relation("Breaks")),
            ],
        );
        let md5sums: String = sums.iter().map(|(p, s)| format!("{s}  {p}\n")).collect();
        deb::set_file(
            &mut pkg.control,
            "control",
            control.as_bytes(),
            self.scratch,
        )?;
        deb::set_file(
            &mut pkg.control,
            "md5sums",
            md5sums.as_bytes(),
            self.scratch,
        )?;
        self.write(pkg, &format!("{}-host", self.name))
    }

    /// A device package: the packs of `kind` (and their hard links) at their binaries'
    /// paths, with every folder above them.
    fn device(&self, found: &Found, kind: PackKind, label: &str) -> Result<Staged, PruneError> {
        let mut files = Vec::new();
        let mut sums = String::new();
        for (member, file) in &found.devices[&kind] {
            files.push(Entry::new_file(member, file.clone(), false, 0o644)?);
            sums.push_str(&format!("{}  {member}\n", deb::md5_file(file)?));
        }
        for (alias, target) in found.links.get(&kind).into_iter().flatten() {
            files.push(Entry::new_hard_link(alias, target, false));
            let file = &found.devices[&kind]
                .iter()
                .find(|(m, _)| m == target)
                .expect("a link to a pack of this kind")
                .1;
            sums.push_str(&format!("{}  {alias}\n", deb::md5_file(file)?));
        }
        let data = with_folders(files);
        let control = self.control(
            &[
                "Depends",
                "Pre-Depends",
                "Recommends",
                "Suggests",
                "Enhances",
                "Provides",
                "Conflicts",
                "Breaks",
                "Replaces",
                "Built-Using",
                "Description",
            ],
            &[
                ("Package", format!("{}-{label}", self.name)),
                ("Installed-Size", installed_kib(&data).to_string()),
                ("Depends", self.pin("host")),
                (
                    "Description",
                    format!(
                        "{} device code of {}\n installed beside {}-host, whose binaries load \
                         it (fatpack split).",
                        kind.describe(),
                        self.name,
                        self.name
                    ),
                ),
            ],
        );
        self.new_package(&format!("{}-{label}", self.name), &control, data, &sums)
    }

    /// The package under the input's name: no files, the host and every device package.
    fn all(&self, labels: &[&str]) -> Result<Staged, PruneError> {
        let mut depends = vec![self.pin("host")];
        depends.extend(labels.iter().map(|l| self.pin(l)));
        let control = self.control(
            &[
                "Pre-Depends",
                "Recommends",
                "Suggests",
                "Enhances",
                "Conflicts",
                "Breaks",
                "Replaces",
            ],
            &[
                ("Installed-Size", "0".to_string()),
                ("Depends", depends.join(", ")),
            ],
        );
        self.new_package(self.name, &control, with_folders(Vec::new()), "")
    }

    /// A new package: `control` and `md5sums` in its control archive, `data` in its data
    /// archive, each compressed as the input's.
    fn new_package(
        &self,
        name: &str,
        control: &str,
        data: Vec<Entry>,
        md5sums: &str,
    ) -> Result<Staged, PruneError> {
        let dir = self.scratch.join(format!("control-{name}"));
        std::fs::create_dir(&dir).map_err(io_at(&dir))?;
        let mut entries = vec![Entry::new_dir(".", true)];
        let files = [("control", control), ("md5sums", md5sums)];
        // No md5sums for a package without files, as dh_md5sums.
        for (file, text) in files.into_iter().filter(|(_, t)| !t.is_empty()) {
            let at = dir.join(file);
            std::fs::write(&at, text).map_err(io_at(&at))?;
            let mut e = Entry::new_file(file, at, true, 0o644)?;
            e.raw = format!("./{file}");
            entries.push(e);
        }
        let pkg = Spooled {
            control: entries,
            control_codec: self.codecs.0,
            data,
            data_codec: self.codecs.1,
        };
        self.write(pkg, name)
    }

    fn write(&self, pkg: Spooled, name: &str) -> Result<Staged, PruneError> {
        let dest = self
            .into
            .join(deb::file_name(name, self.version, self.arch));
        self.outs.check(&dest)?;
        let scratch = self.scratch.join(format!("write-{name}"));
        std::fs::create_dir(&scratch).map_err(io_at(&scratch))?;
        deb::write_checked(pkg, self.effort, &scratch, self.outs, &dest)
    }
}

/// `files` (names without `./`) after the root and every folder above them, as dpkg-deb
/// writes a data archive (`./usr/`, `./usr/lib/`, ...), every name spelled with `./`.
fn with_folders(files: Vec<Entry>) -> Vec<Entry> {
    let mut folders = BTreeSet::new();
    for e in &files {
        let mut at = Path::new(&e.name).parent();
        while let Some(p) = at.filter(|p| !p.as_os_str().is_empty()) {
            folders.insert(p.to_string_lossy().into_owned());
            at = p.parent();
        }
    }
    let mut out = vec![Entry::new_dir(".", false)];
    for f in folders {
        let mut e = Entry::new_dir(&f, false);
        e.raw = format!("./{f}/");
        out.push(e);
    }
    for mut e in files {
        e.raw = format!("./{}", e.name);
        out.push(e);
    }
    out
}

/// Installed-Size as dpkg-gencontrol counts it: each file's KiB, rounded up, and 1 for every
/// other entry.
fn installed_kib(data: &[Entry]) -> u64 {
    data.iter()
        .filter(|e| e.name != ".")
        .map(|e| e.data.as_ref().map_or(1, |d| d.2.div_ceil(1024)))
        .sum()
}
