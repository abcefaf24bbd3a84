//! The direct route of a packed link (`--fatpack-route=direct`): nothing is copied before
//! the link. The real linker links the inputs as given, with the tail script placing
//! `.nv_fatbin` and `__nv_relfatbin` last in the image; then every container in the output
//! is replaced by the stub of the input module it is, the stubs packed where the device
//! code began and the file cut short there (prune's cut, made in the file itself:
//! [`crate::prune::cut::InPlace`]).
//!
//! Which module a container of the output is: the one with the same bytes, of the
//! containers the scan found in the inputs (the linker copies a section's bytes as they
//! are). Several inputs may hold the same bytes (static cuBLAS: hundreds of archive members),
//! and the linker may pull them in another order than the archive's: of those, the one whose
//! object names the same source file (its first `STT_FILE` symbol; nvcc's are unique per
//! compile) as the output's symbol table does before the container's local symbol
//! (`fatbinData`, which the linker emits after the `STT_FILE` of the object it came from);
//! where that does not tell (a stripped output, no such symbols), the first in the scan's
//! order not yet taken. Every pairing is checked byte for byte before the output is touched;
//! anything in the output that no input holds, or a layout the cut refuses, sends the link
//! down the copy route instead.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::Path;

use fatpack_format::stub::{self, FLAG_RELOCATABLE};

use super::inputs::{origin_of, Names, Planned};
use super::LinkError;
use crate::elf::{file_range, records, Sym, LE};
use crate::inputs::{self, DeviceSection, FileKind, DEVICE_SECTIONS, RELFATBIN_SECTION};
use crate::prune::cut::{CutDone, InPlace, Refused};
use crate::prune::PruneError;
use crate::rewrite::Extracted;

/// The source file a module's object names first (its first `STT_FILE` symbol), if any.
pub(super) type Source = Option<Vec<u8>>;

/// Every container of the planned inputs under its module name: the names and the order
/// the copy route gives them (inputs in order, an archive's members in order, each
/// member's containers in order); and for each, the source file its object names first
/// ([`first_source`]).
pub(super) fn modules(
    planned: &[Planned],
    maps: &inputs::Maps,
) -> Result<(Vec<Extracted>, Vec<Source>), LinkError> {
    let mut names = Names::default();
    let (mut out, mut sources) = (Vec::new(), Vec::new());
    for p in planned {
        let shown = p.path.display().to_string();
        let short = origin_of(&p.path);
        for d in &p.sections {
            // A member's origin is `archive(member)`, the archive as the store records it.
            let origin = match p.kind {
                FileKind::Object => short.clone(),
                _ => match d.origin.strip_prefix(&shown) {
                    Some(member) => format!("{short}{member}"),
                    None => d.origin.clone(),
                },
            };
            let source = match &d.elf {
                Some(layout) => {
                    let map = maps.get(&d.file)?;
                    first_source(&map, d, layout)
                }
                None => None,
            };
            for (i, &(off, len)) in d.spans.iter().enumerate() {
                sources.push(source.clone());
                out.push(Extracted {
                    module: names.name(&origin, i),
                    origin: origin.clone(),
                    section: d.section.clone(),
                    file: d.file.clone(),
                    file_offset: d.file_offset + off,
                    len,
                });
            }
        }
    }
    Ok((out, sources))
}

/// How many of an object's first symbols are looked at for its `STT_FILE` symbol (the
/// compiler writes it first, after the null symbol).
const FILE_SYMBOL_WITHIN: u64 = 4;

/// The name of the first `STT_FILE` symbol of the ELF file (whose headers are `layout`)
/// that holds `d`, in `data` (the bytes of the file `d.file`); None where it has none.
fn first_source(data: &[u8], d: &DeviceSection, layout: &crate::elf::Layout) -> Option<Vec<u8>> {
    let own = layout.sections.get(d.section_index)?;
    let base = d.file_offset.checked_sub(own.sh_offset.get(LE))?;
    let symtab = layout
        .sections
        .iter()
        .find(|s| s.sh_type.get(LE) == object::elf::SHT_SYMTAB)?;
    let strtab = layout.sections.get(symtab.sh_link.get(LE) as usize)?;
    let len = symtab
        .sh_size
        .get(LE)
        .min(FILE_SYMBOL_WITHIN * std::mem::size_of::<Sym>() as u64);
    let syms = file_range(data, base + symtab.sh_offset.get(LE), len)?;
    let file = records::<Sym>(syms)
        .iter()
        .find(|s| s.st_info & 0xf == object::elf::STT_FILE)?;
    let strings = file_range(
        data,
        base + strtab.sh_offset.get(LE),
        strtab.sh_size.get(LE),
    )?;
    c_string(strings, file.st_name.get(LE) as usize)
}

/// The NUL-terminated string at `at` of `strings`.
fn c_string(strings: &[u8], at: usize) -> Option<Vec<u8>> {
    let rest = strings.get(at..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    (end > 0).then(|| rest[..end].to_vec())
}

/// In the linked file `data`: the file offset of every local symbol in a device section,
/// with the name of the `STT_FILE` symbol before it in the symbol table (the object it came
/// from).
fn output_sources(data: &[u8]) -> HashMap<u64, Vec<u8>> {
    let mut out = HashMap::new();
    let Ok(layout) = crate::elf::Layout::parse(data) else {
        return out;
    };
    let device: Vec<usize> = DEVICE_SECTIONS
        .iter()
        .filter_map(|n| layout.section_by_name(n).map(|(i, _)| i))
        .collect();
    let Some(symtab) = layout
        .sections
        .iter()
        .find(|s| s.sh_type.get(LE) == object::elf::SHT_SYMTAB)
    else {
        return out;
    };
    let (Some(syms), Some(strings)) = (
        file_range(data, symtab.sh_offset.get(LE), symtab.sh_size.get(LE)),
        layout
            .sections
            .get(symtab.sh_link.get(LE) as usize)
            .and_then(|t| file_range(data, t.sh_offset.get(LE), t.sh_size.get(LE))),
    ) else {
        return out;
    };
    let mut file: Option<Vec<u8>> = None;
    for sym in records::<Sym>(syms) {
        if sym.st_info & 0xf == object::elf::STT_FILE {
            file = c_string(strings, sym.st_name.get(LE) as usize);
        } else if sym.st_info >> 4 == object::elf::STB_LOCAL {
            let index = usize::from(sym.st_shndx.get(LE));
            let (Some(f), true) = (&file, device.contains(&index)) else {
                continue;
            };
            let sec = &layout.sections[index];
            let at = sym.st_value.get(LE).wrapping_sub(sec.sh_addr.get(LE)) + sec.sh_offset.get(LE);
            out.entry(at).or_insert_with(|| f.clone());
        }
    }
    out
}

/// How many leading bytes of a container key its lookup (the whole is compared after).
const KEY_BYTES: usize = 4096;

fn key(bytes: &[u8]) -> (u64, u64) {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes[..bytes.len().min(KEY_BYTES)].hash(&mut h);
    (bytes.len() as u64, h.finish())
}

/// The bytes of module `m` in its input.
fn input_bytes<'a>(m: &Extracted, map: &'a memmap2::Mmap) -> Result<&'a [u8], LinkError> {
    crate::elf::file_range(map, m.file_offset, m.len).ok_or_else(|| {
        LinkError::Input(inputs::InputError::Malformed {
            origin: m.origin.clone(),
            message: format!("module {} lies outside the file", m.module),
        })
    })
}

/// Why the direct route's output was not stubbed; either way the copy route links again.
#[derive(Debug)]
pub(super) enum NotStubbed {
    /// The output cannot be cut (a container no input holds, a layout the cut refuses):
    /// nothing was written.
    Refused(String),
    /// The cut was made but its result failed its check (a fatpack bug): the temp output is
    /// thrown away.
    Failed(String),
}

/// Replaces each container of the linked file `out` by the stub of the module in `modules`
/// it is, and cuts the file short. `Ok(Err(_))`: it did not ([`NotStubbed`]).
pub(super) fn stub_output(
    out: &Path,
    modules: &[Extracted],
    sources: &[Source],
    maps: &inputs::Maps,
) -> Result<Result<CutDone, NotStubbed>, LinkError> {
    // Each module's key, from the first bytes of its container in the input.
    let mut by_key: HashMap<(u64, u64), VecDeque<usize>> = HashMap::new();
    for (i, m) in modules.iter().enumerate() {
        let map = maps.get(&m.file)?;
        let bytes = input_bytes(m, &map)?;
        by_key.entry(key(bytes)).or_default().push_back(i);
    }
    // Where inputs hold the same bytes: which source file each of the output's containers
    // came from, by its file offset.
    let placed = match by_key.values().any(|q| q.len() > 1) {
        true => output_sources(&inputs::map_file(out)?),
        false => HashMap::new(),
    };
    // (file offset in the output, module) of every container, as the cut meets them.
    let mut pairs: Vec<(u64, usize)> = Vec::new();
    let mut stubs = |d: &DeviceSection, index: usize, bytes: &[u8]| {
        let at = d.file_offset + d.spans[index].0;
        let from = placed.get(&at);
        let Some(m) = by_key.get_mut(&key(bytes)).and_then(|q| {
            let same_source = from.and_then(|f| {
                q.iter()
                    .position(|&m| sources.get(m).is_some_and(|s| s.as_ref() == Some(f)))
            });
            q.remove(same_source.unwrap_or(0))
        }) else {
            return Err(PruneError::Cut {
                path: out.to_path_buf(),
                message: format!(
                    "the container at offset {at:#x} ({} bytes) is in none of the inputs read",
                    bytes.len()
                ),
            });
        };
        pairs.push((at, m));
        let flags = match d.section == RELFATBIN_SECTION {
            true => FLAG_RELOCATABLE,
            false => 0,
        };
        let mut stub = Vec::new();
        stub::encode_into(&modules[m].module, flags, &mut stub);
        Ok(stub)
    };
    let plan = match InPlace::plan(out, &mut stubs) {
        Ok(Ok(plan)) => plan,
        Ok(Err(Refused(why))) => return Ok(Err(NotStubbed::Refused(why))),
        Err(PruneError::Cut { message, .. }) => return Ok(Err(NotStubbed::Refused(message))),
        Err(e) => return Err(LinkError::Cut(e)),
    };
    let data = plan.data();
    let same = crate::parallel::map_ordered(&pairs, |&(at, m)| {
        let module = &modules[m];
        let map = maps.get(&module.file)?;
        let theirs = input_bytes(module, &map)?;
        let ours = crate::elf::file_range(data, at, module.len);
        let same = ours == Some(theirs);
        maps.release(&module.file, module.file_offset, module.len);
        Ok::<_, LinkError>(same)
    });
    for (same, &(at, m)) in same.into_iter().zip(&pairs) {
        if !same? {
            return Ok(Err(NotStubbed::Refused(format!(
                "the container at offset {at:#x} differs from {}, whose first bytes it shares",
                modules[m].module
            ))));
        }
    }
    // The cut output holds a stub of each module taken, and nothing else.
    let mut want: Vec<&str> = pairs
        .iter()
        .map(|&(_, m)| modules[m].module.as_str())
        .collect();
    want.sort_unstable();
    let check = |data: &[u8]| {
        let mut got = crate::packed::stub_modules(out, data).map_err(|e| e.to_string())?;
        got.sort_unstable();
        match got == want {
            true => Ok(()),
            false => Err(format!(
                "the cut file holds {} stubs, not the {} it should",
                got.len(),
                want.len()
            )),
        }
    };
    match plan.apply(&check) {
        Ok(done) => Ok(Ok(done)),
        Err(e @ PruneError::Cut { .. }) => Ok(Err(NotStubbed::Failed(e.to_string()))),
        Err(e) => Err(LinkError::Cut(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output the direct route cannot stub (a container no input holds; a layout whose
    /// device code is not last) is left as it was: the copy route links again.
    #[test]
    fn an_output_it_cannot_stub_is_left_untouched() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvcc13/fixture_exe");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::copy(&fixture, &out).unwrap();
        let before = std::fs::read(&out).unwrap();
        let maps = inputs::Maps::default();
        let refused = |r: Result<CutDone, NotStubbed>| match r {
            Err(NotStubbed::Refused(why)) => why,
            other => panic!("{other:?}"),
        };
        let why = refused(stub_output(&out, &[], &[], &maps).unwrap());
        assert!(why.contains("is in none of the inputs read"), "{why}");
        // Its own containers as the modules: they match, but the device code is not last.
        let scanned = inputs::scan_at(&fixture, &before, inputs::Depth::Registered).unwrap();
        let mut modules = Vec::new();
        for d in &scanned.sections {
            for (i, &(off, len)) in d.spans.iter().enumerate() {
                modules.push(Extracted {
                    module: format!("m#{i}"),
                    origin: "m".into(),
                    section: d.section.clone(),
                    file: fixture.clone(),
                    file_offset: d.file_offset + off,
                    len,
                });
            }
        }
        assert!(!modules.is_empty());
        let sources = vec![None; modules.len()];
        let why = refused(stub_output(&out, &modules, &sources, &maps).unwrap());
        assert!(why.contains("not the last thing"), "{why}");
        assert!(std::fs::read(&out).unwrap() == before, "the output changed");
    }
}
