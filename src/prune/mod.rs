//! `fatpack prune --keep LIST IN -o OUT`: drop every other arch without relinking.
//!
//! - A packed output: its store is rewritten with only the kept entries, in place of the old
//!   one, and the digest the binary records is updated.
//! - An nvcc object or archive: each `.nv_fatbin`/`__nv_relfatbin` container is rewritten
//!   with only the kept entries (the sections shrink; relocations into them are remapped).
//! - A linked shared library or executable: the kept containers are packed together, the
//!   pointers to them redirected, and the freed bytes cut out of the file (every loaded
//!   address stays: `cut`). Where a layout cannot be cut safely, each container is
//!   rewritten in place at its own address and the bytes it no longer needs are zeroed (and
//!   punched out of the file where the filesystem allows: holes take no disk space).
//!
//! The output is written to a temp file beside it and renamed; the input is never touched.

mod error;
mod kept;
mod linked;
mod packed;
mod relocate;
pub mod report;
mod solid;

pub use crate::selection::{
    describe, keep_in_container, parse_capabilities, parse_keep, Chosen, ForTargets, Kept,
    Selection, SelectionError,
};

use error::io_at;
pub use error::PruneError;
pub use relocate::Relocate;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::arch::EntryId;
use crate::commit::Outputs;
use crate::elf::sections::{relocatable, replace_sections, Replacement};
use crate::fatbin::{self, EntryKind, Fatbin};
use crate::inputs::{self, FileKind};
use crate::rewrite::archive;
use crate::transform::cut::Refused;

/// What a prune did, for the report.
#[derive(Debug, Default)]
pub struct PruneReport {
    pub entries_before: usize,
    pub entries_after: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// With `--for`: per capability, the entries chosen.
    pub chosen: Chosen,
    /// With `--keep`: targets named that the file does not have.
    pub absent: Vec<String>,
    /// A linked ELF pruned in place, and why its freed bytes could not be cut out of the
    /// file: its size is unchanged (they are zeroed and punched out as holes, which copies
    /// and archives do not keep).
    pub in_place: Option<String>,
    /// Device sections of the program's own data that a cut file keeps where they are
    /// (the section and why), pruned in place.
    pub stay: Vec<(String, String)>,
    /// The bytes of dropped device code that stay in the file as zeros (pruned in place).
    pub stays: u64,
    /// A file alone with no device code, copied as it is (as a folder prune copies one).
    pub no_device_code: bool,
    /// A folder or wheel: each file pruned in it, with its own report.
    pub files: Vec<PackageFile>,
    /// The GPUs that still get, from every module, the entry the whole build gave them.
    pub runs: fatpack_format::select::Runs,
    /// A package: what was written ([`Written`]).
    pub package: Option<Written>,
}

/// An entry as selection sees it (kinds other than SASS and PTX are never chosen).
fn candidate(e: &fatbin::Entry) -> EntryId {
    EntryId::new(e.kind(), e.header.arch_number, e.header.variant())
}

/// Prune one container; returns its new bytes. The selection sees the SASS and PTX
/// entries; entries of any other kind are kept as they are, undecoded: fatpack cannot tell
/// what needs them ([`keep_in_container`]).
fn prune_container(
    module: &str,
    fb: &Fatbin,
    sel: &Selection,
    registered: bool,
    report: &mut PruneReport,
) -> Result<Vec<u8>, PruneError> {
    let entries: Vec<(Option<EntryId>, u64)> = fb
        .entries
        .iter()
        .map(|e| {
            let id = (!matches!(e.kind(), EntryKind::Other(_))).then(|| candidate(e));
            (id, e.encoded_len() as u64)
        })
        .collect();
    let Kept { keep, cands, flags } =
        keep_in_container(module, &entries, sel, registered, &mut report.chosen)?;
    report.runs.note(&cands, &flags);
    // Every kept SASS or PTX entry selection chose must decode (nvcc's compressed payloads
    // included): prune never passes on bytes that `inspect` or the driver would reject. A
    // container kept whole for the program's own JIT is passed on as it is.
    let chosen_by_selection = |i: usize| !cands.is_empty() && entries[i].0.is_some() && keep[i];
    for i in (0..entries.len()).filter(|&i| chosen_by_selection(i)) {
        let e = &fb.entries[i];
        e.payload().map_err(|err| PruneError::BadEntry {
            origin: module.to_owned(),
            arch: e.arch_name(),
            message: err.to_string(),
        })?;
    }
    let mut out = fb.clone();
    let mut it = keep.iter();
    out.retain(|_| *it.next().expect("one flag per entry"));
    report.entries_before += fb.entries.len();
    report.entries_after += out.entries.len();
    report.bytes_before += fb.encoded_len() as u64;
    report.bytes_after += out.encoded_len() as u64;
    Ok(out.to_bytes())
}

/// An ELF relocatable with its device sections pruned.
fn prune_object(
    origin: &str,
    data: &[u8],
    sel: &Selection,
    report: &mut PruneReport,
) -> Result<Vec<u8>, PruneError> {
    let scanned = inputs::scan_bytes(Path::new(origin), data)?;
    let mut reps = Vec::new();
    for sec in scanned.sections.iter().filter(|s| !s.embedded) {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        for (index, (fb, &(old, _))) in sec.containers.iter().zip(&sec.spans).enumerate() {
            // Containers stay 8-byte aligned, as the linker and cudart expect.
            bytes.resize(bytes.len().div_ceil(8) * 8, 0);
            offsets.push((old, bytes.len() as u64));
            bytes.extend(prune_container(
                &format!("{}#{index}", sec.origin),
                fb,
                sel,
                true,
                report,
            )?);
        }
        reps.push(Replacement {
            index: sec.section_index,
            data: bytes,
            offsets,
            old_size: sec.section_size,
        });
    }
    let layout = scanned.sections.iter().find_map(|s| s.elf.as_deref());
    let edited = match (reps.is_empty(), layout) {
        (true, _) => Ok(data.to_vec()),
        (false, Some(layout)) => replace_sections(data, layout, &reps),
        (false, None) => relocatable(data).and_then(|l| replace_sections(data, &l, &reps)),
    };
    let mut edited = edited.map_err(|source| PruneError::Edit {
        origin: origin.to_string(),
        source,
    })?;
    // Fatbins in the object's own data (static cuFFT's `.ldata`) are pruned where they are:
    // its code and relocations point into that data.
    let embedded: Vec<_> = scanned.sections.iter().filter(|s| s.embedded).collect();
    if !embedded.is_empty() {
        let moved = crate::elf::Layout::parse(&edited).map_err(|e| PruneError::Package {
            path: Path::new(origin).to_path_buf(),
            message: format!("the pruned object does not read back: {e}"),
        })?;
        for sec in embedded {
            let new_off = moved.sections[sec.section_index]
                .sh_offset
                .get(crate::elf::LE);
            let at = |o: u64| o - sec.file_offset + new_off;
            let mut prune = linked::pruner(sel, report, &|_, _| {});
            crate::transform::in_place::rewrite_containers(
                Path::new(origin),
                data,
                &mut edited,
                [sec].into_iter(),
                &at,
                &mut prune,
                &|_, _| {},
            )?;
        }
    }
    Ok(edited)
}

/// [`present_in`] of a file scanned without its containers parsed: each container's entry
/// headers read where they are (no payload copied), its pages then let go of.
fn present_at(
    data: &[u8],
    scanned: &inputs::Scanned,
    release: &dyn Fn(u64, u64),
) -> Result<BTreeSet<EntryId>, PruneError> {
    let mut present = BTreeSet::new();
    for sec in &scanned.sections {
        for &(off, len) in &sec.spans {
            let at = sec.file_offset + off;
            let bytes = crate::elf::file_range(data, at, len).unwrap_or_default();
            let entries = fatbin::entry_headers(bytes, off as usize).map_err(|source| {
                PruneError::Fatbin {
                    path: sec.file.clone(),
                    source,
                }
            })?;
            present.extend(entries.iter().filter_map(|e| e.target()));
            release(at, len);
        }
    }
    Ok(present)
}

fn present_in(scanned: &inputs::Scanned) -> BTreeSet<EntryId> {
    scanned
        .sections
        .iter()
        .flat_map(|s| &s.containers)
        .flat_map(|f| &f.entries)
        .filter_map(|e| e.target())
        .collect()
}

/// One file a package prune rewrote.
#[derive(Debug)]
pub struct PackageFile {
    /// Its path inside the package.
    pub path: String,
    pub size_before: u64,
    pub size_after: u64,
    pub report: PruneReport,
}

/// What a package prune wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The new package (a wheel's name carries its label or version).
    pub path: PathBuf,
    /// A wheel: its version (with a local label, the capabilities are in it).
    pub version: Option<String>,
    /// A variant wheel: its label.
    pub label: Option<String>,
    /// A wheel: the GPUs it claims (each gets from it exactly what the whole build gave it).
    pub claims: Vec<u32>,
    /// A local-label wheel written beside a fat wheel of the same version (named here),
    /// which pip and uv then pass over for it on every machine.
    pub beside_fat: Option<String>,
}

/// Prune the file `input` (an ELF file, an archive, a fatbin or a packed output; a package
/// is [`crate::package::prune`]'s) into `output`, keeping only what `sel` selects;
/// `relocate`: `--replace-path`'s edits.
pub(crate) fn prune_file(
    input: &Path,
    output: &Path,
    sel: &Selection,
    relocate: &Relocate,
    outs: Outputs,
) -> Result<PruneReport, PruneError> {
    let bytes = InputBytes::read(input, relocate)?;
    let map = bytes.data();
    let mut tmp = outs.file(output)?;
    let release = |off, len| bytes.release(off, len);
    let (report, side) = match prune_data(input, map, &release, sel, tmp.named(), output, &outs) {
        // Nothing to prune: the file is copied as it is, as a folder prune copies it.
        Err(PruneError::NoDeviceCode(_)) => {
            let mut tmp2 = outs.file(output)?;
            std::io::Write::write_all(tmp2.named().as_file_mut(), map).map_err(io_at(output))?;
            tmp = tmp2;
            let report = PruneReport {
                no_device_code: true,
                ..PruneReport::default()
            };
            (report, None)
        }
        other => other?,
    };
    outs.commit_binary(tmp, input, side)?;
    Ok(report)
}

/// The bytes of a file prune reads: mapped, and read only where prune looks (headers,
/// device code, the host sections it checks), each page let go of once read, so that a
/// file's gigabytes of debug info or data pass through the output without being held; or,
/// where `--replace-path` edits every byte, read into memory and edited.
pub(crate) enum InputBytes {
    Mapped(memmap2::Mmap),
    Edited(Vec<u8>),
}

impl InputBytes {
    pub(crate) fn read(path: &Path, relocate: &Relocate) -> Result<Self, PruneError> {
        Ok(match relocate.is_empty() {
            true => InputBytes::Mapped(inputs::map_file(path)?),
            false => {
                let mut bytes = inputs::read_file(path)?;
                relocate.apply(&mut bytes);
                InputBytes::Edited(bytes)
            }
        })
    }

    pub(crate) fn data(&self) -> &[u8] {
        match self {
            InputBytes::Mapped(m) => m,
            InputBytes::Edited(v) => v,
        }
    }

    /// Done with `len` bytes at `off` ([`inputs::let_go`]).
    pub(crate) fn release(&self, off: u64, len: u64) {
        if let InputBytes::Mapped(m) = self {
            inputs::let_go(m, off, len);
        }
    }
}

/// Prunes one file (`input`, whose bytes are `data`) into `tmp`; a packed side-file
/// output's new store goes beside `output`, and is returned to be committed after it.
pub(crate) fn prune_data(
    input: &Path,
    data: &[u8],
    release: &dyn Fn(u64, u64),
    sel: &Selection,
    tmp: &mut tempfile::NamedTempFile,
    output: &Path,
    outs: &Outputs,
) -> Result<(PruneReport, Option<crate::commit::Staged>), PruneError> {
    let (kind, layout) = inputs::classify(data);
    if let Some(why) = layout.and_then(|l| l.bad_segment(data.len() as u64)) {
        return Err(PruneError::Input(inputs::InputError::Malformed {
            origin: input.display().to_string(),
            message: format!("a damaged ELF file: {why}"),
        }));
    }
    let mut report = PruneReport::default();
    let shown = input.display().to_string();
    let mut side = None;
    match kind {
        FileKind::Object | FileKind::SharedLibrary | FileKind::Executable
            if crate::packed::slot_range(data).is_some() =>
        {
            side = packed::prune_packed(input, data, sel, tmp.path(), output, outs, &mut report)?;
        }
        FileKind::Object => {
            let scanned = inputs::scan_bytes(input, data)?;
            report.absent = sel.check_present(input, &present_in(&scanned))?;
            let bytes = prune_object(&shown, data, sel, &mut report)?;
            std::io::Write::write_all(tmp.as_file_mut(), &bytes).map_err(io_at(output))?;
        }
        FileKind::Archive | FileKind::ThinArchive => {
            let scanned = inputs::scan_bytes(input, data)?;
            report.absent = sel.check_present(input, &present_in(&scanned))?;
            let mut members = Vec::new();
            for m in inputs::archive::members(input, &shown, data, &inputs::Maps::default())? {
                let (name, origin, bytes) = (m.name, m.origin, m.bytes);
                let pruned = if inputs::sniff(&bytes) == FileKind::Object {
                    prune_object(&origin, &bytes, sel, &mut report)?
                } else {
                    bytes.to_vec()
                };
                members.push(archive::Member {
                    name,
                    data: std::borrow::Cow::Owned(pruned),
                    pieces: None,
                });
            }
            let bytes = archive::write_archive(&members).map_err(io_at(input))?;
            std::io::Write::write_all(tmp.as_file_mut(), &bytes).map_err(io_at(output))?;
        }
        FileKind::SharedLibrary | FileKind::Executable => {
            // Located, not parsed: each container is parsed when it is pruned, and the
            // input's pages let go of as they are read (see `linked::pruner`).
            let scanned = inputs::scan_at(input, data, inputs::Depth::Located)?;
            report.absent = sel.check_present(input, &present_at(data, &scanned, release)?)?;
            let layout = scanned.sections.iter().find_map(|s| s.elf.clone());
            let linked = linked::Input {
                path: input,
                data,
                release,
            };
            let cut = match layout.as_deref() {
                Some(layout) => {
                    linked::prune_cut(&linked, layout, &scanned, sel, tmp, &mut report)?
                }
                None => Err(Refused("it has no device sections".into())),
            };
            if let Err(Refused(why)) = cut {
                linked::prune_linked(&linked, &scanned, sel, tmp, &mut report)?;
                report.in_place = Some(why);
            }
        }
        FileKind::Fatbin => {
            let fbs = fatbin::parse_all(data).map_err(|source| PruneError::Fatbin {
                path: input.to_path_buf(),
                source,
            })?;
            let present = fbs
                .iter()
                .flat_map(|f| &f.entries)
                .filter_map(|e| e.target())
                .collect();
            report.absent = sel.check_present(input, &present)?;
            let mut bytes = Vec::new();
            for (index, fb) in fbs.iter().enumerate() {
                bytes.extend(prune_container(
                    &format!("{shown}#{index}"),
                    fb,
                    sel,
                    true,
                    &mut report,
                )?);
            }
            std::io::Write::write_all(tmp.as_file_mut(), &bytes).map_err(io_at(output))?;
        }
        FileKind::Other => {
            return Err(PruneError::Input(inputs::InputError::Unrecognized {
                path: input.to_path_buf(),
                what: inputs::why_other(data),
            }))
        }
        other => {
            return Err(PruneError::Unsupported {
                path: input.to_path_buf(),
                kind: other.name(),
            })
        }
    }
    if report.entries_after == 0 {
        return Err(match report.entries_before {
            0 => PruneError::NoDeviceCode(input.to_path_buf()),
            _ => PruneError::NothingLeft(input.to_path_buf()),
        });
    }
    Ok((report, side))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;

    /// NVVM IR (cuFFT's kind 8, obfuscated: it does not decode) is kept whatever the
    /// selection, and is not decoded; the SASS and PTX are selected as the runtime would.
    #[test]
    fn entries_of_other_kinds_are_kept_undecoded() {
        let mut nvvm = fatbin::Entry::new_uncompressed(
            EntryKind::Other(fatpack_format::fatbin::KIND_NVVM),
            Arch::new(75),
            0x10001,
            b"not decodable",
        );
        // Claims LZ4 over bytes that are not: what an obfuscated entry looks like here.
        nvvm.header.flags |= fatbin::flags::COMPRESSED_LZ4;
        nvvm.header.compressed_len = 13;
        nvvm.header.uncompressed_len = 100;
        assert!(nvvm.payload().is_err());
        let fb = Fatbin {
            version: 1,
            entries: vec![
                fatbin::Entry::new_uncompressed(EntryKind::Sass, Arch::new(80), 0x10008, &[1; 64]),
                fatbin::Entry::new_uncompressed(
                    EntryKind::Ptx,
                    Arch::new(80),
                    0x80008,
                    b".version 8.8",
                ),
                nvvm,
            ],
        };
        let mut report = PruneReport::default();
        let out =
            prune_container("m", &fb, &Selection::for_gpus(&[90]), true, &mut report).unwrap();
        let (back, _) = fatbin::parse_one(&out, 0).unwrap();
        let kinds: Vec<EntryKind> = back.entries.iter().map(|e| e.kind()).collect();
        assert_eq!(kinds, [EntryKind::Ptx, EntryKind::Other(8)]);
        assert_eq!(back.entries[1], fb.entries[2]);
    }
}
