//! The direct route of a packed link (`--fatpack-route=direct`): nothing is copied before
//! the link. The real linker links the inputs as given, with the tail script placing
//! `.nv_fatbin` and `__nv_relfatbin` last in the image; then every container in the output
//! is replaced by the stub of the input module it is, the stubs packed where the device
//! code began and the file cut short there (prune's cut, made in the file itself:
//! [`crate::prune::cut::InPlace`]).
//!
//! Which module a container of the output is: the one with the same bytes, of the
//! containers the scan found in the inputs (the linker copies a section's bytes as they
//! are). Of several with the same bytes, the first in the scan's order not yet taken, so the
//! names are those the copy route gives wherever contents differ. Every pairing is checked
//! byte for byte before the output is touched; anything in the output that no input holds,
//! or a layout the cut refuses, sends the link down the copy route instead.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::Path;

use fatpack_format::stub::{self, FLAG_RELOCATABLE};

use super::inputs::{origin_of, Names, Planned};
use super::LinkError;
use crate::inputs::{self, DeviceSection, FileKind, RELFATBIN_SECTION};
use crate::prune::cut::{CutDone, InPlace, Refused};
use crate::prune::PruneError;
use crate::rewrite::Extracted;

/// Every container of the planned inputs under its module name: the names and the order
/// the copy route gives them (inputs in order, an archive's members in order, each
/// member's containers in order).
pub(super) fn modules(planned: &[Planned]) -> Vec<Extracted> {
    let mut names = Names::default();
    let mut out = Vec::new();
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
            for (i, &(off, len)) in d.spans.iter().enumerate() {
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

/// Replaces each container of the linked file `out` by the stub of the module in `modules`
/// it is, and cuts the file short. `Ok(Err(why))`: it cannot (nothing was written; the copy
/// route is left).
pub(super) fn stub_output(
    out: &Path,
    modules: &[Extracted],
    maps: &inputs::Maps,
) -> Result<Result<CutDone, String>, LinkError> {
    // Each module's key, from the first bytes of its container in the input.
    let mut by_key: HashMap<(u64, u64), VecDeque<usize>> = HashMap::new();
    for (i, m) in modules.iter().enumerate() {
        let map = maps.get(&m.file)?;
        let bytes = input_bytes(m, &map)?;
        by_key.entry(key(bytes)).or_default().push_back(i);
    }
    // (file offset in the output, module) of every container, as the cut meets them.
    let mut pairs: Vec<(u64, usize)> = Vec::new();
    let mut stubs = |d: &DeviceSection, index: usize, bytes: &[u8]| {
        let at = d.file_offset + d.spans[index].0;
        let Some(m) = by_key.get_mut(&key(bytes)).and_then(VecDeque::pop_front) else {
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
        Ok(Err(Refused(why))) => return Ok(Err(why)),
        Err(PruneError::Cut { message, .. }) => return Ok(Err(message)),
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
            return Ok(Err(format!(
                "the container at offset {at:#x} differs from {}, whose first bytes it shares",
                modules[m].module
            )));
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
    plan.apply(&check).map(Ok).map_err(LinkError::Cut)
}
