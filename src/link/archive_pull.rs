//! The device code a link takes in: every object's, and of each archive only the members ld
//! would pull in, found through the archives' symbol indexes. An archive can hold far more
//! than a link takes from it: nvcc's `libcudadevrt.a` brings 1 MB of device code to every
//! `-rdc` link (CMake's CUDA_SEPARABLE_COMPILATION), of which NVIDIA's samples take none.
//!
//! An estimate for [`super::worth_packing`], never for what the link writes: the archives
//! are resolved as one group in line order (a member is taken for a reference from anywhere
//! on the line, where ld takes it only for one made before the archive unless they are in a
//! group), and shared libraries' references and definitions are left out. Both err towards
//! more device code, so towards packing. An archive without an index, or whose index or
//! members do not read, counts whole.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use object::read::archive::{ArchiveFile, ArchiveOffset};
use object::{Object, ObjectSymbol};

use super::plan::Planned;
use crate::inputs::archive::thin_member_path;
use crate::inputs::{FileKind, Maps};
use crate::ld::{InputFileKind, LinkLine};

/// Symbols, by name: what the link defines so far and what it still looks for.
#[derive(Default)]
struct Resolution {
    defined: HashSet<Vec<u8>>,
    wanted: HashSet<Vec<u8>>,
}

impl Resolution {
    /// Takes in the global symbols of the relocatable object `data` (a shared library or
    /// anything else adds nothing); false if it does not read as an object file.
    fn add(&mut self, data: &[u8]) -> bool {
        // Only relocatable objects' symbols count: a shared library (libstdc++.so is on every
        // C++ line) is told by its header's first bytes, without a parse.
        match crate::elf::file_type_of(data) {
            Some(object::elf::ET_REL) => {}
            Some(_) => return true,
            None => return false,
        }
        let Ok(file) = object::File::parse(data) else {
            return false;
        };
        for s in file.symbols() {
            let Ok(name) = s.name_bytes() else { continue };
            if s.is_undefined() {
                // A weak reference pulls no member in (ld's rule).
                if !s.is_weak() && !self.defined.contains(name) {
                    self.wanted.insert(name.to_vec());
                }
            } else if s.is_global() {
                self.wanted.remove(name);
                self.defined.insert(name.to_vec());
            }
        }
        true
    }

    fn needs(&self, name: &[u8]) -> bool {
        self.wanted.contains(name) && !self.defined.contains(name)
    }
}

/// A member of an archive: by the offset of its header (what the symbol index gives), or
/// for a thin archive, whose members' bytes are files of their own (object reports no
/// offset for them), by that file.
#[derive(PartialEq, Eq, Hash)]
enum MemberKey {
    At(u64),
    File(PathBuf),
}

/// One archive with device code: its members' device bytes.
struct Archive<'a> {
    planned: &'a Planned,
    data: std::sync::Arc<memmap2::Mmap>,
    /// Members holding device code, and the bytes of their device sections.
    device: HashMap<MemberKey, u64>,
    taken: HashSet<u64>,
    whole: bool,
}

/// The bytes of device code the link takes in, counted until `enough` is reached (then any
/// figure at or above it).
pub(super) fn device_code_linked(
    line: &LinkLine,
    planned: &[Planned],
    maps: &Maps,
    enough: u64,
) -> u64 {
    let is_archive = |p: &Planned| matches!(p.kind, FileKind::Archive | FileKind::ThinArchive);
    let bytes = |p: &Planned| p.sections.iter().map(|s| s.section_size).sum::<u64>();
    let mut total: u64 = planned.iter().filter(|p| !is_archive(p)).map(bytes).sum();
    if total >= enough || !planned.iter().any(is_archive) {
        return total;
    }
    let mut res = Resolution::default();
    for input in &line.inputs {
        let (Some(path), Some(InputFileKind::Elf)) = (&input.resolved, input.file_kind) else {
            continue;
        };
        if let Ok(map) = maps.get(path) {
            res.add(&map);
        }
    }
    let mut archives = Vec::new();
    for p in planned.iter().filter(|p| is_archive(p)) {
        let whole = line.inputs.iter().any(|i| i.id == p.id && i.whole_archive);
        match Archive::open(p, maps, whole) {
            Some(a) => archives.push(a),
            // Unreadable here (the scan read it): count it whole.
            None => total += bytes(p),
        }
    }
    // Take members until nothing more is needed; whole archives first.
    let mut changed = true;
    while changed && total < enough {
        changed = false;
        for a in &mut archives {
            let took = match a.take_needed(&mut res, maps) {
                Some(took) => took,
                // An index or member that does not read: the archive counts whole.
                None => std::mem::take(&mut a.device).into_values().sum(),
            };
            if took > 0 {
                changed = true;
                total += took;
                if total >= enough {
                    break;
                }
            }
        }
    }
    total
}

impl<'a> Archive<'a> {
    fn open(planned: &'a Planned, maps: &Maps, whole: bool) -> Option<Self> {
        let data = maps.get(&planned.path).ok()?;
        let file = ArchiveFile::parse(&**data).ok()?;
        // Each device section belongs to the member whose bytes hold it: found by its offset
        // among the members (in file order), or for a thin archive by its member's file.
        let mut inline: Vec<(u64, u64)> = Vec::new();
        for m in file.members() {
            let m = m.ok()?;
            if !m.is_thin() {
                inline.push(m.file_range());
            }
        }
        let mut device = HashMap::new();
        for s in &planned.sections {
            let key = if s.file == planned.path {
                let i = inline
                    .partition_point(|&(off, _)| off <= s.file_offset)
                    .checked_sub(1)?;
                let (off, size) = inline[i];
                (s.file_offset < off + size).then_some(MemberKey::At(off.checked_sub(60)?))?
            } else {
                MemberKey::File(s.file.clone())
            };
            *device.entry(key).or_insert(0) += s.section_size;
        }
        Some(Archive {
            planned,
            data,
            device,
            taken: HashSet::new(),
            whole,
        })
    }

    /// Takes in the members that define a symbol the link needs (all of them, for a
    /// `--whole-archive` one); returns the device bytes they hold, None where the archive's
    /// index or a member does not read.
    fn take_needed(&mut self, res: &mut Resolution, maps: &Maps) -> Option<u64> {
        if self.whole {
            let all: u64 = self.device.values().sum();
            self.device.clear();
            return Some(all);
        }
        let file = ArchiveFile::parse(&**self.data).ok()?;
        let mut pending: Vec<u64> = Vec::new();
        for sym in file.symbols().ok()?? {
            let sym = sym.ok()?;
            let at = sym.offset().0;
            if !self.taken.contains(&at) && res.needs(sym.name()) {
                self.taken.insert(at);
                pending.push(at);
            }
        }
        let mut took = 0;
        for at in pending {
            let m = file.member(ArchiveOffset(at)).ok()?;
            let (read, key) = if m.is_thin() {
                let path = thin_member_path(&self.planned.path, m.name());
                (res.add(&maps.get(&path).ok()?), MemberKey::File(path))
            } else {
                (res.add(m.data(&**self.data).ok()?), MemberKey::At(at))
            };
            if !read {
                return None;
            }
            took += self.device.remove(&key).unwrap_or(0);
        }
        Some(took)
    }
}
