//! The device code a link takes in: every object's, and of each archive only the members ld
//! would pull in, found through the archives' symbol indexes. Every archive on the line takes
//! part, with device code or not, and a member taken for what another member needs counts as
//! ld counts it: static cuBLAS's API entry points hold no device code and call launchers in
//! other members (counting only the first round of members once took its 186 MB for
//! 1,696 bytes). An archive can hold far more
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
use std::path::{Path, PathBuf};

use object::read::archive::{ArchiveFile, ArchiveOffset};
use object::{Object, ObjectSymbol};

use super::plan::Planned;
use crate::inputs::archive::thin_member_path;
use crate::inputs::{DeviceSection, FileKind, Maps};
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

/// One archive of the line (with device code or not: a member without any may pull members
/// of another archive that have some): its members' device bytes.
struct Archive<'a> {
    path: &'a Path,
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
    let mut total: u64 = planned
        .iter()
        .filter(|p| !is_archive(p))
        .map(Planned::device_bytes)
        .sum();
    if total >= enough || !planned.iter().any(is_archive) {
        return total;
    }
    let mut res = Resolution::default();
    // The line's inputs and the files their scripts name (the C library's `libc.so`).
    let files = line.files();
    for f in &files {
        if f.kind == Some(InputFileKind::Elf) {
            if let Ok(map) = maps.get(f.path) {
                res.add(&map);
            }
        }
    }
    let mut archives = Vec::new();
    for f in &files {
        if !matches!(
            f.kind,
            Some(InputFileKind::Archive | InputFileKind::ThinArchive)
        ) {
            continue;
        }
        let p = planned
            .iter()
            .find(|p| p.id == f.input.id && p.within == f.within);
        let sections = p.map_or(&[][..], |p| &p.sections[..]);
        match Archive::open(f.path, sections, maps, f.input.whole_archive) {
            Some(a) => archives.push(a),
            // Unreadable here: one with device code (which the scan read) counts whole.
            None => total += p.map_or(0, Planned::device_bytes),
        }
    }
    // Take members until nothing more is needed; whole archives first.
    let mut changed = true;
    while changed && total < enough {
        changed = false;
        for a in &mut archives {
            let (members, took) = match a.take_needed(&mut res, maps) {
                Some(taken) => taken,
                // An index or member that does not read: the archive counts whole.
                None => (0, std::mem::take(&mut a.device).into_values().sum()),
            };
            // A member without device code counts too: what it needs may pull in members
            // that have some (cuBLAS's API entry points call kernels' launchers elsewhere).
            changed |= members > 0;
            total += took;
            if total >= enough {
                break;
            }
        }
    }
    total
}

impl<'a> Archive<'a> {
    fn open(path: &'a Path, sections: &[DeviceSection], maps: &Maps, whole: bool) -> Option<Self> {
        let data = maps.get(path).ok()?;
        let file = ArchiveFile::parse(&**data).ok()?;
        // Each device section belongs to the member whose bytes hold it: found by its offset
        // among the members (in file order), or for a thin archive by its member's file.
        let mut inline: Vec<(u64, u64)> = Vec::new();
        for m in file.members().filter(|_| !sections.is_empty()) {
            let m = m.ok()?;
            if !m.is_thin() {
                inline.push(m.file_range());
            }
        }
        let mut device = HashMap::new();
        for s in sections {
            let key = if s.file == path {
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
            path,
            data,
            device,
            taken: HashSet::new(),
            whole,
        })
    }

    /// Takes in the members that define a symbol the link needs (all of them, for a
    /// `--whole-archive` one); returns how many it took and the device bytes they hold, None
    /// where the archive's index or a member does not read.
    fn take_needed(&mut self, res: &mut Resolution, maps: &Maps) -> Option<(usize, u64)> {
        let file = ArchiveFile::parse(&**self.data).ok()?;
        if self.whole {
            // Every member is taken, and what each needs may pull members of other archives.
            self.whole = false;
            let mut members = 0;
            for m in file.members() {
                let m = m.ok()?;
                if !self.read_member(&m, res, maps)? {
                    return None;
                }
                members += 1;
            }
            let all: u64 = self.device.values().sum();
            self.device.clear();
            return Some((members, all));
        }
        let mut pending: Vec<u64> = Vec::new();
        for sym in file.symbols().ok()?? {
            let sym = sym.ok()?;
            let at = sym.offset().0;
            if !self.taken.contains(&at) && res.needs(sym.name()) {
                self.taken.insert(at);
                pending.push(at);
            }
        }
        let (mut took, members) = (0, pending.len());
        for at in pending {
            let m = file.member(ArchiveOffset(at)).ok()?;
            if !self.read_member(&m, res, maps)? {
                return None;
            }
            let key = if m.is_thin() {
                MemberKey::File(thin_member_path(self.path, m.name()))
            } else {
                MemberKey::At(at)
            };
            took += self.device.remove(&key).unwrap_or(0);
        }
        Some((members, took))
    }

    /// Adds member `m`'s symbols to `res`: whether it reads as an object (None: its bytes do
    /// not read at all).
    fn read_member(
        &self,
        m: &object::read::archive::ArchiveMember<'_>,
        res: &mut Resolution,
        maps: &Maps,
    ) -> Option<bool> {
        if m.is_thin() {
            let path = thin_member_path(self.path, m.name());
            Some(res.add(&maps.get(&path).ok()?))
        } else {
            Some(res.add(m.data(&**self.data).ok()?))
        }
    }
}
