//! `fatpack split` of a wheel whose binaries fatpack packed: one fat build becomes a host
//! wheel, one device wheel per pack kind, and a small wheel under the project's own name that
//! puts them together, so that every installer composes what a machine needs:
//!
//! - `{dist}_host`: every member of the input, each packed binary replaced by its host part
//!   (`fatpack split`'s, which loads its code from packs beside it). Its METADATA is the
//!   input's, renamed, with one extra per device wheel (`sm90`, `compute120`, ...) and `all`.
//! - `{dist}_{label}`: the packs of one architecture (`lib/libx.so.sm_90.fatpack`), at the
//!   paths of the binaries they belong to, so that they install beside them. It requires the
//!   host wheel at the same version, as the host's extras require it.
//! - `{dist}` (the input's name, tags and version): no files, the input's METADATA requiring
//!   the host wheel and every device wheel. `pip install X` therefore installs everything the
//!   fat wheel held and runs wherever it ran; a package that depends on X is served the same.
//! - `{dist}` variants (PEP 825, a label after the tags): the same small wheel requiring the
//!   host and only the device wheels one set of GPUs loads from, its `nvidia :: sm_arch`
//!   values closed under NVIDIA's provider's matching ([`crate::package::variant::sm_arch_values`]). A
//!   variant-aware installer picks one on a matching GPU and the plain one elsewhere; being
//!   small, the variants do not repeat the host code.
//!
//! Today's pip takes one GPU's code with `pip install 'X-host[sm90]'` (extras name device
//! wheels; several GPUs: `[sm80,sm90]`). The input is checked whole as prune checks it
//! ([`super::open`]), each member against `RECORD` as it is read; every wheel written
//! is read back against the `RECORD` it was given, and all are committed together or none.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use fatpack_format::split::PackKind;

use super::{self as wheel, Member, Opened};
use crate::commit::{Outputs, Staged};
use crate::error::io_at;
use crate::package::metadata;
use crate::package::record;
use crate::package::split::{pack_label, Found, PackageSplit, Role, Written};
use crate::package::variant;
use crate::prune::PruneError;

fn bad(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A member of the host wheel, in the input's order.
enum HostItem {
    Dir(usize),
    /// As it was, compressed bytes and all: (member, sha256, size).
    Raw(usize, String, u64),
    Symlink(usize, String, String),
    /// A packed binary's host part, written by split.
    Split(usize, PathBuf),
    Metadata(usize),
}

/// The input read: the host's members, each device label's packs (name in the wheel, file),
/// and what each GPU loads.
struct Read {
    items: Vec<HostItem>,
    found: Found,
    metadata: String,
    wheel_file: Vec<u8>,
}

/// Splits the wheel `input` into `into` (see the module's doc).
pub fn split_wheel(input: &Path, into: &Path) -> Result<PackageSplit, PruneError> {
    let mut outs = Outputs::new(&[input]);
    let Opened {
        mut zip,
        members,
        id,
        rec,
    } = wheel::open(input)?;
    let id = &id;
    let tags = id.tags.join("-");
    let file = |dist: &str, label: Option<&str>| {
        let mut n = format!("{dist}-{}-{tags}", id.version);
        if let Some(l) = label {
            n.push('-');
            n.push_str(l);
        }
        into.join(format!("{n}.whl"))
    };
    let all_path = file(&id.dist, None);
    outs.check(&all_path)?;
    outs.folder(into)?;
    let scratch = outs.scratch(&all_path)?;
    let read = read(input, &mut zip, &members, id, &rec, scratch.path())?;
    read.found.check_any(input, "wheel")?;
    let name = project_name(input, &read.metadata, id)?;
    let version = &id.version;
    let labels = read.found.labels();
    let pin = |suffix: &str| format!("{name}-{suffix}=={version}");
    let ctx = Ctx {
        input,
        outs: &outs,
        id,
        version,
        wheel_file: &read.wheel_file,
    };
    let mut written = Written::default();

    // The host: extras naming each device wheel, and `all`.
    let extras = host_extras(&labels, &pin);
    let host_dist = format!("{}_host", id.dist);
    let host_meta = metadata::edit_metadata(&read.metadata, &format!("{name}-host"), &extras)
        .expect("the name was read from it");
    let host_path = file(&host_dist, None);
    // Beside each split binary: which wheel holds each of its packs, and how to get it.
    let hints = read.found.hints(&|label| {
        (
            format!("{name}-{label}"),
            format!("pip install '{name}-host[{label}]=={version}'"),
        )
    });
    let host = ctx.host(
        &mut zip,
        &members,
        &read,
        (&host_dist, &host_path),
        &host_meta,
        &hints,
    )?;
    written.add(host, Role::Host)?;

    // A device wheel per pack kind.
    for (kind, label) in &labels {
        let dist = format!("{}_{label}", id.dist);
        let w = ctx.device(
            &read.found.devices[kind],
            &dist,
            &file(&dist, None),
            &device_metadata(&name, version, *kind, label),
        )?;
        written.add(w, Role::Device(label.clone()))?;
    }

    // The project's own name: everything. Its variants: one per set of device wheels a GPU
    // loads from.
    let requires = |set: &BTreeSet<PackKind>| {
        let mut lines = vec![format!("Requires-Dist: {}", pin("host"))];
        lines.extend(
            set.iter()
                .map(|k| format!("Requires-Dist: {}", pin(&pack_label(*k)))),
        );
        lines
    };
    let every: BTreeSet<PackKind> = read.found.devices.keys().copied().collect();
    let meta = metadata::edit_metadata(&read.metadata, &name, &requires(&every))
        .expect("the name was read from it");
    let w = ctx.finish(NewWheel::new(&ctx, &all_path)?, &id.dist, &meta, None)?;
    written.add(w, Role::All)?;
    for (label, set, values) in variants(&read.found.loads) {
        let meta = metadata::edit_metadata(&read.metadata, &name, &requires(&set))
            .expect("the name was read from it");
        let json = variant::variant_json(&label, &values);
        let path = file(&id.dist, Some(&label));
        let w = ctx.finish(NewWheel::new(&ctx, &path)?, &id.dist, &meta, Some(&json))?;
        written.add(w, Role::Variant(label))?;
    }
    drop(scratch);
    written.commit(outs, read.found)
}

/// The project's name from its METADATA: a PEP 508 name that is the file name's.
fn project_name(input: &Path, meta: &str, id: &wheel::WheelId) -> Result<String, PruneError> {
    let name = metadata::metadata_name(meta)
        .ok_or_else(|| bad(input, format!("{}METADATA has no Name: field", id.info())))?
        .to_string();
    metadata::project_name(&name)
        .map_err(|why| bad(input, format!("METADATA's Name {name:?} is {why}; refused")))?;
    if metadata::normalize(&name) != metadata::normalize(&id.dist) {
        return Err(bad(
            input,
            format!(
                "METADATA names {name:?}, its file name {:?}; refused",
                id.dist
            ),
        ));
    }
    Ok(name)
}

/// The host's extra lines: one extra per device wheel (its label), and `all`.
fn host_extras(labels: &[(PackKind, String)], pin: &dyn Fn(&str) -> String) -> Vec<String> {
    let mut extras = Vec::new();
    for (_, l) in labels {
        extras.push(format!("Provides-Extra: {l}"));
        extras.push(format!("Requires-Dist: {}; extra == \"{l}\"", pin(l)));
    }
    extras.push("Provides-Extra: all".into());
    for (_, l) in labels {
        extras.push(format!("Requires-Dist: {}; extra == \"all\"", pin(l)));
    }
    extras
}

/// A device wheel's METADATA: its name, the host's version, the host required.
fn device_metadata(name: &str, version: &str, kind: PackKind, label: &str) -> String {
    format!(
        "Metadata-Version: 2.1\nName: {name}-{label}\nVersion: {version}\nSummary: {} device \
         code of {name} {version}, installed beside {name}-host (fatpack split)\n\
         Requires-Dist: {name}-host=={version}\n",
        kind.describe(),
    )
}

/// The variants of the project's wheel: for each set of pack kinds some GPU loads from,
/// widened until it serves every GPU NVIDIA's provider would pick it on (8.0's variant takes
/// 8.6's packs: the provider picks `80_real` on 8.6-8.9), with the GPUs it serves as
/// `nvidia :: sm_arch` values. Sets that end the same give one variant.
fn variants(
    loads: &BTreeMap<u32, BTreeSet<PackKind>>,
) -> Vec<(String, BTreeSet<PackKind>, Vec<String>)> {
    let mut sets: BTreeSet<BTreeSet<PackKind>> = BTreeSet::new();
    for start in loads.values() {
        let mut set = start.clone();
        loop {
            let before = set.len();
            let served: Vec<u32> = loads
                .iter()
                .filter(|(_, s)| s.is_subset(&set))
                .map(|(&c, _)| c)
                .collect();
            for c in served {
                for g in variant::provider_picks(c) {
                    set.extend(loads.get(&g).into_iter().flatten());
                }
            }
            if set.len() == before {
                break;
            }
        }
        sets.insert(set);
    }
    sets.into_iter()
        .map(|set| {
            // Every GPU the set serves, GPUs no module runs on counted as served (the fat
            // wheel gives them nothing either), so that closure is judged as the provider
            // matches; only GPUs that run something are named.
            let served: Vec<u32> = fatpack_format::select::REAL_GPUS
                .iter()
                .copied()
                .filter(|g| loads.get(g).is_none_or(|s| s.is_subset(&set)))
                .collect();
            let (values, _) = variant::sm_arch_values(&served);
            let values = values
                .into_iter()
                .filter(|v| {
                    v.trim_end_matches("_real")
                        .parse::<u32>()
                        .is_ok_and(|c| loads.contains_key(&c))
                })
                .collect();
            let parts: Vec<String> = set.iter().map(|&k| pack_label(k)).collect();
            (variant::joined("sm", &parts), set, values)
        })
        .collect()
}

/// Streams every member through its check; packed binaries are split in `scratch`.
fn read(
    input: &Path,
    zip: &mut wheel::Zip,
    members: &[Member],
    id: &wheel::WheelId,
    rec: &record::Record,
    scratch: &Path,
) -> Result<Read, PruneError> {
    let info = id.info();
    let mut out = Read {
        items: Vec::new(),
        found: Found::default(),
        metadata: String::new(),
        wheel_file: Vec::new(),
    };
    let progress = crate::progress::Progress::new();
    for (i, m) in members.iter().enumerate() {
        progress.step(format!("split: {} ({}/{})", m.name, i + 1, members.len()));
        if m.dir {
            out.items.push(HostItem::Dir(i));
            continue;
        }
        if wheel::rewritten(&info, &m.name) {
            continue;
        }
        let line = &rec.files[&m.name];
        if m.is_symlink() || m.name == format!("{info}METADATA") || m.name == format!("{info}WHEEL")
        {
            let bytes = wheel::read_verified(input, zip, i, m, line)?;
            if m.is_symlink() {
                let target = wheel::symlink_target(input, m, bytes.0)?;
                out.items.push(HostItem::Symlink(i, target, bytes.1));
                continue;
            }
            if m.name.ends_with("/WHEEL") {
                out.wheel_file = bytes.0;
                out.items
                    .push(HostItem::Raw(i, bytes.1, out.wheel_file.len() as u64));
                continue;
            }
            out.metadata = String::from_utf8(bytes.0)
                .map_err(|_| bad(input, format!("{}: not UTF-8", m.name)))?;
            out.items.push(HostItem::Metadata(i));
            continue;
        }
        let spool = scratch.join(format!("member-{i}"));
        let (digest, size, spooled) = wheel::verified_spool(input, zip, i, m, line, &spool)?;
        if !spooled {
            out.items.push(HostItem::Raw(i, digest, size));
            continue;
        }
        match out
            .found
            .member(input, &m.name, &spool, &scratch.join(format!("split-{i}")))?
        {
            None => out.items.push(HostItem::Raw(i, digest, size)),
            Some(host) => out.items.push(HostItem::Split(i, host)),
        }
        std::fs::remove_file(&spool).map_err(io_at(&spool))?;
    }
    progress.done();
    if out.metadata.is_empty() || out.wheel_file.is_empty() {
        return Err(bad(
            input,
            format!("no {info}METADATA or {info}WHEEL in it"),
        ));
    }
    Ok(out)
}

/// What every wheel written shares.
struct Ctx<'a> {
    input: &'a Path,
    outs: &'a Outputs,
    /// The input's name, version and tags.
    id: &'a wheel::WheelId,
    version: &'a str,
    /// The input's `WHEEL` (its tags are every output's).
    wheel_file: &'a [u8],
}

impl Ctx<'_> {
    /// The host wheel: the input's members, packed binaries replaced by their host parts.
    fn host(
        &self,
        zip: &mut wheel::Zip,
        members: &[Member],
        read: &Read,
        (dist, path): (&str, &Path),
        meta: &str,
        hints: &[(String, String)],
    ) -> Result<Staged, PruneError> {
        let mut w = NewWheel::new(self, path)?;
        let renames = wheel::Renames::new(self.id, dist, self.version);
        let new = |i: usize| renames.apply(&members[i].name);
        for item in &read.items {
            match item {
                HostItem::Dir(i) => {
                    let opts = wheel::options(&members[*i], zip::CompressionMethod::Stored);
                    w.zw.add_directory(new(*i).as_str(), opts)
                        .map_err(|e| bad(&w.dest, e.to_string()))?;
                }
                HostItem::Raw(i, digest, size) => {
                    let raw = zip
                        .by_index_raw(*i)
                        .map_err(|e| bad(self.input, format!("{}: {e}", members[*i].name)))?;
                    w.zw.raw_copy_file_rename(raw, new(*i))
                        .map_err(|e| bad(&w.dest, e.to_string()))?;
                    w.written.push((new(*i), digest.clone(), *size));
                }
                HostItem::Symlink(i, target, digest) => {
                    let opts = wheel::options(&members[*i], zip::CompressionMethod::Stored);
                    w.zw.add_symlink(new(*i), target, opts)
                        .map_err(|e| bad(&w.dest, e.to_string()))?;
                    w.written
                        .push((new(*i), digest.clone(), target.len() as u64));
                }
                HostItem::Split(i, host) => {
                    let opts = wheel::options(&members[*i], zip::CompressionMethod::Deflated);
                    w.file(&new(*i), host, opts)?;
                }
                HostItem::Metadata(i) => {
                    let opts = wheel::options(&members[*i], zip::CompressionMethod::Deflated);
                    w.bytes(&new(*i), meta.as_bytes(), opts)?;
                }
            }
        }
        for (at, text) in hints {
            w.bytes(&renames.apply(at), text.as_bytes(), wheel::small_options())?;
        }
        w.finish(&format!("{dist}-{}.dist-info/RECORD", self.version))
    }

    /// A device wheel: the packs (name in the wheel, spooled file), at the paths of their
    /// binaries in distribution `dist`.
    fn device(
        &self,
        packs: &[(String, PathBuf)],
        dist: &str,
        path: &Path,
        meta: &str,
    ) -> Result<Staged, PruneError> {
        let mut w = NewWheel::new(self, path)?;
        let renames = wheel::Renames::new(self.id, dist, self.version);
        for (member, spooled) in packs {
            w.file(&renames.apply(member), spooled, pack_options())?;
        }
        self.finish(w, dist, meta, None)
    }

    /// A wheel of distribution `dist` finished with its own `.dist-info`: `meta` as its
    /// METADATA, the input's WHEEL, `variant.json` if given, RECORD.
    fn finish(
        &self,
        mut w: NewWheel,
        dist: &str,
        meta: &str,
        variant_json: Option<&str>,
    ) -> Result<Staged, PruneError> {
        let info = format!("{dist}-{}.dist-info/", self.version);
        w.bytes(
            &format!("{info}METADATA"),
            meta.as_bytes(),
            wheel::small_options(),
        )?;
        w.bytes(
            &format!("{info}WHEEL"),
            self.wheel_file,
            wheel::small_options(),
        )?;
        if let Some(json) = variant_json {
            w.bytes(
                &format!("{info}variant.json"),
                json.as_bytes(),
                wheel::small_options(),
            )?;
        }
        w.finish(&format!("{info}RECORD"))
    }
}

/// Options for a pack: stored (its blobs are compressed already), 0644, a fixed time.
fn pack_options() -> zip::write::SimpleFileOptions {
    wheel::small_options().compression_method(zip::CompressionMethod::Stored)
}

/// A wheel being written under a temp name beside `dest`, with what its RECORD will list.
struct NewWheel {
    dest: PathBuf,
    tmp: Staged,
    zw: zip::ZipWriter<std::fs::File>,
    written: Vec<(String, String, u64)>,
}

impl NewWheel {
    fn new(ctx: &Ctx<'_>, dest: &Path) -> Result<Self, PruneError> {
        let tmp = ctx.outs.file(dest)?;
        let file = tmp.as_file().try_clone().map_err(io_at(dest))?;
        Ok(NewWheel {
            dest: dest.to_path_buf(),
            tmp,
            zw: zip::ZipWriter::new(file),
            written: Vec::new(),
        })
    }

    fn bytes(
        &mut self,
        name: &str,
        bytes: &[u8],
        opts: zip::write::SimpleFileOptions,
    ) -> Result<(), PruneError> {
        self.zw
            .start_file(name, opts)
            .map_err(|e| bad(&self.dest, e.to_string()))?;
        self.zw.write_all(bytes).map_err(io_at(&self.dest))?;
        self.written
            .push((name.to_string(), record::sha256(bytes), bytes.len() as u64));
        Ok(())
    }

    fn file(
        &mut self,
        name: &str,
        path: &Path,
        opts: zip::write::SimpleFileOptions,
    ) -> Result<(), PruneError> {
        let len = std::fs::metadata(path).map_err(io_at(path))?.len();
        self.zw
            .start_file(name, opts.large_file(len >= u64::from(u32::MAX)))
            .map_err(|e| bad(&self.dest, e.to_string()))?;
        let (digest, size) = wheel::copy_hashing(path, &mut self.zw).map_err(io_at(&self.dest))?;
        self.written.push((name.to_string(), digest, size));
        Ok(())
    }

    /// RECORD last, then the whole wheel read back against it before it may be committed.
    fn finish(mut self, record_name: &str) -> Result<Staged, PruneError> {
        let text = record::write(&self.written, record_name);
        self.zw
            .start_file(record_name, wheel::small_options())
            .map_err(|e| bad(&self.dest, e.to_string()))?;
        self.zw
            .write_all(text.as_bytes())
            .map_err(io_at(&self.dest))?;
        self.zw
            .finish()
            .map_err(|e| bad(&self.dest, e.to_string()))?;
        wheel::check_wheel(self.tmp.path(), &self.written, record_name)
            .map_err(|m| bad(&self.dest, m))?;
        Ok(self.tmp)
    }
}
