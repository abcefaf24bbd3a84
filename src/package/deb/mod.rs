//! A Debian package pruned (`.deb`): one binary package per GPU beside the fat one.
//!
//! apt cannot see a GPU, so the choice is the administrator's (or a deployment tool's):
//! `libfoo` pruned for 9.0 becomes `libfoo-sm90`, which `Provides: libfoo (= VERSION)` and
//! `Conflicts:`/`Replaces: libfoo`. Installing it swaps the fat package out, and everything
//! that depends on `libfoo`, versioned or not, is satisfied by it; `apt install libfoo`
//! still gets the fat one. `X-Cuda-Arch` names the GPUs it serves as the whole build did.
//!
//! `md5sums` is the package's contract: every regular file of the data archive (less the
//! conffiles, which dh_md5sums leaves out) is checked against it before anything is pruned,
//! every line of it must name a file, member names that leave the root and duplicates are
//! refused; the new `md5sums` and `Installed-Size` are written from what was written, and
//! the package read back before it is committed. The archives keep their compression
//! (gzip, xz, zstd or none), their entries' modes, owners and times.

mod split;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufReader, Read, Write};
use std::path::Path;

use fatpack_format::select::capability_string;
use md5::Digest;

use super::compress::{Codec, Effort};
use super::tarball::{self, hex, spool_tar, write_tar, Entry, Kind};
use super::variant;
use super::PackageFormat;
use super::{add, metadata, names, prune_spooled, Written};
use crate::commit::{Outputs, Staged};
use crate::error::io_at;
use crate::prune::{PruneError, PruneReport, Selection};

/// Whether `input` is named as a Debian package.
pub(crate) fn is_deb_name(input: &Path) -> bool {
    input.extension().is_some_and(|e| e == "deb" || e == "udeb")
}

fn bad(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// An ar member header (the common `ar` format dpkg-deb writes): 60 bytes.
const AR_HEADER: usize = 60;
/// Where its fields are: name 16, mtime 12, uid 6, gid 6, mode 8, size 10, "`\n".
const AR_SIZE_AT: usize = 48;
const AR_SIZE_LEN: usize = 10;

/// The package, spooled: each archive's entries, and their codecs (`debian-binary` checked).
pub(super) struct Spooled {
    pub control: Vec<Entry>,
    pub control_codec: Codec,
    pub data: Vec<Entry>,
    pub data_codec: Codec,
}

/// Reads the `.deb` `input`: an ar archive of `debian-binary`, `control.tar*`, `data.tar*`
/// in that order (members starting with `_` may follow `debian-binary`, as dpkg allows).
pub(super) fn spool(input: &Path, scratch: &Path) -> Result<Spooled, PruneError> {
    let mut f = BufReader::new(std::fs::File::open(input).map_err(io_at(input))?);
    let mut magic = [0u8; 8];
    f.read_exact(&mut magic)
        .map_err(|_| bad(input, "not a Debian package: too short"))?;
    if &magic != b"!<arch>\n" {
        return Err(bad(input, "not a Debian package: not an ar archive"));
    }
    let (mut debian_binary, mut control, mut data) = (None, None, None);
    let (mut control_codec, mut data_codec) = (Codec::None, Codec::None);
    let mut header = [0u8; AR_HEADER];
    let mut members = 0;
    while f.read_exact(&mut header).is_ok() {
        members += 1;
        let name = String::from_utf8_lossy(&header[..16])
            .trim_end()
            .trim_end_matches('/')
            .to_string();
        let size: u64 = std::str::from_utf8(&header[AR_SIZE_AT..AR_SIZE_AT + AR_SIZE_LEN])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| bad(input, format!("member {name:?}: its size does not read")))?;
        let mut body = (&mut f).take(size);
        if name == "debian-binary" && members == 1 {
            let mut b = Vec::new();
            body.read_to_end(&mut b).map_err(io_at(input))?;
            // dpkg-deb writes `2.0\n`; nothing vouches for it, so it is read as a version
            // line or refused: any other byte would be carried into the variant.
            let minor = b.strip_prefix(b"2.").and_then(|r| r.strip_suffix(b"\n"));
            if !minor.is_some_and(|m| !m.is_empty() && m.iter().all(u8::is_ascii_digit)) {
                return Err(bad(
                    input,
                    "debian-binary is not a format 2.x version line; refused",
                ));
            }
            debian_binary = Some(());
        } else if let (Some(codec), None) = (Codec::of_deb_member(&name, "control.tar"), &control) {
            let mut entries = Vec::new();
            let r = codec.reader(&mut body).map_err(io_at(input))?;
            spool_tar(input, &name, r, true, scratch, &mut entries)?;
            control_codec = codec;
            control = Some(entries);
        } else if let (Some(codec), Some(_), None) =
            (Codec::of_deb_member(&name, "data.tar"), &control, &data)
        {
            let mut entries = Vec::new();
            let r = codec.reader(&mut body).map_err(io_at(input))?;
            spool_tar(input, &name, r, false, scratch, &mut entries)?;
            data_codec = codec;
            data = Some(entries);
        } else if !(name.starts_with('_') && control.is_none()) {
            return Err(bad(
                input,
                format!("member {name:?} has no place in a Debian package; refused"),
            ));
        }
        std::io::copy(&mut body, &mut std::io::sink()).map_err(io_at(input))?;
        if size % 2 == 1 {
            f.read_exact(&mut [0u8; 1]).map_err(io_at(input))?;
        }
    }
    let missing = |what: &str| bad(input, format!("no {what} in it"));
    debian_binary.ok_or_else(|| missing("debian-binary"))?;
    Ok(Spooled {
        control: control.ok_or_else(|| missing("control.tar"))?,
        control_codec,
        data: data.ok_or_else(|| missing("data.tar"))?,
        data_codec,
    })
}

/// The ELF files and archives of the data archive, spooled under `scratch`: (name, file).
pub(super) fn spool_binaries(
    input: &Path,
    scratch: &Path,
) -> Result<Vec<(String, std::path::PathBuf)>, PruneError> {
    tarball::binaries(spool(input, scratch)?.data)
}

pub(super) fn control_file<'a>(
    input: &Path,
    control: &'a [Entry],
    name: &str,
) -> Result<Option<&'a Path>, PruneError> {
    let Some(e) = control.iter().find(|e| e.name == name) else {
        return Ok(None);
    };
    match &e.data {
        Some((path, _, len)) if *len <= 64 << 20 => Ok(Some(path)),
        _ => Err(bad(input, format!("control {name} is not a small file"))),
    }
}

pub(super) fn md5_file(path: &Path) -> Result<String, PruneError> {
    let mut f = std::fs::File::open(path).map_err(io_at(path))?;
    let mut h = md5::Md5::new();
    std::io::copy(&mut f, &mut h).map_err(io_at(path))?;
    Ok(hex(&h.finalize()))
}

/// Every regular file of the data archive against `md5sums` (conffiles aside), every line
/// of it a file, no name twice.
pub(super) fn check(input: &Path, pkg: &Spooled) -> Result<BTreeMap<String, String>, PruneError> {
    // Absolute links are read against the root dpkg installs into (policy 10.5 asks for them
    // between top-level folders); relative ones must not climb above it.
    tarball::check_tree(input, &pkg.data, names::Absolute::FromRoot)?;
    tarball::check_tree(input, &pkg.control, names::Absolute::Refused)?;
    if let Some(e) = pkg
        .control
        .iter()
        .find(|e| e.data.is_none() && e.kind != Kind::Dir)
    {
        return Err(bad(
            input,
            format!("control archive entry {} is a link; refused", e.name),
        ));
    }
    let Some(sums) = control_file(input, &pkg.control, "md5sums")? else {
        // A package without files (a metapackage) has nothing to vouch for; dh_md5sums
        // writes no md5sums for it.
        if pkg.data.iter().all(|e| e.kind == Kind::Dir) {
            return Ok(BTreeMap::new());
        }
        return Err(bad(
            input,
            "no md5sums in its control archive: it cannot be checked; refused",
        ));
    };
    let text = std::fs::read_to_string(sums).map_err(|_| bad(input, "md5sums is not text"))?;
    let mut want: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (sum, path) = line
            .split_once("  ")
            .ok_or_else(|| bad(input, format!("md5sums line {line:?} is not `md5  path`")))?;
        if want
            .insert(path.trim_start_matches("./").to_string(), sum.to_string())
            .is_some()
        {
            return Err(bad(input, format!("md5sums lists {path} twice; refused")));
        }
    }
    let conffiles: HashSet<String> = match control_file(input, &pkg.control, "conffiles")? {
        Some(p) => std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().trim_start_matches('/').to_string())
            .collect(),
        None => HashSet::new(),
    };
    let mut unchecked = want.clone();
    // Each spooled file's md5, once: a hard link is its target's bytes under a second name,
    // which md5sums lists too (check_tree has made sure its target is a file before it).
    let mut md5s: BTreeMap<&Path, String> = BTreeMap::new();
    for e in &pkg.data {
        let Some((path, ..)) = tarball::bytes_of(&pkg.data, e) else {
            continue;
        };
        let sum = match md5s.get(path.as_path()) {
            Some(sum) => sum.clone(),
            None => {
                let sum = md5_file(path)?;
                md5s.insert(path, sum.clone());
                sum
            }
        };
        match unchecked.remove(&e.name) {
            Some(want) if want == sum => {}
            Some(_) => {
                return Err(bad(
                    input,
                    format!(
                        "{} does not match md5sums (damaged or altered); refused",
                        e.name
                    ),
                ))
            }
            None if conffiles.contains(&e.name) => {}
            None => {
                return Err(bad(
                    input,
                    format!(
                        "{} is not in md5sums: nothing vouches for it; refused",
                        e.name
                    ),
                ))
            }
        }
    }
    if let Some(name) = unchecked.keys().next() {
        return Err(bad(
            input,
            format!("md5sums lists {name}, which is not in the package; refused"),
        ));
    }
    Ok(want)
}

/// The control file's fields, in order (continuation lines kept with their field).
pub(super) fn fields(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1.push('\n');
                last.1.push_str(line);
            }
        } else if let Some((k, v)) = line.split_once(':') {
            out.push((k.to_string(), v.trim_start().to_string()));
        }
    }
    out
}

pub(super) fn field<'a>(f: &'a [(String, String)], name: &str) -> Option<&'a str> {
    f.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The package's name, version and architecture from its control fields, each checked
/// against Debian's policy: they become part of output file names and control files.
pub(super) fn identity(
    input: &Path,
    f: &[(String, String)],
) -> Result<(String, String, String), PruneError> {
    let name = field(f, "Package")
        .ok_or_else(|| bad(input, "control has no Package"))?
        .to_string();
    let version = field(f, "Version")
        .ok_or_else(|| bad(input, "control has no Version"))?
        .to_string();
    let arch = field(f, "Architecture").unwrap_or("all").to_string();
    for (what, value, check) in [
        ("Package", &name, metadata::debian_package as fn(&str) -> _),
        ("Version", &version, metadata::debian_version),
        ("Architecture", &arch, metadata::debian_architecture),
    ] {
        check(value).map_err(|why| {
            bad(
                input,
                format!("control {what}: {value:?} is {why}; refused"),
            )
        })?;
    }
    Ok((name, version, arch))
}

/// A package's file name: `{name}_{version without epoch}_{arch}.deb`.
pub(super) fn file_name(name: &str, version: &str, arch: &str) -> String {
    let version_in_name = version.split_once(':').map_or(version, |(_, v)| v);
    format!("{name}_{version_in_name}_{arch}.deb")
}

/// The control file of the variant: renamed, providing, conflicting with and replacing the
/// fat package, its size and the GPUs it serves set.
fn variant_control(
    input: &Path,
    text: &str,
    suffix: &str,
    installed_kib: u64,
    claims: &[u32],
) -> Result<(String, String, String, String), PruneError> {
    let mut f = fields(text);
    let (name, version, arch) = identity(input, &f)?;
    let new_name = format!("{name}-{suffix}");
    let provide = format!("{name} (= {version})");
    let gpus: Vec<String> = claims.iter().map(|c| capability_string(*c)).collect();
    let mut set = |k: &str, v: String, append: bool| match f
        .iter_mut()
        .find(|(key, _)| key.eq_ignore_ascii_case(k))
    {
        Some((_, old)) if append => *old = format!("{old}, {v}"),
        Some((_, old)) => *old = v,
        None => f.push((k.to_string(), v)),
    };
    set("Package", new_name.clone(), false);
    set("Provides", provide, true);
    set("Conflicts", name.clone(), true);
    set("Replaces", name, true);
    set("Installed-Size", installed_kib.to_string(), false);
    set("X-Cuda-Arch", gpus.join(" "), false);
    let text: String = f.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    Ok((text, new_name, version, arch))
}

/// A `.deb`: verified, every fat ELF file pruned, written as the variant package.
pub(crate) fn prune_deb(
    input: &Path,
    output: &Path,
    sel: &Selection,
    effort: Effort,
    mut outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let scratch = outs.scratch(output)?;
    let mut pkg = spool(input, scratch.path())?;
    let mut sums = check(input, &pkg)?;
    let mut report = PruneReport::default();
    let mut kib_delta: i64 = 0;
    let progress = crate::progress::Progress::new();
    for e in pkg.data.iter_mut() {
        progress.step(format!("prune: {}", e.name));
        let Some((one, before)) = prune_spooled(input, e, sel, scratch.path(), &outs)? else {
            continue;
        };
        let (path, _, len) = e.data.as_ref().expect("a pruned entry is a file");
        kib_delta += len.div_ceil(1024) as i64 - before.div_ceil(1024) as i64;
        add(&mut report, e.name.clone(), before, *len, one);
        if let Some(sum) = sums.get_mut(&e.name) {
            *sum = md5_file(path)?;
        }
    }
    progress.done();
    // Hard links to a pruned file carry its new bytes: their md5sums lines follow.
    for e in &pkg.data {
        if let Kind::HardLink(t) = &e.kind {
            if let (Some(new), true) = (sums.get(t).cloned(), sums.contains_key(&e.name)) {
                sums.insert(e.name.clone(), new);
            }
        }
    }
    let claims = super::claims(input, &report, sel)?;
    let control_path = control_file(input, &pkg.control, "control")?
        .ok_or_else(|| bad(input, "no control file in its control archive"))?;
    let text =
        std::fs::read_to_string(control_path).map_err(|_| bad(input, "control is not text"))?;
    // Without one, as dpkg-gencontrol counts it: each file's KiB, rounded up, and 1 for
    // every other entry (the variant's own files are counted, so no delta is added).
    let (old_kib, kib_delta): (i64, i64) =
        match field(&fields(&text), "Installed-Size").and_then(|s| s.trim().parse().ok()) {
            Some(kib) => (kib, kib_delta),
            None => (
                pkg.data
                    .iter()
                    .filter(|e| e.name != ".")
                    .map(|e| e.data.as_ref().map_or(1, |d| d.2.div_ceil(1024)) as i64)
                    .sum(),
                0,
            ),
        };
    let suffix = variant::label(sel).replace('.', "-");
    let installed = (old_kib + kib_delta).max(0) as u64;
    let (control, name, version, arch) =
        variant_control(input, &text, &suffix, installed, &claims)?;
    let md5sums: String = sums.iter().map(|(p, s)| format!("{s}  {p}\n")).collect();
    set_file(
        &mut pkg.control,
        "control",
        control.as_bytes(),
        scratch.path(),
    )?;
    set_file(
        &mut pkg.control,
        "md5sums",
        md5sums.as_bytes(),
        scratch.path(),
    )?;
    let dest = super::destination(
        output,
        &file_name(&name, &version, &arch),
        "its name, version and architecture",
        &mut outs,
    )?;
    outs.check(&dest)?;
    let tmp = write_checked(pkg, effort, scratch.path(), &outs, &dest)?;
    tmp.permissions_of(input)?;
    drop(scratch);
    outs.commit(vec![tmp])?;
    report.package = Some(Written {
        path: dest,
        version: Some(version),
        label: Some(format!(
            "{name}, Provides/Conflicts/Replaces the fat package"
        )),
        claims,
        beside_fat: None,
    });
    Ok(report)
}

/// Writes `pkg` as the package `dest`, then reads it back from the file alone, spooled again
/// and checked against its own `md5sums`, before it may be committed. The entries held for
/// writing go first.
pub(super) fn write_checked(
    pkg: Spooled,
    effort: Effort,
    scratch: &Path,
    outs: &Outputs,
    dest: &Path,
) -> Result<Staged, PruneError> {
    let mut tmp = outs.file(dest)?;
    write_deb(&pkg, effort, scratch, &mut tmp, dest)?;
    drop(pkg);
    let back_scratch = outs.scratch(dest)?;
    let back = spool(tmp.path(), back_scratch.path())
        .map_err(|e| bad(dest, format!("does not read back: {e}")))?;
    check(dest, &back)?;
    Ok(tmp)
}

pub(super) fn set_file(
    entries: &mut [Entry],
    name: &str,
    bytes: &[u8],
    scratch: &Path,
) -> Result<(), PruneError> {
    let Some(e) = entries.iter_mut().find(|e| e.name == name) else {
        return Ok(());
    };
    let at = scratch.join(format!("new-control-{name}"));
    std::fs::write(&at, bytes).map_err(io_at(&at))?;
    e.data = Some((at, String::new(), bytes.len() as u64));
    Ok(())
}

fn write_deb(
    pkg: &Spooled,
    effort: Effort,
    scratch: &Path,
    tmp: &mut Staged,
    dest: &Path,
) -> Result<(), PruneError> {
    let io = io_at(dest);
    let mut out = std::io::BufWriter::new(tmp.as_file());
    out.write_all(b"!<arch>\n").map_err(&io)?;
    let mut member = |name: &str, body: &Path| -> std::io::Result<()> {
        let len = std::fs::metadata(body)?.len();
        // The ar header as dpkg-deb writes it: time 0 (reproducible), root, 0644.
        writeln!(
            out,
            "{name:<16}{:<12}{:<6}{:<6}{:<8}{len:<10}`",
            0, 0, 0, 100644
        )?;
        std::io::copy(&mut std::fs::File::open(body)?, &mut out)?;
        if len % 2 == 1 {
            out.write_all(b"\n")?;
        }
        Ok(())
    };
    // The format fatpack writes, whatever 2.x the input said (nothing vouches for that line).
    let db = scratch.join("debian-binary");
    std::fs::write(&db, b"2.0\n").map_err(io_at(&db))?;
    member("debian-binary", &db).map_err(&io)?;
    for (base, entries, codec) in [
        ("control.tar", &pkg.control, pkg.control_codec),
        ("data.tar", &pkg.data, pkg.data_codec),
    ] {
        let packed = scratch.join(base);
        let file = std::fs::File::create(&packed).map_err(io_at(&packed))?;
        codec
            .encode(effort, std::io::BufWriter::new(file), |w| {
                write_tar(entries, |_| true, w)
            })
            .and_then(|mut w| w.flush())
            .map_err(io_at(&packed))?;
        member(&format!("{base}{}", codec.deb_suffix()), &packed).map_err(&io)?;
    }
    out.flush().map_err(&io)?;
    Ok(())
}

/// A Debian package, as the package layer sees it ([`PackageFormat`]).
pub(crate) struct Deb;

impl PackageFormat for Deb {
    fn name(&self) -> &'static str {
        "Debian package"
    }

    fn claims(&self, path: &Path) -> bool {
        is_deb_name(path)
    }

    fn prune(
        &self,
        input: &Path,
        output: &Path,
        sel: &Selection,
        opts: &super::Options,
        outs: Outputs,
    ) -> Result<PruneReport, PruneError> {
        prune_deb(input, output, sel, opts.compression, outs)
    }

    fn split(
        &self,
        input: &Path,
        into: &Path,
        effort: super::Effort,
    ) -> Result<super::split::PackageSplit, PruneError> {
        split::split_deb(input, into, effort)
    }

    fn for_each_binary(
        &self,
        input: &Path,
        scratch: &Path,
        f: super::EachBinary<'_>,
    ) -> Result<(), PruneError> {
        for (name, path) in spool_binaries(input, scratch)? {
            f(&name, &path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_provides_conflicts_and_replaces_the_fat_package() {
        let text = "Package: libcut1\nVersion: 1:1.0-1\nArchitecture: amd64\nDepends: libc6\nInstalled-Size: 2000\nDescription: cut\n a library\n";
        let (c, name, version, arch) =
            variant_control(Path::new("x.deb"), text, "sm90", 1200, &[90]).unwrap();
        assert_eq!(
            (name.as_str(), version.as_str(), arch.as_str()),
            ("libcut1-sm90", "1:1.0-1", "amd64")
        );
        for want in [
            "Package: libcut1-sm90\n",
            "Provides: libcut1 (= 1:1.0-1)\n",
            "Conflicts: libcut1\n",
            "Replaces: libcut1\n",
            "Installed-Size: 1200\n",
            "X-Cuda-Arch: 9.0\n",
            "Description: cut\n a library\n",
        ] {
            assert!(c.contains(want), "{want:?} in {c}");
        }
    }
}
