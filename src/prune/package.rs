//! `fatpack prune` over a whole package, one build shipped per GPU:
//!
//! - a folder (an installed prefix, a Nix output, a conda package's files): copied, every
//!   ELF file with device code in it pruned, everything else (symlinks too) as it was;
//! - a Python wheel: every ELF member pruned, `RECORD` rewritten (hashes and sizes), and the
//!   capabilities recorded in the version's local label, `+cu130` -> `+cu130.sm90`, so that
//!   the per-GPU wheels of one build can sit side by side in one index and be pinned
//!   (`torch==2.11.0+cu130.sm90`). A local label is what PyTorch's own CUDA variants
//!   already use and what every installer understands today; PEP 817's variant properties
//!   (`nvidia :: sm_arch`) are a draft no installer reads yet.
//!
//! The output is built beside its destination and renamed into place only once whole; the
//! input is never modified.

use std::io::{Read, Write};
use std::path::Path;

use super::{io_at, prune_data, PruneError, PruneReport, Selection};
use crate::commit::{Outputs, Staged};
use crate::inputs::{self, FileKind};

/// One file a package prune rewrote.
#[derive(Debug)]
pub struct PackageFile {
    /// Its path inside the package.
    pub path: String,
    pub size_before: u64,
    pub size_after: u64,
    pub report: PruneReport,
}

/// Whether `data` (the file `input`) is a wheel: a zip file named `*.whl`.
pub(super) fn is_wheel(input: &Path, data: &[u8]) -> bool {
    input.extension().is_some_and(|e| e == "whl") && data.starts_with(b"PK\x03\x04")
}

/// Whether `data` is something prune rewrites: an ELF file or archive with device code.
fn has_device_code(path: &Path, data: &[u8]) -> bool {
    matches!(
        inputs::sniff(data),
        FileKind::Object | FileKind::SharedLibrary | FileKind::Executable | FileKind::Archive
    ) && inputs::scan_at(path, data, inputs::Depth::Spans)
        .is_ok_and(|s| s.sections.iter().any(|d| !d.spans.is_empty()))
}

/// Prunes one member into a temp file beside `dest` (where it will go): `Some(file)` if it
/// has device code (the file keeps the holes an in-place prune punches). `shown` names it
/// in errors.
fn prune_member(
    shown: &Path,
    data: &[u8],
    sel: &Selection,
    dest: &Path,
    outs: &Outputs,
    out: &mut PruneReport,
) -> Result<Option<Staged>, PruneError> {
    if !has_device_code(shown, data) {
        return Ok(None);
    }
    let mut tmp = outs.file(dest)?;
    let (report, side) = prune_data(shown, data, sel, tmp.named(), dest, outs)?;
    if side.is_some() {
        return Err(PruneError::Package {
            path: shown.to_path_buf(),
            message: "a packed binary with a side-file store; prune it on its own".into(),
        });
    }
    *out = report;
    Ok(Some(tmp))
}

/// A folder: copied to `output` (which must not exist) with every ELF file pruned.
pub(super) fn prune_tree(
    input: &Path,
    output: &Path,
    sel: &Selection,
    outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let staging = outs.dir(output)?;
    let mut report = PruneReport::default();
    copy_tree(input, input, staging.path(), sel, &outs, &mut report)?;
    outs.commit(vec![staging])?;
    Ok(report)
}

fn copy_tree(
    root: &Path,
    dir: &Path,
    to: &Path,
    sel: &Selection,
    outs: &Outputs,
    report: &mut PruneReport,
) -> Result<(), PruneError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io_at(dir))?
        .collect::<Result<_, _>>()
        .map_err(io_at(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let from = e.path();
        let dest = to.join(e.file_name());
        let meta = from.symlink_metadata().map_err(io_at(&from))?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&from).map_err(io_at(&from))?;
            std::os::unix::fs::symlink(&target, &dest).map_err(io_at(&dest))?;
        } else if meta.is_dir() {
            std::fs::create_dir(&dest).map_err(io_at(&dest))?;
            copy_tree(root, &from, &dest, sel, outs, report)?;
            std::fs::set_permissions(&dest, meta.permissions()).map_err(io_at(&dest))?;
        } else {
            let map = inputs::read_file(&from)?;
            let mut one = PruneReport::default();
            match prune_member(&from, &map, sel, &dest, outs, &mut one)? {
                Some(tmp) => {
                    let after = tmp.as_file().metadata().map_err(io_at(tmp.path()))?.len();
                    // Renamed, not copied: the file keeps its holes.
                    std::fs::rename(tmp.path(), &dest).map_err(io_at(&dest))?;
                    add(report, &from, root, meta.len(), after, one);
                }
                None => {
                    std::fs::copy(&from, &dest).map_err(io_at(&dest))?;
                }
            }
            std::fs::set_permissions(&dest, meta.permissions()).map_err(io_at(&dest))?;
        }
    }
    Ok(())
}

/// Adds one pruned file to a package's report.
fn add(
    report: &mut PruneReport,
    file: &Path,
    root: &Path,
    before: u64,
    after: u64,
    one: PruneReport,
) {
    report.entries_before += one.entries_before;
    report.entries_after += one.entries_after;
    report.bytes_before += one.bytes_before;
    report.bytes_after += one.bytes_after;
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
        path: file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string(),
        size_before: before,
        size_after: after,
        report: one,
    });
}

/// The local version label that records what a wheel was pruned for.
fn label(sel: &Selection) -> Option<String> {
    match sel {
        Selection::For(caps) => Some(
            caps.iter()
                .map(|c| format!("sm{c}"))
                .collect::<Vec<_>>()
                .join("."),
        ),
        Selection::Keep { targets, .. } => Some(
            targets
                .iter()
                .map(|t| t.to_string().replace('_', ""))
                .collect::<Vec<_>>()
                .join("."),
        ),
        // Every GPU runs what it ran: the same version.
        Selection::Dead => None,
    }
}

/// `name,sha256=<urlsafe base64, no padding>,size`, as a wheel's RECORD lists a file.
fn record_line(name: &str, digest: &[u8; 32], size: u64) -> String {
    format!("{},sha256={},{size}", csv_field(name), base64_url(digest))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// URL-safe base64 without padding (RFC 4648 section 5), as PEP 376/427 hash RECORD entries.
fn base64_url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=c.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A wheel's `{name}-{version}.dist-info`, from its members' names.
fn dist_info(names: &[String]) -> Option<(String, String)> {
    let dir = names
        .iter()
        .find_map(|n| n.strip_suffix(".dist-info/WHEEL"))
        .filter(|d| !d.contains('/'))?;
    let (name, version) = dir.split_once('-')?;
    Some((name.to_string(), version.to_string()))
}

fn wheel_error(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A wheel: every ELF member pruned, RECORD rewritten, the version's local label extended.
/// `output` is the new wheel, or a folder to write it into under its new name. Members are
/// read, pruned and written one at a time (a torch wheel unpacks to gigabytes); `RECORD`
/// is written last, from what was written.
pub(super) fn prune_wheel(
    input: &Path,
    data: &[u8],
    output: &Path,
    sel: &Selection,
    outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let bad = |m: String| wheel_error(input, m);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(data))
        .map_err(|e| bad(format!("not a readable wheel: {e}")))?;
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let Some((dist, version)) = dist_info(&names) else {
        return Err(bad("no {name}-{version}.dist-info/WHEEL in it".into()));
    };
    let new_version = match label(sel) {
        Some(l) if version.contains('+') => format!("{version}.{l}"),
        Some(l) => format!("{version}+{l}"),
        None => version.clone(),
    };
    let renames = [
        (
            format!("{dist}-{version}.dist-info/"),
            format!("{dist}-{new_version}.dist-info/"),
        ),
        (
            format!("{dist}-{version}.data/"),
            format!("{dist}-{new_version}.data/"),
        ),
    ];
    let rename = |n: &str| -> String {
        for (old, new) in &renames {
            if let Some(rest) = n.strip_prefix(old.as_str()) {
                return format!("{new}{rest}");
            }
        }
        n.to_string()
    };
    let (old_info, record_name) = (&renames[0].0, format!("{}RECORD", renames[0].1));
    let dest = wheel_destination(input, output, &dist, &version, &new_version)?;
    let scratch = outs.scratch(&dest)?;
    let mut tmp = outs.file(&dest)?;
    let mut report = PruneReport::default();
    let mut written: Vec<(String, Option<[u8; 32]>, u64)> = Vec::new();
    let mut record_opts = None;
    let zip_error = |e: zip::result::ZipError| wheel_error(&dest, e.to_string());
    let mut w = zip::ZipWriter::new(tmp.named().as_file_mut());
    for i in 0..zip.len() {
        let (name, mut bytes, opts, is_dir) = read_member(&mut zip, i).map_err(bad)?;
        let new_name = rename(&name);
        if is_dir {
            w.add_directory(new_name.as_str(), opts)
                .map_err(zip_error)?;
            written.push((new_name, None, 0));
            continue;
        }
        if new_name == record_name {
            record_opts = Some(opts);
            continue;
        }
        // Signatures of the old RECORD would not hold.
        if name.starts_with(old_info.as_str())
            && (name.ends_with("RECORD.jws") || name.ends_with("RECORD.p7s"))
        {
            continue;
        }
        if name == format!("{old_info}METADATA") {
            bytes = set_version(&bytes, &version, &new_version)
                .ok_or_else(|| bad(format!("{name}: no Version: {version} line")))?;
        }
        let mut one = PruneReport::default();
        let shown = input.join(&name);
        let at = scratch.path().join(shown.file_name().unwrap_or_default());
        let pruned = prune_member(&shown, &bytes, sel, &at, &outs, &mut one)?;
        let changed = pruned.is_some() || name.ends_with("/METADATA");
        if let Some(tmp) = pruned {
            let new = std::fs::read(tmp.path()).map_err(io_at(tmp.path()))?;
            let (before, after) = (bytes.len() as u64, new.len() as u64);
            add(
                &mut report,
                Path::new(&name),
                Path::new(""),
                before,
                after,
                one,
            );
            bytes = new;
        }
        if changed {
            let opts = opts.large_file(bytes.len() as u64 >= u64::from(u32::MAX));
            w.start_file(new_name.as_str(), opts).map_err(zip_error)?;
            w.write_all(&bytes).map_err(io_at(&dest))?;
        } else {
            // As it was, compressed bytes and all: only what changed is compressed again.
            let raw = zip
                .by_index_raw(i)
                .map_err(|e| bad(format!("{name}: {e}")))?;
            w.raw_copy_file_rename(raw, new_name.as_str())
                .map_err(zip_error)?;
        }
        written.push((new_name, Some(sha256(&bytes)), bytes.len() as u64));
    }
    let Some(record_opts) = record_opts else {
        return Err(bad(format!("no {old_info}RECORD in it")));
    };
    let record = record_of(&written, &record_name);
    w.start_file(record_name.as_str(), record_opts)
        .map_err(zip_error)?;
    w.write_all(record.as_bytes()).map_err(io_at(&dest))?;
    let entry = (
        record_name,
        Some(sha256(record.as_bytes())),
        record.len() as u64,
    );
    written.push(entry);
    w.finish().map_err(zip_error)?;
    // Read back before it is committed: every member there, with the bytes RECORD says.
    check_wheel(tmp.path(), &written).map_err(|m| wheel_error(&dest, m))?;
    // The input's permissions, flushed, renamed into place.
    tmp.permissions_of(input)?;
    drop(scratch);
    outs.commit(vec![tmp])?;
    report.wheel = Some((new_version, dest));
    Ok(report)
}

/// Member `i` of a wheel: its name, bytes, the options to write it again with, and whether
/// it is a folder.
fn read_member(
    zip: &mut zip::ZipArchive<std::io::Cursor<&[u8]>>,
    i: usize,
) -> Result<(String, Vec<u8>, zip::write::SimpleFileOptions, bool), String> {
    let mut f = zip.by_index(i).map_err(|e| format!("member {i}: {e}"))?;
    let name = f.name().to_string();
    let mut bytes = Vec::with_capacity(f.size() as usize);
    f.read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: {e}"))?;
    let mut opts = zip::write::SimpleFileOptions::default().compression_method(f.compression());
    if let Some(t) = f.last_modified() {
        opts = opts.last_modified_time(t);
    }
    if let Some(mode) = f.unix_mode() {
        opts = opts.unix_permissions(mode);
    }
    Ok((name, bytes, opts, f.is_dir()))
}

/// The `RECORD` of the files `written` (folders have no digest and are not listed), itself
/// listed last without a hash, as PEP 376 has it.
fn record_of(written: &[(String, Option<[u8; 32]>, u64)], record_name: &str) -> String {
    let mut record = String::new();
    for (name, digest, size) in written {
        if let Some(d) = digest {
            record.push_str(&(record_line(name, d, *size) + "\n"));
        }
    }
    record.push_str(&format!("{},,\n", csv_field(record_name)));
    record
}

fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

/// Where the pruned wheel goes: `output` itself if it carries the wheel's new name (which
/// installers check against its version), or that name inside the folder `output`.
fn wheel_destination(
    input: &Path,
    output: &Path,
    dist: &str,
    version: &str,
    new_version: &str,
) -> Result<std::path::PathBuf, PruneError> {
    let in_name = input
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let tags = in_name
        .strip_suffix(".whl")
        .and_then(|n| n.strip_prefix(&format!("{dist}-{version}-")))
        .ok_or_else(|| {
            wheel_error(
                input,
                format!("its name does not start with {dist}-{version}-"),
            )
        })?;
    let wheel_name = format!("{dist}-{new_version}-{tags}.whl");
    if output.is_dir() {
        Ok(output.join(&wheel_name))
    } else if output.file_name().and_then(|n| n.to_str()) == Some(wheel_name.as_str()) {
        Ok(output.to_path_buf())
    } else {
        Err(wheel_error(
            output,
            format!(
                "the pruned wheel must be called {wheel_name} (installers check the name \
                 against its version); name a folder to get it"
            ),
        ))
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

fn check_wheel(path: &Path, written: &[(String, Option<[u8; 32]>, u64)]) -> Result<(), String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut zip = zip::ZipArchive::new(f).map_err(|e| format!("does not read back: {e}"))?;
    if zip.len() != written.len() {
        return Err(format!(
            "reads back {} members, not {}",
            zip.len(),
            written.len()
        ));
    }
    for (i, (name, digest, size)) in written.iter().enumerate() {
        let mut m = zip.by_index(i).map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        m.read_to_end(&mut got).map_err(|e| e.to_string())?;
        let same = m.name() == name
            && got.len() as u64 == *size
            && digest.is_none_or(|d| sha256(&got) == d);
        if !same {
            return Err(format!("{name} does not read back as written"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_hashes_are_urlsafe_base64_without_padding() {
        // sha256 of "" as pip writes it in RECORD.
        assert_eq!(
            record_line("a,b", &sha256(b""), 0),
            "\"a,b\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"
        );
        assert_eq!(base64_url(b"\xfb\xff"), "-_8");
    }

    #[test]
    fn the_version_gets_a_local_label() {
        let m = b"Metadata-Version: 2.1\nName: x\nVersion: 2.11.0+cu130\nSummary: s\n";
        let out = set_version(m, "2.11.0+cu130", "2.11.0+cu130.sm90").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Metadata-Version: 2.1\nName: x\nVersion: 2.11.0+cu130.sm90\nSummary: s\n"
        );
        assert_eq!(
            label(&Selection::For(vec![80, 90])).as_deref(),
            Some("sm80.sm90")
        );
        assert_eq!(label(&Selection::Dead), None);
    }
}
