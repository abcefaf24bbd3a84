//! What `fatpack split` of a package shares across package kinds: the roles of the packages
//! written, each packed binary split into its host part and packs ([`Found`]), the labels of
//! the device packages, and which GPU loads from which.
//!
//! Every kind writes the same four roles: a host package (every file, packed binaries
//! replaced by their host parts), one device package per pack kind (the packs, at the paths
//! of their binaries, so that they install beside them), a package under the project's own
//! name that requires the host and every device package (what is installed when nothing
//! is named: it runs everywhere the fat package ran), and variants of that one requiring
//! only what one set of GPUs loads, in whatever form the kind's installers select by.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use fatpack_format::split::{self, PackKind};

use crate::commit::{Outputs, Staged};
use crate::error::io_at;
use crate::prune::PruneError;

/// What one written package is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The project's own name: the host and every device package.
    All,
    /// A variant of it (its label): the host and the device packages of its GPUs.
    Variant(String),
    Host,
    /// The packs of one kind (its label, which is also the wheel host's extra naming it).
    Device(String),
}

#[derive(Debug, Clone)]
pub struct SplitPackage {
    pub path: PathBuf,
    pub role: Role,
    pub len: u64,
}

/// What a package's split wrote.
#[derive(Debug, Clone)]
pub struct PackageSplit {
    pub packages: Vec<SplitPackage>,
    /// Per compute capability that runs anything of the package: the device packages
    /// (labels) it loads from.
    pub loads: Vec<(u32, Vec<String>)>,
    /// Members split into a host part and packs.
    pub split: Vec<String>,
    /// Programs and libraries with device code that were not packed (kept whole, their code
    /// inside them, in the host package).
    pub whole: Vec<String>,
}

/// The packages of one split as they are written: staged for one commit, and listed.
#[derive(Default)]
pub(super) struct Written {
    staged: Vec<Staged>,
    packages: Vec<SplitPackage>,
}

impl Written {
    pub fn add(&mut self, s: Staged, role: Role) -> Result<(), PruneError> {
        let len = s.as_file().metadata().map_err(io_at(s.path()))?.len();
        self.packages.push(SplitPackage {
            path: s.dest().to_path_buf(),
            role,
            len,
        });
        self.staged.push(s);
        Ok(())
    }

    /// One device package per pack kind of `found`, each made by `make(kind, label)`;
    /// their labels, in pack-kind order.
    pub fn devices(
        &mut self,
        found: &Found,
        mut make: impl FnMut(PackKind, &str) -> Result<Staged, PruneError>,
    ) -> Result<Vec<String>, PruneError> {
        let labels = found.labels();
        for (kind, label) in &labels {
            self.add(make(*kind, label)?, Role::Device(label.clone()))?;
        }
        Ok(labels.into_iter().map(|(_, l)| l).collect())
    }

    /// Commits every package together; what was split, for the report.
    pub fn commit(self, outs: Outputs, found: Found) -> Result<PackageSplit, PruneError> {
        outs.commit(self.staged)?;
        Ok(PackageSplit {
            packages: self.packages,
            loads: found.loads_by_label(),
            split: found.split,
            whole: found.whole,
        })
    }
}

/// The label of a pack kind: the device package's name suffix and the wheel host's extra.
pub fn pack_label(kind: PackKind) -> String {
    match kind {
        PackKind::Sass(a) => format!("sm{a}"),
        PackKind::Ptx(a) => format!("compute{a}"),
        PackKind::Other => "other".into(),
        PackKind::SassFamily(m) => format!("sm{m}x"),
        PackKind::PtxFamily(m) => format!("compute{m}x"),
    }
}

/// The packed binaries of one package, split as they are read.
#[derive(Default)]
pub(super) struct Found {
    /// Per pack kind: (the pack's path in the package, its file).
    pub devices: BTreeMap<PackKind, Vec<(String, PathBuf)>>,
    /// Per pack kind: hard links to its packs (the pack's path under a second name of its
    /// binary, the pack's own path). A package that installs a split binary under two
    /// names (a tar hard link) gets its packs under both: the runtime looks beside the name
    /// the binary was loaded by.
    pub links: BTreeMap<PackKind, Vec<(String, String)>>,
    /// Second names (hard links) of split members: (alias, member).
    pub aliases: Vec<(String, String)>,
    /// Per compute capability: the pack kinds it loads from.
    pub loads: BTreeMap<u32, BTreeSet<PackKind>>,
    pub split: Vec<String>,
    pub whole: Vec<String>,
}

impl Found {
    /// Splits the member `name` of `input`, spooled at `spool`, into the new folder `into` if
    /// it is a packed program or library: its host part's file, or `None` (kept whole;
    /// noted if it has device code). Messages name the member, never the spool.
    pub fn member(
        &mut self,
        input: &Path,
        name: &str,
        spool: &Path,
        into: &Path,
    ) -> Result<Option<PathBuf>, PruneError> {
        let shown = PathBuf::from(format!("{}!{name}", input.display()));
        let data = crate::inputs::map_file(spool)?;
        let kind = crate::inputs::classify(&data).0;
        if !matches!(
            kind,
            crate::inputs::FileKind::Executable | crate::inputs::FileKind::SharedLibrary
        ) {
            if super::has_device_code(&shown, &data)? {
                self.whole.push(name.to_string());
            }
            return Ok(None);
        }
        drop(data);
        std::fs::create_dir(into).map_err(io_at(into))?;
        let r = crate::split::split(spool, into).map_err(|e| {
            let text = e
                .to_string()
                .replace(&spool.display().to_string(), &shown.display().to_string());
            PruneError::Package {
                path: input.to_path_buf(),
                message: format!("member {name}: {text}"),
            }
        })?;
        if r.unpacked {
            let data = crate::inputs::map_file(spool)?;
            if super::has_device_code(&shown, &data)? {
                self.whole.push(name.to_string());
            }
            return Ok(None);
        }
        for p in &r.packs {
            let member = format!("{name}{}", p.kind.suffix());
            self.devices
                .entry(p.kind)
                .or_default()
                .push((member, p.path.clone()));
        }
        for (cap, kinds) in &r.loads {
            self.loads.entry(*cap).or_default().extend(kinds);
        }
        self.split.push(name.to_string());
        Ok(Some(r.host))
    }

    /// Records `alias`, a hard link to the member `target`: if `target` was split, its packs
    /// get `alias`'s name too.
    pub fn hard_link(&mut self, alias: &str, target: &str) {
        if self.split.iter().any(|s| s == target) {
            self.aliases.push((alias.to_string(), target.to_string()));
        }
        for (kind, packs) in &self.devices {
            let pack = format!("{target}{}", kind.suffix());
            if packs.iter().any(|(m, _)| *m == pack) {
                self.links
                    .entry(*kind)
                    .or_default()
                    .push((format!("{alias}{}", kind.suffix()), pack));
            }
        }
    }

    /// The install hint files of the host package ([`split::HINT_SUFFIX`]): (path in the
    /// package, text) beside every split member and each of its second names, each pack's
    /// line from `install(label)`: the package that holds it and the command that installs
    /// it.
    pub fn hints(&self, install: &dyn Fn(&str) -> (String, String)) -> Vec<(String, String)> {
        let text_for = |member: &str| {
            let mut text = String::new();
            for (kind, packs) in &self.devices {
                let suffix = kind.suffix();
                if packs.iter().any(|(m, _)| *m == format!("{member}{suffix}")) {
                    let (package, command) = install(&pack_label(*kind));
                    text.extend(split::hint_line(&suffix, &package, &command));
                }
            }
            text
        };
        let names = self.split.iter().map(|m| (m, m));
        let aliases = self.aliases.iter().map(|(a, m)| (a, m));
        names
            .chain(aliases)
            .map(|(at, member)| (format!("{at}{}", split::HINT_SUFFIX), text_for(member)))
            .collect()
    }

    /// Refuses a package with nothing packed in it.
    pub fn check_any(&self, input: &Path, kind: &str) -> Result<(), PruneError> {
        if self.devices.is_empty() {
            return Err(PruneError::Package {
                path: input.to_path_buf(),
                message: format!(
                    "no binary in it is packed: nothing to split into device {kind}s (fatpack \
                     prune --for makes per-GPU {kind}s of any build)"
                ),
            });
        }
        Ok(())
    }

    /// The device labels, in pack-kind order.
    pub fn labels(&self) -> Vec<(PackKind, String)> {
        self.devices.keys().map(|&k| (k, pack_label(k))).collect()
    }

    /// What each GPU loads, by label.
    pub fn loads_by_label(&self) -> Vec<(u32, Vec<String>)> {
        self.loads
            .iter()
            .map(|(&cap, set)| (cap, set.iter().map(|&k| pack_label(k)).collect()))
            .collect()
    }

    /// Each distinct set of pack kinds some GPU loads from exactly, with the GPUs it serves
    /// as the fat package did (those whose own set is inside it), for installers that match
    /// the machine's GPU against exactly the GPUs a variant names (conda's `cuda-arch`).
    /// A GPU's own set serves a subset of what any set serving it serves, so ranking
    /// variants by fewer GPUs served picks each GPU's own.
    pub fn exact_sets(&self) -> Vec<(BTreeSet<PackKind>, Vec<u32>)> {
        let sets: BTreeSet<&BTreeSet<PackKind>> = self.loads.values().collect();
        sets.into_iter()
            .map(|set| {
                let served = fatpack_format::select::REAL_GPUS
                    .iter()
                    .copied()
                    .filter(|g| self.loads.get(g).is_some_and(|s| s.is_subset(set)))
                    .collect();
                (set.clone(), served)
            })
            .collect()
    }
}
