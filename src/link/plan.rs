//! The inputs a packed link rewrites: each object or archive with device code gets a copy
//! whose containers are stubs naming store modules, the names unique within the link and
//! independent of the build folder.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::LinkError;
use crate::error::io_at;

use crate::elf::sections::{Part, Parts};
use crate::inputs::{self, DeviceSection, FileKind};
use crate::ld::InputId;
use crate::rewrite::{archive, rewrite_object_parts, Extracted};

/// One input that carries device code, and what to do with it.
pub(super) struct Planned {
    /// The line's input it is, or whose implicit script names it.
    pub(super) id: InputId,
    /// Its entry's place in that script (and in the scripts inside it,
    /// [`crate::ld::LinkFile::within`]): empty for the input itself.
    pub(super) within: Vec<usize>,
    pub(super) path: PathBuf,
    pub(super) kind: FileKind,
    pub(super) sections: Vec<DeviceSection>,
}

impl Planned {
    /// The bytes of its device sections (containers nvcc compressed count as stored).
    pub(super) fn device_bytes(&self) -> u64 {
        self.sections.iter().map(|s| s.section_size).sum()
    }

    /// The input's ELF machine: the object's own, or that of its first member with device
    /// code, from the headers the scan read.
    pub(super) fn machine(&self) -> Option<u16> {
        self.sections
            .iter()
            .find_map(|s| s.elf.as_ref())
            .map(|l| l.machine())
    }
}

/// Gives every container a module name unique within the link.
#[derive(Default)]
pub(super) struct Names {
    seen: HashMap<String, usize>,
}

impl Names {
    pub(super) fn name(&mut self, origin: &str, index: usize) -> String {
        let base = format!("{origin}#{index}");
        let n = self.seen.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}~{}", *n - 1)
        }
    }
}

/// A module's origin as recorded in the store: the path as the command line gave it when
/// relative, else its file name, so that the store (and its digest) does not depend on the
/// build folder; nvcc's temporary-file prefix (`tmpxft_00002b42_00000000-6_`, which holds a
/// process id) is dropped for the same reason. Names stay unique: [`Names`] numbers repeats.
pub(super) fn origin_of(p: &Path) -> String {
    let shown = if p.is_relative() {
        p.display().to_string()
    } else {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    strip_nvcc_temp_prefix(&shown)
}

/// `tmpxft_<hex>_<hex>-<n>_rest` → `rest` (in the last path component).
fn strip_nvcc_temp_prefix(s: &str) -> String {
    let (dir, base) = match s.rfind('/') {
        Some(i) => (&s[..=i], &s[i + 1..]),
        None => ("", s),
    };
    let stripped = base.strip_prefix("tmpxft_").and_then(|rest| {
        let (pid, rest) = rest.split_once('_')?;
        let (ctr, rest) = rest.split_once('-')?;
        let (n, rest) = rest.split_once('_')?;
        let hex = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit());
        (hex(pid)
            && hex(ctr)
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !rest.is_empty())
        .then_some(rest)
    });
    match stripped {
        Some(rest) => format!("{dir}{rest}"),
        None => s.to_string(),
    }
}

/// Where the rewrite's time went (`--fatpack-verbose`), over all inputs: reading archive
/// members, making their stubs, and writing (an archive's index and its members).
#[derive(Default)]
pub(super) struct RewriteTimes {
    pub(super) members: f64,
    pub(super) stubs: f64,
    pub(super) write: f64,
}

/// Write the rewritten copy of one planned input into `dir`; returns its path. The headers
/// the scan kept for each rewritten object are let go as soon as it is rewritten: a link
/// holds them only for what is still to rewrite.
/// The name of the `seq`th file the link writes for the user's `path`: `0003-libfoo.a`.
pub(super) fn numbered(seq: usize, path: &Path) -> OsString {
    let mut name = OsString::from(format!("{seq:04}-"));
    name.push(path.file_name().unwrap_or(OsStr::new("input")));
    name
}

pub(super) fn rewrite_input(
    p: &mut Planned,
    seq: usize,
    dir: &Path,
    names: &mut Names,
    extracted: &mut Vec<Extracted>,
    maps: &inputs::Maps,
    times: &mut RewriteTimes,
) -> Result<PathBuf, LinkError> {
    let dest = dir.join(numbered(seq, &p.path));
    let map = maps.get(&p.path)?;
    match p.kind {
        FileKind::Object => rewrite_object(p, &map, &dest, names, extracted, maps)?,
        FileKind::Archive | FileKind::ThinArchive => {
            rewrite_archive(p, &map, &dest, names, extracted, maps, times)?
        }
        _ => unreachable!("plan() keeps objects and archives only"),
    }
    Ok(dest)
}

/// [`rewrite_input`] of an object: its device sections replaced by stubs.
fn rewrite_object(
    p: &mut Planned,
    map: &[u8],
    dest: &Path,
    names: &mut Names,
    extracted: &mut Vec<Extracted>,
    maps: &inputs::Maps,
) -> Result<(), LinkError> {
    let origin = origin_of(&p.path);
    let mut name_for = |o: &str, i: usize| names.name(o, i);
    let (parts, ex) = rewrite_object_parts(&origin, map, &p.sections, &mut name_for)?;
    extracted.extend(ex);
    for s in &mut p.sections {
        s.elf = None;
    }
    maps.release(&p.path, 0, map.len() as u64);
    let input = std::fs::File::open(&p.path).map_err(io_at(&p.path))?;
    let from = archive::FromFile {
        parts,
        file: &input,
        base: 0,
    };
    let file = std::fs::File::create(dest).map_err(io_at(dest))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    from.write(&mut w)
        .and_then(|()| std::io::Write::flush(&mut w))
        .map_err(io_at(dest))?;
    Ok(())
}

/// [`rewrite_input`] of an archive (regular or thin): each member with device code
/// rewritten, on every CPU, the others copied; a regular archive written with its index.
fn rewrite_archive(
    p: &mut Planned,
    map: &[u8],
    dest: &Path,
    names: &mut Names,
    extracted: &mut Vec<Extracted>,
    maps: &inputs::Maps,
    times: &mut RewriteTimes,
) -> Result<(), LinkError> {
    let t = std::time::Instant::now();
    let shown = origin_of(&p.path);
    let input_members = inputs::archive::members(&p.path, &shown, map, maps)?;
    // The files members' bytes are copied from: the archive, or a thin archive's
    // member files.
    let mut files: BTreeMap<&Path, std::fs::File> = BTreeMap::new();
    for m in &input_members {
        if !files.contains_key(m.file.as_path()) {
            let f = std::fs::File::open(&m.file).map_err(io_at(&m.file))?;
            files.insert(&m.file, f);
        }
    }
    // The sections by file and offset: each member finds its own by a binary search
    // (a scan of all of them per member was quadratic: 3,000 members, 0.1 s).
    let mut order: Vec<usize> = (0..p.sections.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&p.sections[a], &p.sections[b]);
        (&a.file, a.file_offset).cmp(&(&b.file, b.file_offset))
    });
    // Each member's sections and its modules' names, in order (names are unique
    // within the link, so they are given one after another) ...
    let mut jobs: Vec<(&inputs::archive::Member, Vec<DeviceSection>, Vec<String>)> =
        Vec::with_capacity(input_members.len());
    for m in &input_members {
        // This member's sections, by where their bytes are (names can repeat in an archive).
        let key = |i: &usize| (&p.sections[*i].file, p.sections[*i].file_offset);
        let from = order.partition_point(|i| key(i) < (&m.file, m.range.0));
        let to = order.partition_point(|i| key(i) < (&m.file, m.range.1));
        // In the scan's order, which names the modules.
        let mut mine = order[from..to].to_vec();
        mine.sort_unstable();
        let mut secs: Vec<DeviceSection> = mine
            .into_iter()
            .map(|i| {
                let s = &mut p.sections[i];
                DeviceSection {
                    elf: s.elf.take(),
                    ..s.clone()
                }
            })
            .collect();
        // Stores record the short origin (see origin_of).
        for s in &mut secs {
            s.origin = m.origin.clone();
        }
        // The order rewrite_object_parts asks for them in.
        let given: Vec<String> = secs
            .iter()
            .flat_map(|s| 0..s.spans.len())
            .map(|i| names.name(&m.origin, i))
            .collect();
        jobs.push((m, secs, given));
    }
    times.members += t.elapsed().as_secs_f64();
    // ... then the stubs of every member, on every CPU.
    let t = std::time::Instant::now();
    let made = crate::parallel::map_ordered(&jobs, |(m, secs, given)| {
        // Members without device code are copied as they are; rewritten ones keep
        // most of their bytes, copied from the input too.
        if secs.is_empty() {
            let whole = Parts {
                parts: vec![Part::Input(0..m.bytes.len())],
                len: m.bytes.len(),
            };
            return Ok((whole, Vec::new()));
        }
        let mut given = given.iter();
        let mut name_for = |_: &str, _: usize| given.next().cloned().unwrap_or_default();
        let made = rewrite_object_parts(&m.origin, &m.bytes, secs, &mut name_for)?;
        // The headers, symbols and relocations it read: let them go until the
        // index reads the symbols again, or every member's stay resident.
        maps.release(&m.file, m.range.0, m.bytes.len() as u64);
        Ok::<_, LinkError>(made)
    });
    drop(jobs);
    let mut members = Vec::with_capacity(input_members.len());
    for (m, made) in input_members.iter().zip(made) {
        let (parts, ex) = made?;
        extracted.extend(ex);
        members.push(archive::Member {
            name: m.name.clone(),
            // The index is read from the input member: the same symbols.
            data: Cow::Borrowed(&m.bytes[..]),
            pieces: Some(archive::FromFile {
                parts,
                file: &files[m.file.as_path()],
                base: m.range.0,
            }),
        });
    }
    times.stubs += t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let file = std::fs::File::create(dest).map_err(io_at(dest))?;
    // Pages of the input let go member by member once the index has read them (the
    // members are then copied from the file, not through the mapping).
    let release = |i: usize| {
        let m = &input_members[i];
        maps.release(&m.file, m.range.0, m.bytes.len() as u64);
    };
    archive::write_archive_file(&members, &file, release).map_err(io_at(dest))?;
    times.write += t.elapsed().as_secs_f64();
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn nvcc_temp_prefix_is_dropped() {
        let f = super::strip_nvcc_temp_prefix;
        assert_eq!(
            f("tmpxft_00002b42_00000000-6_nv_rdc_dlink.o"),
            "nv_rdc_dlink.o"
        );
        assert_eq!(f("sub/tmpxft_1a_2-10_x.o"), "sub/x.o");
        assert_eq!(f("tmpxft_zz_00-6_x.o"), "tmpxft_zz_00-6_x.o");
        assert_eq!(f("kernels.o"), "kernels.o");
        assert_eq!(f("tmpxft_1_2-3_"), "tmpxft_1_2-3_");
    }
}
