//! The direct route of a packed link (`--fatpack-route=direct`): nothing is copied before
//! the link. The real linker links the inputs as given, with the tail script placing
//! `.nv_fatbin` and `__nv_relfatbin` last in the image; then every container in the output
//! is replaced by the stub of the input module it is, the stubs packed where the device
//! code began and the file cut short there (prune's cut, made in the file itself:
//! [`crate::transform::cut::CutInFile`]).
//!
//! Which module a container of the output is: the one with the same bytes, of the
//! containers the scan found in the inputs (the linker copies a section's bytes as they
//! are). Several inputs may hold the same bytes (static cuBLAS: hundreds of archive members),
//! and the linker may pull them in another order than the archive's. Of those, the one whose
//! object names the same source file (its first `STT_FILE` symbol; nvcc's are unique per
//! compile) as the output's symbol table does before the container's local symbol
//! (`fatbinData`, which the linker emits after the `STT_FILE` of the object it came from).
//! Objects stripped of local symbols (NVIDIA's static libraries) name no source file: there
//! the linker's order tells, since it places every object's sections in the order it loaded
//! the objects. Each object's first strong global function (its *anchor*, whose name no other
//! object can define) lies in the output's `.text` in that order, so the containers of the
//! same bytes are taken by their objects' anchor addresses. Where neither tells (a stripped
//! output, an object without an anchor), the first in the scan's order not yet taken. Every pairing is checked byte for byte before the output is touched;
//! anything in the output that no input holds, or a layout the cut refuses, sends the link
//! down the copy route instead.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::Path;

use fatpack_format::stub::{self, FLAG_RELOCATABLE};

use super::account::Parts;
use super::plan::{origin_of, Names, Planned};
use super::LinkError;
use crate::elf::{c_str, file_range, Sym, LE};
use crate::inputs::{self, DeviceSection, FileKind, DEVICE_SECTIONS, RELFATBIN_SECTION};
use crate::rewrite::Extracted;
use crate::transform::cut::{CutDone, CutInFile, Refused};
use crate::transform::TransformError;

/// What tells a module's object from others holding the same bytes, in the output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Source {
    /// The source file the object names first (its first `STT_FILE` symbol).
    file: Option<Vec<u8>>,
    /// The object's first strong global function in a plain `.text` section ([`anchor`]).
    anchor: Option<Vec<u8>>,
}

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
                    Source {
                        file: first_source(&map, d, layout),
                        anchor: anchor(&map, d, layout),
                    }
                }
                None => Source::default(),
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
const FILE_SYMBOL_WITHIN: usize = 4;

/// The name of the first `STT_FILE` symbol of the ELF file (whose headers are `layout`)
/// that holds `d`, in `data` (the bytes of the file `d.file`); None where it has none.
fn first_source(data: &[u8], d: &DeviceSection, layout: &crate::elf::Layout) -> Option<Vec<u8>> {
    let (syms, strings, _) = symbols(data, d, layout)?;
    let file = syms
        .iter()
        .take(FILE_SYMBOL_WITHIN)
        .find(|s| s.st_info & 0xf == object::elf::STT_FILE)?;
    c_string(strings, file.st_name.get(LE) as usize)
}

/// The symbol table and its strings of the ELF file (whose headers are `layout`) that holds
/// `d`, in `data` (the bytes of the file `d.file`), and the index of its first global.
fn symbols<'a>(
    data: &'a [u8],
    d: &DeviceSection,
    layout: &crate::elf::Layout,
) -> Option<(&'a [Sym], &'a [u8], usize)> {
    let t = layout.symbol_table(data, base_of(d, layout)?)?;
    Some((t.symbols, t.strings, t.first_global))
}

/// Where the ELF file (whose headers are `layout`) holding `d` starts in the file `d.file`.
fn base_of(d: &DeviceSection, layout: &crate::elf::Layout) -> Option<u64> {
    let own = layout.sections.get(d.section_index)?;
    d.file_offset.checked_sub(own.sh_offset.get(LE))
}

/// Sections whose name starts so are gathered apart in the output's `.text` (ld's default
/// script puts them first), out of the order of the objects.
const TEXT_GATHERED: [&[u8]; 5] = [
    b".text.unlikely",
    b".text.exit",
    b".text.startup",
    b".text.hot",
    b".text.sorted",
];

/// The first strong global function of the object (whose headers are `layout`) holding `d`,
/// defined in a section the output's `.text` takes in the order of the objects: `.text` or
/// `.text.*`, not gathered apart ([`TEXT_GATHERED`]), not in a group (a COMDAT copy may be
/// another object's). Strong globals are unique in a link, so the name finds the object's
/// place in the output.
fn anchor(data: &[u8], d: &DeviceSection, layout: &crate::elf::Layout) -> Option<Vec<u8>> {
    let (syms, strings, first_global) = symbols(data, d, layout)?;
    // The scan keeps no section names (`Depth::Spans`): read them where they are.
    let table = layout.sections.get(layout.names_index())?;
    let names = file_range(
        data,
        base_of(d, layout)? + table.sh_offset.get(LE),
        table.sh_size.get(LE),
    )?;
    let sym = syms.get(first_global..)?.iter().find(|s| {
        let index = usize::from(s.st_shndx.get(LE));
        s.st_info >> 4 == object::elf::STB_GLOBAL
            && s.st_info & 0xf == object::elf::STT_FUNC
            && index != 0
            && index < usize::from(object::elf::SHN_LORESERVE)
            && layout.sections.get(index).is_some_and(|sec| {
                let name = c_str(names, sec.sh_name.get(LE) as usize).unwrap_or_default();
                sec.sh_flags.get(LE) & u64::from(object::elf::SHF_GROUP) == 0
                    && (name == b".text" || name.starts_with(b".text."))
                    && !TEXT_GATHERED.iter().any(|g| name.starts_with(g))
            })
    })?;
    c_string(strings, sym.st_name.get(LE) as usize)
}

/// [`c_str`], owned.
fn c_string(strings: &[u8], at: usize) -> Option<Vec<u8>> {
    c_str(strings, at).map(<[u8]>::to_vec)
}

/// What the linked file's symbol table tells of where each object went.
#[derive(Default)]
struct Placed {
    /// The file offset of every local symbol in a device section, with the name of the
    /// `STT_FILE` symbol before it (the object it came from).
    files: HashMap<u64, Vec<u8>>,
    /// The address of each anchor asked for that the output defines once.
    anchors: HashMap<Vec<u8>, u64>,
}

/// Reads [`Placed`] from the linked file `data`, for the anchors `wanted`.
fn read_placed(data: &[u8], wanted: &HashSet<&[u8]>) -> Placed {
    let mut out = Placed::default();
    let Ok(layout) = crate::elf::Layout::parse(data) else {
        return out;
    };
    let device: Vec<usize> = DEVICE_SECTIONS
        .iter()
        .filter_map(|n| layout.section_by_name(n).map(|(i, _)| i))
        .collect();
    let Some(crate::elf::SymbolTable {
        symbols: syms,
        strings,
        ..
    }) = layout.symbol_table(data, 0)
    else {
        return out;
    };
    let mut file: Option<Vec<u8>> = None;
    // Anchors the output names more than once (a local of the same name elsewhere) tell
    // nothing.
    let mut twice: HashSet<Vec<u8>> = HashSet::new();
    // The lengths of the names wanted: most of a big output's functions (long C++ names,
    // hundreds of thousands in static cuBLAS) are passed by on their length, not hashed.
    let longest = wanted.iter().map(|n| n.len()).max().unwrap_or(0);
    let mut wanted_len = vec![false; longest + 1];
    for n in wanted {
        wanted_len[n.len()] = true;
    }
    for sym in syms {
        let kind = sym.st_info & 0xf;
        if kind == object::elf::STT_FILE {
            file = c_string(strings, sym.st_name.get(LE) as usize);
            continue;
        }
        let index = usize::from(sym.st_shndx.get(LE));
        if kind == object::elf::STT_FUNC && !wanted.is_empty() && index != 0 {
            if let Some(name) = c_str(strings, sym.st_name.get(LE) as usize)
                .filter(|n| wanted_len.get(n.len()).copied().unwrap_or(false) && wanted.contains(n))
            {
                if out
                    .anchors
                    .insert(name.to_vec(), sym.st_value.get(LE))
                    .is_some()
                {
                    twice.insert(name.to_vec());
                }
                continue;
            }
        }
        if sym.st_info >> 4 == object::elf::STB_LOCAL {
            let (Some(f), true) = (&file, device.contains(&index)) else {
                continue;
            };
            let sec = &layout.sections[index];
            let at = sym.st_value.get(LE).wrapping_sub(sec.sh_addr.get(LE)) + sec.sh_offset.get(LE);
            out.files.entry(at).or_insert_with(|| f.clone());
        }
    }
    out.anchors.retain(|name, _| !twice.contains(name));
    out
}

/// Puts each queue of modules holding the same first bytes in the order the linker placed
/// their objects, where the anchors of all of them tell it ([`anchor`]); others stay in the
/// scan's order.
fn order_by_anchors(
    by_key: &mut HashMap<(u64, u64), VecDeque<usize>>,
    sources: &[Source],
    anchors: &HashMap<Vec<u8>, u64>,
) {
    for q in by_key.values_mut().filter(|q| q.len() > 1) {
        let at: Option<Vec<u64>> = q
            .iter()
            .map(|&m| {
                let name = sources.get(m)?.anchor.as_ref()?;
                anchors.get(name).copied()
            })
            .collect();
        if let Some(at) = at {
            let mut sorted: Vec<(u64, usize)> = at.into_iter().zip(q.iter().copied()).collect();
            // Stable: the containers of one object keep their order.
            sorted.sort_by_key(|&(a, _)| a);
            *q = sorted.into_iter().map(|(_, m)| m).collect();
        }
    }
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

/// `pairs` cut into consecutive runs of modules of up to `max` bytes each (a larger module
/// is a run of its own).
fn runs_of<'a>(
    pairs: &'a [(u64, usize)],
    modules: &[Extracted],
    max: u64,
) -> Vec<&'a [(u64, usize)]> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, &(_, m)) in pairs.iter().enumerate() {
        let len = modules[m].len;
        if i > start && bytes + len > max {
            runs.push(&pairs[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += len;
    }
    if start < pairs.len() {
        runs.push(&pairs[start..]);
    }
    runs
}

/// Lets go of the inputs' bytes of the modules in `pairs`: per file, the modules' ranges in
/// order, those less than [`MERGE_GAP`] apart let go as one.
fn release_read(pairs: &[(u64, usize)], modules: &[Extracted], maps: &inputs::Maps) {
    let mut ranges: Vec<(&Path, u64, u64)> = pairs
        .iter()
        .map(|&(_, m)| {
            let module = &modules[m];
            let end = module.file_offset.saturating_add(module.len);
            (module.file.as_path(), module.file_offset, end)
        })
        .collect();
    ranges.sort_unstable();
    let mut i = 0;
    while i < ranges.len() {
        let (file, start, mut end) = ranges[i];
        i += 1;
        while i < ranges.len()
            && ranges[i].0 == file
            && ranges[i].1 <= end.saturating_add(MERGE_GAP)
        {
            end = end.max(ranges[i].2);
            i += 1;
        }
        maps.release(file, start, end - start);
    }
}

/// Modules of one file closer than this are let go in one call (the bytes between them,
/// archive members' headers and host code, are not read by the compare and rarely mapped).
const MERGE_GAP: u64 = 1 << 20;

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

/// The modules (indices into the direct route's modules) under the key of their
/// container's first bytes ([`key`]), each queue in the scan's order.
pub(super) struct Keys(HashMap<(u64, u64), VecDeque<usize>>);

impl Keys {
    /// Keys every module of `modules` from its bytes in the inputs: all the stub step needs
    /// of the inputs, so it is made while the real linker still runs (thousands of modules
    /// in static cuBLAS: megabytes hashed).
    pub(super) fn of(modules: &[Extracted], maps: &inputs::Maps) -> Result<Keys, LinkError> {
        let mut by_key: HashMap<(u64, u64), VecDeque<usize>> = HashMap::new();
        for (i, m) in modules.iter().enumerate() {
            let map = maps.get(&m.file)?;
            let bytes = input_bytes(m, &map)?;
            by_key.entry(key(bytes)).or_default().push_back(i);
        }
        Ok(Keys(by_key))
    }
}

/// Replaces each container of the linked file `out` by the stub of the module in `modules`
/// it is (`keys`: [`Keys::of`] the same modules), and cuts the file short. `Ok(Err(_))`: it
/// did not ([`NotStubbed`]).
pub(super) fn stub_output(
    out: &Path,
    modules: &[Extracted],
    sources: &[Source],
    keys: Keys,
    maps: &inputs::Maps,
    parts: &mut Parts,
) -> Result<Result<CutDone, NotStubbed>, LinkError> {
    let Keys(mut by_key) = keys;
    // Where inputs hold the same bytes: which source file each of the output's containers
    // came from, by its file offset, and where their objects' anchors went.
    let placed = parts.time("symbols", || {
        let mut wanted: HashSet<&[u8]> = HashSet::new();
        for q in by_key.values().filter(|q| q.len() > 1) {
            wanted.extend(q.iter().filter_map(|&m| sources.get(m)?.anchor.as_deref()));
        }
        let placed = match by_key.values().any(|q| q.len() > 1) {
            true => read_placed(&inputs::map_file(out)?, &wanted),
            false => Placed::default(),
        };
        order_by_anchors(&mut by_key, sources, &placed.anchors);
        Ok::<_, LinkError>(placed.files)
    })?;
    // (file offset in the output, module) of every container, as the cut meets them.
    let mut pairs: Vec<(u64, usize)> = Vec::new();
    let mut stubs = |d: &DeviceSection, index: usize, bytes: &[u8]| {
        let at = d.file_offset + d.spans[index].0;
        let from = placed.get(&at);
        let Some(m) = by_key.get_mut(&key(bytes)).and_then(|q| {
            let same_source = from.and_then(|f| {
                q.iter()
                    .position(|&m| sources.get(m).is_some_and(|s| s.file.as_ref() == Some(f)))
            });
            q.remove(same_source.unwrap_or(0))
        }) else {
            return Err(LinkError::ForeignContainer {
                path: out.to_path_buf(),
                at,
                len: bytes.len(),
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
    let plan = match parts.time("plan", || CutInFile::plan(out, &mut stubs)) {
        Ok(Ok(plan)) => plan,
        Ok(Err(Refused(why))) => return Ok(Err(NotStubbed::Refused(why))),
        Err(LinkError::ForeignContainer { at, len, .. }) => {
            return Ok(Err(NotStubbed::Refused(format!(
                "the container at offset {at:#x} ({len} bytes) is in none of the inputs read"
            ))))
        }
        Err(e) => return Err(e),
    };
    let data = plan.data();
    let same = parts.time("compare", || {
        // In runs of up to RELEASE_STEP bytes: after each, the inputs' pages it read leave the
        // resident set, once per file of the run rather than once per module (each release
        // is a system call that every CPU this process's threads ran on must hear of, a TLB
        // flush; static cuBLAS compares 1,207 modules on 16 threads), and never more than a
        // run per thread is held.
        let runs = runs_of(&pairs, modules, inputs::RELEASE_STEP);
        let same = crate::parallel::map_ordered(&runs, |run| {
            let same: Vec<Result<bool, LinkError>> = run
                .iter()
                .map(|&(at, m)| {
                    let module = &modules[m];
                    let map = maps.get(&module.file)?;
                    let theirs = input_bytes(module, &map)?;
                    Ok(crate::elf::file_range(data, at, module.len) == Some(theirs))
                })
                .collect();
            release_read(run, modules, maps);
            same
        });
        same.into_iter().flatten().collect::<Vec<_>>()
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
    let check = |data: &[u8], layout: &crate::elf::Layout| {
        let mut got =
            crate::packed::stub_modules_of(out, data, layout).map_err(|e| e.to_string())?;
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
    match parts.time("cut", || plan.apply(&check)) {
        Ok(done) => Ok(Ok(done)),
        Err(e @ TransformError::Unsound { .. }) => Ok(Err(NotStubbed::Failed(e.to_string()))),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compare's runs keep the pairs' order, hold at most the limit unless one module
    /// alone is larger, and leave no pair out.
    #[test]
    fn compare_runs_cover_every_pair_in_order() {
        let module = |len| Extracted {
            module: String::new(),
            origin: String::new(),
            section: String::new(),
            file: "a".into(),
            file_offset: 0,
            len,
        };
        let modules: Vec<Extracted> = [3, 4, 2, 9, 1, 1, 5].map(module).into();
        let pairs: Vec<(u64, usize)> = (0..modules.len()).map(|m| (m as u64, m)).collect();
        let runs = runs_of(&pairs, &modules, 7);
        let lens: Vec<Vec<u64>> = runs
            .iter()
            .map(|r| r.iter().map(|&(_, m)| modules[m].len).collect())
            .collect();
        assert_eq!(lens, vec![vec![3, 4], vec![2], vec![9], vec![1, 1, 5]]);
        assert_eq!(runs.concat(), pairs);
        assert!(runs_of(&[], &modules, 7).is_empty());
    }

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
            Err(failed) => panic!("{failed:?}"),
            Ok(done) => panic!("stubbed {} containers", done.containers),
        };
        let why = refused(
            stub_output(
                &out,
                &[],
                &[],
                Keys(HashMap::new()),
                &maps,
                &mut Parts::default(),
            )
            .unwrap(),
        );
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
        let sources = vec![Source::default(); modules.len()];
        let why = refused(
            stub_output(
                &out,
                &modules,
                &sources,
                Keys::of(&modules, &maps).unwrap(),
                &maps,
                &mut Parts::default(),
            )
            .unwrap(),
        );
        assert!(why.contains("not the last thing"), "{why}");
        assert!(std::fs::read(&out).unwrap() == before, "the output changed");
    }
}
