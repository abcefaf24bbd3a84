//! A wheel pruned: checked, every fat ELF member pruned, labelled, `RECORD` signed anew.
//!
//! Before a byte is written, the member list is checked: names that leave the install folder
//! ([`super::names`]), duplicates, more than one `.dist-info`, a member `RECORD` does not
//! list or lists without a hash, a line of `RECORD` with no member. While members stream
//! through (decompressed in small blocks, never held whole unless they are ELF files to
//! prune), each is hashed and checked against `RECORD`: a mismatch ends the command with
//! nothing committed. Only then are the new hashes written: prune never re-signs what it
//! did not first verify. Symlink members stay symlinks (pointing inside the package),
//! modes stay, a member nobody changed is copied compressed as it was.

mod split;

use std::collections::HashSet;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::record::{self, Algo, Hasher};
use super::variant::{self, WheelForm};
use super::PackageFormat;
use super::{add, metadata, names, prune_member, Written};
use crate::commit::Outputs;
use crate::error::io_at;
use crate::prune::{PruneError, PruneReport, Selection};

pub(super) type Zip = zip::ZipArchive<BufReader<std::fs::File>>;

/// A member's file type bits (`st_mode & S_IFMT`) as zip's external attributes carry them.
const S_IFMT: u32 = 0o170000;
const S_IFLNK: u32 = 0o120000;
/// Metadata members (`RECORD`, `METADATA`, `variant.json`, a symlink's target) are read
/// whole; anything larger than this is not one.
const SMALL: u64 = 64 << 20;

/// Whether `input` is named as a wheel.
pub(crate) fn is_wheel_name(input: &Path) -> bool {
    input.extension().is_some_and(|e| e == "whl")
}

fn wheel_error(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// One member of the input, as the central directory lists it.
pub(super) struct Member {
    pub name: String,
    pub dir: bool,
    /// `st_mode`, where the wheel's writer recorded one.
    pub mode: Option<u32>,
}

impl Member {
    pub fn is_symlink(&self) -> bool {
        self.mode.is_some_and(|m| m & S_IFMT == S_IFLNK)
    }
}

/// The input's names and versions, and those of the output.
struct Naming {
    /// `{dist}-{version}.dist-info/` of the input.
    old_info: String,
    renames: Renames,
    version: String,
    new_version: String,
    /// A variant wheel: its label.
    label: Option<String>,
    /// The output's file name.
    file_name: String,
}

/// A wheel's distribution, version and tags, read from its `.dist-info` folder and its file
/// name, each checked against PEP 427 before any output name is made of it.
pub(super) struct WheelId {
    /// The distribution as the file name spells it (escaped).
    pub dist: String,
    pub version: String,
    /// `[build-]python-abi-platform`, without a variant label.
    pub tags: Vec<String>,
}

impl WheelId {
    fn read(input: &Path, members: &[Member]) -> Result<Self, PruneError> {
        let bad = |m: String| wheel_error(input, m);
        let mut infos: Vec<&str> = members
            .iter()
            .filter_map(|m| {
                m.name
                    .split('/')
                    .next()
                    .filter(|t| t.ends_with(".dist-info"))
            })
            .collect();
        infos.sort_unstable();
        infos.dedup();
        let info = match infos.as_slice() {
            [one] => one.trim_end_matches(".dist-info"),
            [] => return Err(bad("no {name}-{version}.dist-info folder in it".into())),
            many => {
                return Err(bad(format!(
                    "{} .dist-info folders in it ({})",
                    many.len(),
                    many.join(", ")
                )))
            }
        };
        let (dist, version) = info.split_once('-').ok_or_else(|| {
            bad(format!(
                "{info}.dist-info is not {{name}}-{{version}}.dist-info"
            ))
        })?;
        let file = input
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let tags = file
            .strip_suffix(".whl")
            .and_then(|n| n.strip_prefix(&format!("{dist}-{version}-")))
            .ok_or_else(|| bad(format!("its name does not start with {dist}-{version}-")))?;
        // build? - python - abi - platform - label?; a build tag starts with a digit.
        let mut parts: Vec<&str> = tags.split('-').collect();
        let had_label = match parts.len() {
            3 => false,
            4 => !parts[0].starts_with(|c: char| c.is_ascii_digit()),
            5 => true,
            _ => {
                return Err(bad(format!(
                    "{tags:?} is not [build-]python-abi-platform[-variant]"
                )))
            }
        };
        if had_label {
            parts.pop();
        }
        // Output names are made of these: each checked first.
        metadata::wheel_name(dist, version, &parts)
            .map_err(|(part, why)| bad(format!("{part:?} in its name is {why}; refused")))?;
        Ok(WheelId {
            dist: dist.to_string(),
            version: version.to_string(),
            tags: parts.iter().map(|p| p.to_string()).collect(),
        })
    }

    /// `{dist}-{version}.dist-info/`.
    pub fn info(&self) -> String {
        format!("{}-{}.dist-info/", self.dist, self.version)
    }
}

/// Member names moved from a wheel's `.dist-info/` and `.data/` folders to those of
/// `{dist}-{version}` (a new version, or a new distribution), so that what was in `platlib`
/// stays in `platlib`; other names stay as they are.
pub(super) struct Renames([(String, String); 2]);

impl Renames {
    pub fn new(from: &WheelId, dist: &str, version: &str) -> Self {
        let old = format!("{}-{}", from.dist, from.version);
        Renames([
            (
                format!("{old}.dist-info/"),
                format!("{dist}-{version}.dist-info/"),
            ),
            (format!("{old}.data/"), format!("{dist}-{version}.data/")),
        ])
    }

    pub fn apply(&self, n: &str) -> String {
        for (old, new) in &self.0 {
            if let Some(rest) = n.strip_prefix(old.as_str()) {
                return format!("{new}{rest}");
            }
        }
        n.to_string()
    }
}

impl Naming {
    fn new(id: &WheelId, sel: &Selection, form: WheelForm) -> Self {
        let (dist, version, parts) = (id.dist.as_str(), id.version.as_str(), &id.tags);
        let label = variant::label(sel);
        let (new_version, label) = match form {
            WheelForm::Variant => (version.to_string(), Some(label)),
            WheelForm::LocalLabel => (variant::local_version(version, &label), None),
        };
        let mut file_name = format!("{dist}-{new_version}-{}", parts.join("-"));
        if let Some(l) = &label {
            file_name.push_str(&format!("-{l}"));
        }
        file_name.push_str(".whl");
        Naming {
            old_info: format!("{dist}-{version}.dist-info/"),
            renames: Renames::new(id, dist, &new_version),
            version: version.to_string(),
            new_version,
            label,
            file_name,
        }
    }

    fn rename(&self, n: &str) -> String {
        self.renames.apply(n)
    }

    fn rewritten(&self, name: &str) -> bool {
        rewritten(&self.old_info, name)
    }
}

/// Members of the old `.dist-info` (`info`) that a new wheel writes itself or must drop: its
/// `RECORD`, `RECORD`'s signatures (they would not hold), its `variant.json`.
pub(super) fn rewritten(info: &str, name: &str) -> bool {
    name.strip_prefix(info).is_some_and(|rest| {
        matches!(
            rest,
            "RECORD" | "RECORD.jws" | "RECORD.p7s" | "variant.json"
        )
    })
}

/// Every name the central directory lists, in order, duplicates included: zip's reader keeps
/// one member per name (the last), so a name listed twice is found only here.
fn central_names(input: &Path, start: u64) -> Result<Vec<Vec<u8>>, PruneError> {
    use std::io::{Seek, SeekFrom};
    /// A central directory file header (APPNOTE 4.3.12): its signature, its fixed size, and
    /// where the lengths of its name, extra field and comment are.
    const SIGNATURE: u32 = 0x0201_4b50;
    const FIXED: usize = 46;
    const NAME_LEN_AT: usize = 28;
    const EXTRA_LEN_AT: usize = 30;
    const COMMENT_LEN_AT: usize = 32;
    let le16 = |h: &[u8], at: usize| usize::from(u16::from_le_bytes([h[at], h[at + 1]]));
    let bad =
        |e: std::io::Error| wheel_error(input, format!("its central directory does not read: {e}"));
    let mut f = BufReader::new(std::fs::File::open(input).map_err(io_at(input))?);
    f.seek(SeekFrom::Start(start)).map_err(bad)?;
    let mut names = Vec::new();
    let mut header = [0u8; FIXED];
    loop {
        if f.read_exact(&mut header).is_err() {
            return Ok(names);
        }
        let sig = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        if sig != SIGNATURE {
            return Ok(names);
        }
        let h = &header;
        let mut name = vec![0u8; le16(h, NAME_LEN_AT)];
        f.read_exact(&mut name).map_err(bad)?;
        let skip = le16(h, EXTRA_LEN_AT) + le16(h, COMMENT_LEN_AT);
        f.seek_relative(skip as i64).map_err(bad)?;
        names.push(name);
    }
}

/// The members, checked: safe names, no duplicates.
fn members(input: &Path, zip: &mut Zip) -> Result<Vec<Member>, PruneError> {
    let listed = central_names(input, zip.central_directory_start())?;
    let mut once = HashSet::new();
    for name in &listed {
        if !once.insert(name.as_slice()) {
            let name = String::from_utf8_lossy(name);
            return Err(wheel_error(
                input,
                format!("member {name:?} is in it twice (an installer would keep either); refused"),
            ));
        }
    }
    if listed.len() != zip.len() {
        return Err(wheel_error(
            input,
            format!(
                "its central directory lists {} members, its reader {}; refused",
                listed.len(),
                zip.len()
            ),
        ));
    }
    super::zip_layout::check(input, zip)?;
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let f = zip
            .by_index_raw(i)
            .map_err(|e| wheel_error(input, format!("member {i}: {e}")))?;
        let name = f.name().to_string();
        let dir = f.is_dir();
        if let Some(why) = names::unsafe_name(&name, dir) {
            return Err(wheel_error(
                input,
                format!("member {name:?}: {why}; refused"),
            ));
        }
        if !seen.insert(name.trim_end_matches('/').to_string()) {
            return Err(wheel_error(
                input,
                format!("member {name:?} is in it twice (an installer would keep either); refused"),
            ));
        }
        out.push(Member {
            name,
            dir,
            mode: f.unix_mode(),
        });
    }
    Ok(out)
}

/// Every member but `RECORD`'s own lines is listed in `RECORD` with a hash, and every line
/// names a member.
fn check_listed(
    input: &Path,
    info: &str,
    members: &[Member],
    rec: &record::Record,
) -> Result<(), PruneError> {
    let bad = |m: String| wheel_error(input, m);
    let mut files = HashSet::new();
    for m in members.iter().filter(|m| !m.dir) {
        files.insert(m.name.as_str());
        if m.name == format!("{info}RECORD")
            || rewritten(info, &m.name) && !rec.files.contains_key(&m.name)
        {
            continue;
        }
        if !rec.files.contains_key(&m.name) {
            return Err(bad(format!(
                "member {} is not in RECORD: nothing vouches for it; refused",
                m.name
            )));
        }
    }
    for name in rec.files.keys() {
        if !files.contains(name.as_str()) {
            return Err(bad(format!(
                "RECORD lists {name}, which is not in the wheel; refused"
            )));
        }
    }
    for name in &rec.unhashed {
        if files.contains(name.as_str()) && !rewritten(info, name) {
            return Err(bad(format!("RECORD lists {name} without a hash; refused")));
        }
    }
    Ok(())
}

/// Every member against every symlink of the wheel, each followed through the others
/// ([`names::Links`]): nothing written through a link, no link out of the wheel.
fn check_links(input: &Path, zip: &mut Zip, members: &[Member]) -> Result<(), PruneError> {
    let mut targets = Vec::new();
    for (i, m) in members.iter().enumerate().filter(|(_, m)| m.is_symlink()) {
        let target = read_small(input, zip, i, &m.name)?;
        let target = String::from_utf8(target)
            .map_err(|_| wheel_error(input, format!("symlink {}: target is not UTF-8", m.name)))?;
        targets.push((m.name.clone(), target));
    }
    let links = names::Links::new(
        targets.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        names::Absolute::Refused,
    );
    for m in members {
        if let Some(why) = links.check(m.name.trim_end_matches('/')) {
            return Err(wheel_error(
                input,
                format!("member {}: {why}; refused", m.name),
            ));
        }
    }
    Ok(())
}

/// Reads all of a small member (refusing a large one).
fn read_small(input: &Path, zip: &mut Zip, i: usize, name: &str) -> Result<Vec<u8>, PruneError> {
    let f = zip
        .by_index(i)
        .map_err(|e| wheel_error(input, format!("{name}: {e}")))?;
    if f.size() > SMALL {
        return Err(wheel_error(
            input,
            format!("{name}: {} bytes, too large for what it is", f.size()),
        ));
    }
    let mut out = Vec::new();
    f.take(SMALL + 1)
        .read_to_end(&mut out)
        .map_err(|e| wheel_error(input, format!("{name}: {e}")))?;
    Ok(out)
}

/// A member's bytes as they stream by: hashed for `RECORD`'s check and for the new `RECORD`.
struct Hashing {
    check: Hasher,
    /// sha256, for the new `RECORD`, where `RECORD` used another algorithm.
    out: Option<Hasher>,
    len: u64,
}

impl Hashing {
    fn new(algo: Algo) -> Self {
        Hashing {
            check: Hasher::new(algo),
            out: (algo != Algo::Sha256).then(|| Hasher::new(Algo::Sha256)),
            len: 0,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        self.check.update(bytes);
        if let Some(o) = &mut self.out {
            o.update(bytes);
        }
        self.len += bytes.len() as u64;
    }

    /// Checks the member against its `RECORD` line; returns its sha256 as `RECORD` spells it.
    fn verify(self, input: &Path, name: &str, line: &record::Line) -> Result<String, PruneError> {
        let got = self.check.finish();
        if got != line.digest || line.size.is_some_and(|s| s != self.len) {
            return Err(wheel_error(
                input,
                format!(
                    "member {name} does not match RECORD (its hash or size differs: damaged or \
                     altered); refused"
                ),
            ));
        }
        Ok(match self.out {
            Some(o) => o.finish(),
            None => got,
        })
    }
}

/// A wheel opened and checked whole before anything of it is trusted: its member list
/// ([`members`]), its name, its `RECORD` (every member listed with a hash, every line a
/// member) and its symlinks. Each member's bytes are checked as they are read.
pub(super) struct Opened {
    pub zip: Zip,
    pub members: Vec<Member>,
    pub id: WheelId,
    pub rec: record::Record,
}

pub(super) fn open(input: &Path) -> Result<Opened, PruneError> {
    let file = std::fs::File::open(input).map_err(io_at(input))?;
    let mut magic = [0u8; 4];
    let n = (&file).take(4).read(&mut magic).map_err(io_at(input))?;
    if magic[..n] != *b"PK\x03\x04" {
        return Err(wheel_error(
            input,
            "not a wheel: a wheel is a zip file, and this is not one",
        ));
    }
    let mut zip =
        Zip::new(BufReader::new(file)).map_err(|e| wheel_error(input, super::zip_problem(&e)))?;
    let members = members(input, &mut zip)?;
    let id = WheelId::read(input, &members)?;
    let record_name = format!("{}RECORD", id.info());
    let record_at = members
        .iter()
        .position(|m| m.name == record_name)
        .ok_or_else(|| wheel_error(input, format!("no {record_name} in it")))?;
    let text = read_small(input, &mut zip, record_at, &record_name)?;
    let text = String::from_utf8(text).map_err(|_| wheel_error(input, "RECORD is not UTF-8"))?;
    let rec = record::parse(&text).map_err(|m| wheel_error(input, m))?;
    check_listed(input, &id.info(), &members, &rec)?;
    check_links(input, &mut zip, &members)?;
    Ok(Opened {
        zip,
        members,
        id,
        rec,
    })
}

/// A wheel: every ELF member pruned, verified and relabelled. `output` is the new wheel,
/// or a folder to write it into under its new name.
pub(crate) fn prune_wheel(
    input: &Path,
    output: &Path,
    sel: &Selection,
    form: WheelForm,
    mut outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let Opened {
        mut zip,
        members,
        id,
        rec,
    } = open(input)?;
    let naming = Naming::new(&id, sel, form);
    let dest = super::destination(
        output,
        &naming.file_name,
        "installers check it against its version and variant",
        &mut outs,
    )?;
    let mut w = Writer {
        input,
        dest: &dest,
        sel,
        outs: &outs,
        scratch: outs.scratch(&dest)?,
        report: PruneReport::default(),
        written: Vec::new(),
    };
    let mut tmp = outs.file(&dest)?;
    let mut zw = zip::ZipWriter::new(tmp.named().as_file_mut());
    let progress = crate::progress::Progress::new();
    for (i, m) in members.iter().enumerate() {
        progress.step(format!("prune: {} ({}/{})", m.name, i + 1, members.len()));
        let new_name = naming.rename(&m.name);
        if m.dir {
            let opts = options(m, zip::CompressionMethod::Stored);
            zw.add_directory(new_name.as_str(), opts)
                .map_err(w.zip_error())?;
        } else if !naming.rewritten(&m.name) {
            w.member(
                &mut zip,
                &mut zw,
                i,
                m,
                &new_name,
                &rec.files[&m.name],
                &naming,
            )?;
        }
    }
    progress.done();
    let claims = super::claims(input, &w.report, sel)?;
    let new_info = naming.rename(&naming.old_info);
    if let Some(label) = &naming.label {
        let values = variant::closed_values(input, &claims, sel)?;
        let json = variant::variant_json(label, &values);
        w.add_new(&mut zw, &format!("{new_info}variant.json"), json.as_bytes())?;
    }
    let record_name = format!("{new_info}RECORD");
    let text = record::write(&w.written, &record_name);
    zw.start_file(record_name.as_str(), small_options())
        .map_err(w.zip_error())?;
    zw.write_all(text.as_bytes()).map_err(io_at(&dest))?;
    zw.finish().map_err(w.zip_error())?;
    // Read back before it is committed: every member there, with the bytes RECORD says.
    check_wheel(tmp.path(), &w.written, &record_name).map_err(|m| wheel_error(&dest, m))?;
    tmp.permissions_of(input)?;
    let Writer {
        scratch,
        mut report,
        ..
    } = w;
    drop(scratch);
    outs.commit(vec![tmp])?;
    let beside_fat = match naming.label {
        None => fat_wheel_beside(&dest, &naming),
        Some(_) => None,
    };
    report.package = Some(Written {
        path: dest,
        version: Some(naming.new_version),
        label: naming.label,
        claims,
        beside_fat,
    });
    Ok(report)
}

/// A wheel of the same project and public version, not labelled by fatpack, in the folder
/// a local-label wheel (`dest`) goes into: the fat wheel, which pip and uv pass over for
/// the local version (PEP 440 ranks `1.0+sm90` above `1.0`, and `==1.0` matches it).
fn fat_wheel_beside(dest: &Path, naming: &Naming) -> Option<String> {
    let dist = naming.old_info.split('-').next()?;
    let public = naming.version.split('+').next()?;
    let ours = |v: &str| {
        v.split_once('+')
            .is_some_and(|(_, local)| local.split('.').any(variant::is_ours))
    };
    let folder = dest.parent()?;
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names.into_iter().find(|n| {
        let stem = n.strip_suffix(".whl").unwrap_or("");
        let mut parts = stem.split('-');
        let (Some(d), Some(v)) = (parts.next(), parts.next()) else {
            return false;
        };
        // A variant wheel (a label after its platform tag) is no fat wheel.
        let variant =
            stem.split('-').count() > 5 && stem.rsplit('-').next().is_some_and(variant::is_ours);
        d.eq_ignore_ascii_case(dist) && v.split('+').next() == Some(public) && !ours(v) && !variant
    })
}

/// Options to write a member again with: its method, time and mode (file type aside:
/// zip's writer sets that from how the member is added).
pub(super) fn options(m: &Member, method: zip::CompressionMethod) -> zip::write::SimpleFileOptions {
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(method)
        .last_modified_time(zip::DateTime::default());
    match m.mode {
        Some(mode) => opts.unix_permissions(mode),
        None => opts,
    }
}

/// Options for a member fatpack writes itself: deflated, 0644, a fixed time (same bytes for
/// the same input).
pub(super) fn small_options() -> zip::write::SimpleFileOptions {
    zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644)
}

struct Writer<'a> {
    input: &'a Path,
    dest: &'a Path,
    sel: &'a Selection,
    outs: &'a Outputs,
    /// Where ELF members are spooled and pruned (removed with everything in it).
    scratch: crate::commit::Staged,
    report: PruneReport,
    /// What the new `RECORD` lists: name, sha256, size.
    written: Vec<(String, String, u64)>,
}

impl Writer<'_> {
    fn zip_error(&self) -> impl Fn(zip::result::ZipError) -> PruneError + '_ {
        move |e| wheel_error(self.dest, e.to_string())
    }

    fn add_new(
        &mut self,
        zw: &mut zip::ZipWriter<&mut std::fs::File>,
        name: &str,
        bytes: &[u8],
    ) -> Result<(), PruneError> {
        zw.start_file(name, small_options())
            .map_err(self.zip_error())?;
        zw.write_all(bytes).map_err(io_at(self.dest))?;
        self.written
            .push((name.to_string(), record::sha256(bytes), bytes.len() as u64));
        Ok(())
    }

    /// One file member: verified against `line`, pruned if it is a fat ELF file, written.
    #[allow(clippy::too_many_arguments)]
    fn member(
        &mut self,
        zip: &mut Zip,
        zw: &mut zip::ZipWriter<&mut std::fs::File>,
        i: usize,
        m: &Member,
        new_name: &str,
        line: &record::Line,
        naming: &Naming,
    ) -> Result<(), PruneError> {
        let input = self.input;
        if m.is_symlink() {
            let (target, digest) = read_verified(input, zip, i, m, line)?;
            let target = symlink_target(input, m, target)?;
            let opts = options(m, zip::CompressionMethod::Stored);
            zw.add_symlink(new_name, &target, opts)
                .map_err(self.zip_error())?;
            self.written
                .push((new_name.to_string(), digest, target.len() as u64));
            return Ok(());
        }
        if m.name == format!("{}METADATA", naming.old_info) && naming.version != naming.new_version
        {
            let (bytes, _) = read_verified(input, zip, i, m, line)?;
            let new =
                set_version(&bytes, &naming.version, &naming.new_version).ok_or_else(|| {
                    wheel_error(
                        input,
                        format!("{}: no Version: {} line", m.name, naming.version),
                    )
                })?;
            let opts = options(m, zip::CompressionMethod::Deflated);
            zw.start_file(new_name, opts).map_err(self.zip_error())?;
            zw.write_all(&new).map_err(io_at(self.dest))?;
            self.written
                .push((new_name.to_string(), record::sha256(&new), new.len() as u64));
            return Ok(());
        }
        let (digest, size, pruned) = self.stream(zip, i, m, line)?;
        match pruned {
            Some(path) => {
                let opts = options(m, zip::CompressionMethod::Deflated).large_file(
                    std::fs::metadata(&path).map_err(io_at(&path))?.len() >= u64::from(u32::MAX),
                );
                zw.start_file(new_name, opts).map_err(self.zip_error())?;
                let (digest, size) = copy_hashing(&path, zw).map_err(io_at(self.dest))?;
                std::fs::remove_file(&path).map_err(io_at(&path))?;
                self.written.push((new_name.to_string(), digest, size));
            }
            None => {
                // As it was, compressed bytes and all: only what changed is compressed again.
                let raw = zip
                    .by_index_raw(i)
                    .map_err(|e| wheel_error(input, format!("{}: {e}", m.name)))?;
                zw.raw_copy_file_rename(raw, new_name)
                    .map_err(self.zip_error())?;
                self.written.push((new_name.to_string(), digest, size));
            }
        }
        Ok(())
    }

    /// Streams member `i` through its check; an ELF file or archive is spooled to the
    /// scratch folder and pruned there. Returns its sha256 and size, and the pruned file if
    /// it had device code.
    fn stream(
        &mut self,
        zip: &mut Zip,
        i: usize,
        m: &Member,
        line: &record::Line,
    ) -> Result<(String, u64, Option<PathBuf>), PruneError> {
        let input = self.input;
        let spool = self.scratch.path().join(format!("member-{i}"));
        let (digest, size, elf_or_ar) = verified_spool(input, zip, i, m, line, &spool)?;
        if !elf_or_ar {
            return Ok((digest, size, None));
        }
        // Mapped (the mapping keeps the file's bytes once its name is gone).
        let data = super::InputBytes::read(&spool, &super::Relocate::default())?;
        std::fs::remove_file(&spool).map_err(io_at(&spool))?;
        let shown = PathBuf::from(format!("{}!{}", input.display(), m.name));
        let at = self.scratch.path().join(format!("pruned-{i}"));
        let mut one = PruneReport::default();
        let Some(tmp) = prune_member(&shown, &data, self.sel, &at, self.outs, &mut one)? else {
            return Ok((digest, size, None));
        };
        drop(data);
        let after = tmp.as_file().metadata().map_err(io_at(tmp.path()))?.len();
        std::fs::rename(tmp.path(), &at).map_err(io_at(&at))?;
        add(&mut self.report, m.name.clone(), size, after, one);
        Ok((digest, size, Some(at)))
    }
}

/// A small member read whole and checked against its `RECORD` line; with its sha256 as
/// `RECORD` spells it.
pub(super) fn read_verified(
    input: &Path,
    zip: &mut Zip,
    i: usize,
    m: &Member,
    line: &record::Line,
) -> Result<(Vec<u8>, String), PruneError> {
    let bytes = read_small(input, zip, i, &m.name)?;
    let mut h = Hashing::new(line.algo);
    h.update(&bytes);
    let digest = h.verify(input, &m.name, line)?;
    Ok((bytes, digest))
}

/// A symlink member's target: UTF-8, and inside the wheel.
pub(super) fn symlink_target(
    input: &Path,
    m: &Member,
    target: Vec<u8>,
) -> Result<String, PruneError> {
    let target = String::from_utf8(target)
        .map_err(|_| wheel_error(input, format!("symlink {}: target is not UTF-8", m.name)))?;
    if let Some(why) = names::escaping_link(&m.name, &target) {
        return Err(wheel_error(
            input,
            format!("member {}: {why}; refused", m.name),
        ));
    }
    Ok(target)
}

/// Streams member `i` through its check against its `RECORD` line, in small blocks; an ELF
/// file or archive is spooled to `spool` on the way. Returns its sha256 as `RECORD` spells
/// it, its size, and whether it was spooled.
pub(super) fn verified_spool(
    input: &Path,
    zip: &mut Zip,
    i: usize,
    m: &Member,
    line: &record::Line,
    spool: &Path,
) -> Result<(String, u64, bool), PruneError> {
    let read_error = |e: std::io::Error| {
        wheel_error(
            input,
            format!("member {}: {e} (damaged or altered); refused", m.name),
        )
    };
    let mut f = zip
        .by_index(i)
        .map_err(|e| wheel_error(input, format!("member {}: {e}", m.name)))?;
    let mut h = Hashing::new(line.algo);
    let (head, got) = super::sniff::read_head(&mut f).map_err(read_error)?;
    h.update(&head[..got]);
    let elf_or_ar = super::sniff::is_binary(&head[..got]);
    let mut sink: Box<dyn Write> = match elf_or_ar {
        true => {
            let mut s = std::fs::File::create(spool).map_err(io_at(spool))?;
            s.write_all(&head[..got]).map_err(io_at(spool))?;
            Box::new(std::io::BufWriter::new(s))
        }
        false => Box::new(std::io::sink()),
    };
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(read_error)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        sink.write_all(&buf[..n]).map_err(io_at(spool))?;
    }
    sink.flush().map_err(io_at(spool))?;
    drop(sink);
    let size = h.len;
    let digest = h.verify(input, &m.name, line)?;
    Ok((digest, size, elf_or_ar))
}

/// Copies the file `path` into `to`, returning its sha256 (as `RECORD` spells it) and size.
pub(super) fn copy_hashing(path: &Path, to: &mut impl Write) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Hasher::new(Algo::Sha256);
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok((h.finish(), len));
        }
        h.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        len += n as u64;
    }
}

/// `METADATA` with its `Version:` line set to `new`.
fn set_version(metadata: &[u8], old: &str, new: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(metadata).ok()?;
    let line = format!("Version: {old}");
    let at = text.lines().position(|l| l.trim_end() == line)?;
    let out: Vec<String> = text
        .split_inclusive('\n')
        .enumerate()
        .map(|(i, l)| match i == at {
            true => l.replacen(&line, &format!("Version: {new}"), 1),
            false => l.to_string(),
        })
        .collect();
    Some(out.concat().into_bytes())
}

/// Reads the written wheel back, streaming: every member there, in order, with the bytes
/// `RECORD` says.
pub(super) fn check_wheel(
    path: &Path,
    written: &[(String, String, u64)],
    record_name: &str,
) -> Result<(), String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut zip =
        zip::ZipArchive::new(BufReader::new(f)).map_err(|e| format!("does not read back: {e}"))?;
    let mut want = written.iter();
    for i in 0..zip.len() {
        let mut m = zip.by_index(i).map_err(|e| e.to_string())?;
        if m.is_dir() || m.name() == record_name {
            continue;
        }
        let Some((name, digest, size)) = want.next() else {
            return Err(format!("{} reads back but was not written", m.name()));
        };
        let mut h = Hashing::new(Algo::Sha256);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = m.read(&mut buf).map_err(|e| format!("{name}: {e}"))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        let len = h.len;
        if m.name() != name || len != *size || h.check.finish() != *digest {
            return Err(format!("{name} does not read back as written"));
        }
    }
    match want.next() {
        Some((name, ..)) => Err(format!("{name} was written but does not read back")),
        None => Ok(()),
    }
}

/// A Python wheel, as the package layer sees it ([`PackageFormat`]).
pub(crate) struct Wheel;

impl PackageFormat for Wheel {
    fn name(&self) -> &'static str {
        "wheel"
    }

    fn claims(&self, path: &Path) -> bool {
        is_wheel_name(path)
    }

    fn prune(
        &self,
        input: &Path,
        output: &Path,
        sel: &Selection,
        opts: &super::Options,
        outs: Outputs,
    ) -> Result<PruneReport, PruneError> {
        prune_wheel(input, output, sel, opts.wheel_form, outs)
    }

    fn split(
        &self,
        input: &Path,
        into: &Path,
        _effort: super::Effort,
    ) -> Result<super::split::PackageSplit, PruneError> {
        split::split_wheel(input, into)
    }

    fn for_each_binary(
        &self,
        input: &Path,
        scratch: &Path,
        f: super::EachBinary<'_>,
    ) -> Result<(), PruneError> {
        super::members::wheel(input, scratch, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_is_set() {
        let m = b"Metadata-Version: 2.1\nName: x\nVersion: 2.11.0+cu130\nSummary: s\n";
        let out = set_version(m, "2.11.0+cu130", "2.11.0+cu130.sm90").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Metadata-Version: 2.1\nName: x\nVersion: 2.11.0+cu130.sm90\nSummary: s\n"
        );
    }
}
