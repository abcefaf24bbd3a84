//! `fatpack split OUT --into DIR` and `fatpack join HOST -o OUT`: one packed binary becomes a
//! host binary plus one pack file per architecture (and one for PTX), so a distribution can
//! ship each machine only its GPUs' code; joining gives the original bytes back.
//!
//! The host keeps, where the store was, a manifest ([`fatpack_format::split`]): the pack
//! list with each pack's length and blake3, where every blob now is, and the store's
//! detached index, whose digest is the one the binary already records. The runtime loads
//! blobs from `<binary><suffix>` next to the binary's real path and checks each against the
//! index; `inspect` and `extract` read split binaries the same way ([`SplitContents`]).
//!
//! Both commands verify their input completely (every blob decoded and checked, every pack's
//! blake3) and what they wrote before anything is renamed into place.

mod error;
mod join;

pub use crate::packed::{SplitContents, MISSING};
pub use error::SplitError;
pub use join::{join, JoinReport};

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use cubin_store::{EntryKind, Store};
use fatpack_format::arch::EntryId;
use fatpack_format::link::FEATURE_SPLIT;
use fatpack_format::select;
use fatpack_format::split::{
    pack_header, Manifest, PackKind, PackRecord, Placement, PACK_HEADER_LEN,
};

use crate::commit::{Outputs, Staged};
use crate::inputs::read_file;
use crate::packed::{self, side_path};

/// One pack written by split.
#[derive(Debug, Clone)]
pub struct PackReport {
    pub path: PathBuf,
    pub kind: PackKind,
    pub len: u64,
    pub blobs: usize,
}

#[derive(Debug, Clone)]
pub struct SplitReport {
    pub host: PathBuf,
    /// The host's side file, when the input kept its store in one.
    pub side_file: Option<PathBuf>,
    pub host_len: u64,
    pub packs: Vec<PackReport>,
    /// Per compute capability with SASS in the binary: the packs a GPU of that capability
    /// loads from, as the runtime chooses.
    pub needs: Vec<(u32, Vec<String>)>,
    /// Per real GPU ([`select::REAL_GPUS`]) that loads anything from the binary: the packs it
    /// loads from, by the runtime's own choice (PTX's forward range included).
    pub loads: Vec<(u32, Vec<PackKind>)>,
    /// The input was not packed (a plain build, or a link `fatpack ld` left to the real
    /// linker): it was written whole, its device code inside it, and no packs.
    pub unpacked: bool,
}

/// The pack a blob goes to: that of the first entry using it (a blob shared by two kinds
/// of entry, which nvcc output does not produce, is stored once; the runtime finds it by
/// its placement wherever it is).
fn pack_kind(kind: EntryKind, arch: u32) -> PackKind {
    match kind {
        EntryKind::Sass => PackKind::Sass(arch),
        EntryKind::Ptx => PackKind::Ptx(arch),
        EntryKind::Other(_) => PackKind::Other,
    }
}

/// Checks every blob of `store` (decoded, length and blake3), on the threads
/// [`crate::parallel`] gives; the first error in blob order.
pub(crate) fn verify_all(store: &Store<'_>, path: &Path) -> Result<(), SplitError> {
    let ids: Vec<u32> = (0..store.blob_count() as u32).collect();
    crate::parallel::map_ordered(&ids, |&id| store.read_blob(id).map(|_| ()))
        .into_iter()
        .collect::<Result<(), _>>()
        .map_err(|source| {
            SplitError::Store(crate::error::StoreAt {
                path: path.to_path_buf(),
                source,
            })
        })
}

/// Splits the packed binary `input` into `into`/<its name> plus its packs. A program or
/// library that is not packed is written there whole ([`whole`]).
pub fn split(input: &Path, into: &Path) -> Result<SplitReport, SplitError> {
    let mut outs = Outputs::new(&[input]);
    // Mapped, not read: a library with a gigabyte of debug info after its sections is split
    // in the memory its store takes.
    let map = crate::inputs::map_file(input)?;
    let data: &[u8] = &map;
    let Some(located) = packed::locate(input, data)? else {
        return whole(outs, input, data, into);
    };
    let store_bytes = located.store.bytes();
    if fatpack_format::split::is_manifest(store_bytes) {
        return Err(SplitError::AlreadySplit(input.to_path_buf()));
    }
    if located.slot.features & FEATURE_SPLIT == 0 {
        return Err(SplitError::OldRuntime(input.to_path_buf()));
    }
    let store = located.own_store(input)?;
    verify_all(&store, input)?;

    let (kinds, blob_pack) = assign_packs(&store, input)?;
    let pack_of = |id: usize| blob_pack[id];

    // The runtime finds packs next to the file the loader mapped, by its real name (what
    // /proc/self/maps shows), so a library split through its `libfoo.so` link is written
    // under the name the link points at.
    let name = real_name(input)?;
    let host_path = into.join(&name);
    outs.check(&host_path)?;
    outs.folder(into)?;
    let pack_path = |k: PackKind| {
        let mut s = host_path.clone().into_os_string();
        s.push(k.suffix());
        PathBuf::from(s)
    };
    let temp = |final_path: &Path| outs.file(final_path);

    let Packs {
        packs,
        files: pack_files,
        reports,
        placements,
    } = write_packs(&outs, &store, store_bytes, &kinds, &pack_of, &pack_path)?;
    let skeleton = store.skeleton();
    let manifest = Manifest {
        packs,
        placements,
        skeleton: &skeleton,
    }
    .to_bytes();

    // The host: the input with the manifest where the store was.
    let embedded = located.store.is_section();
    let host_tmp = temp(&host_path)?;
    copy_file(input, data.len() as u64, host_tmp.path(), &host_path)?;
    let side_tmp = if embedded {
        packed::replace_store(
            host_tmp.path(),
            &store.digest(),
            located.slot.is_mapped(),
            |w| -> Result<(), SplitError> {
                Ok(w.write_all(&manifest).map_err(error::io_at(&host_path))?)
            },
        )?;
        None
    } else {
        let side = side_path(&host_path);
        let mut t = temp(&side)?;
        t.named()
            .write_all(&manifest)
            .map_err(error::io_at(&side))?;
        Some(t)
    };

    // Read back what was written before anything is renamed into place.
    check_written(
        &store,
        store_bytes,
        host_tmp.path(),
        side_tmp.as_ref().map(|t| t.path()),
        &pack_files,
        &host_path,
    )?;
    let needs = needs(&store, &kinds, &|id| pack_of(id), &name);
    let loads = loads(&store, select::REAL_GPUS, &|id| pack_of(id))
        .into_iter()
        .filter(|(_, used)| !used.is_empty())
        .map(|(cap, used)| (cap, used.iter().map(|&p| kinds[p as usize]).collect()))
        .collect();

    // Measured before the commit: once in place, another writer may replace it.
    let host_len = host_tmp
        .as_file()
        .metadata()
        .map_err(error::io_at(&host_path))?
        .len();
    let side_file = commit(outs, pack_files, side_tmp, host_tmp, input)?;
    Ok(SplitReport {
        host: host_path,
        side_file,
        host_len,
        packs: reports,
        needs,
        loads,
        unpacked: false,
    })
}

/// Copies `input` (`len` bytes, as mapped) to `to` in the kernel, never through memory;
/// a file that changed length meanwhile is an error.
fn copy_file(input: &Path, len: u64, to: &Path, shown: &Path) -> Result<(), SplitError> {
    let mut from = std::fs::File::open(input).map_err(error::io_at(input))?;
    let mut into = std::fs::File::create(to).map_err(error::io_at(shown))?;
    let copied = std::io::copy(&mut from, &mut into).map_err(error::io_at(shown))?;
    if copied != len {
        return Err(crate::inputs::InputError::Changed {
            path: input.to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// The name `input` is written under: the runtime finds packs next to the file the loader
/// mapped, by its real name (what /proc/self/maps shows), so a library split through its
/// `libfoo.so` link is written under the name the link points at.
fn real_name(input: &Path) -> Result<std::ffi::OsString, SplitError> {
    let real = std::fs::canonicalize(input).map_err(error::io_at(input))?;
    Ok(real
        .file_name()
        .ok_or_else(|| SplitError::Bad {
            path: input.to_path_buf(),
            message: "has no file name".into(),
        })?
        .to_owned())
}

/// A program or shared library without a store (a plain build, or a link `fatpack ld` left
/// to the real linker because its device code was too small for packing to pay): its device
/// code, every GPU's, is inside it, where the CUDA runtime finds it, and nothing can load it
/// from packs. It is written to `into` whole, no packs beside it, so that a split of a whole
/// build covers every file the build made; `fatpack prune --for` cuts such a file to one
/// GPU's code.
fn whole(
    mut outs: Outputs,
    input: &Path,
    data: &[u8],
    into: &Path,
) -> Result<SplitReport, SplitError> {
    match crate::inputs::classify(data).0 {
        crate::inputs::FileKind::Executable | crate::inputs::FileKind::SharedLibrary => {}
        kind => {
            return Err(SplitError::Bad {
                path: input.to_path_buf(),
                message: format!(
                "{}, not a program or shared library: split writes a linked binary and its packs",
                kind.name()
            ),
            })
        }
    }
    // Its device code must read as inspect reads it: a damaged file is refused, not copied.
    crate::inputs::scan_bytes(input, data)?;
    let host_path = into.join(real_name(input)?);
    outs.check(&host_path)?;
    outs.folder(into)?;
    let tmp = outs.file(&host_path)?;
    copy_file(input, data.len() as u64, tmp.path(), &host_path)?;
    if crate::inputs::map_file(tmp.path())?[..] != *data {
        return Err(SplitError::Bad {
            path: host_path,
            message: "written output does not read back as the input".into(),
        });
    }
    let host_len = data.len() as u64;
    commit(outs, Vec::new(), None, tmp, input)?;
    Ok(SplitReport {
        host: host_path,
        side_file: None,
        host_len,
        packs: Vec::new(),
        needs: Vec::new(),
        loads: Vec::new(),
        unpacked: true,
    })
}

/// The packs [`write_packs`] wrote (not yet committed) and where each blob went.
struct Packs {
    packs: Vec<PackRecord>,
    files: Vec<Staged>,
    reports: Vec<PackReport>,
    placements: Vec<Placement>,
}

/// One pack per kind in `kinds`, each staged under its final name: header, then each blob's
/// stored bytes at an 8-aligned offset.
fn write_packs(
    outs: &Outputs,
    store: &Store<'_>,
    store_bytes: &[u8],
    kinds: &[PackKind],
    pack_of: &dyn Fn(usize) -> u32,
    pack_path: &dyn Fn(PackKind) -> PathBuf,
) -> Result<Packs, SplitError> {
    let mut out = Packs {
        packs: Vec::with_capacity(kinds.len()),
        files: Vec::with_capacity(kinds.len()),
        reports: Vec::with_capacity(kinds.len()),
        placements: vec![Placement { pack: 0, offset: 0 }; store.blob_count()],
    };
    for (pi, &kind) in kinds.iter().enumerate() {
        let path = pack_path(kind);
        let mut tmp = outs.file(&path)?;
        let mut w = Hashing::new(std::io::BufWriter::new(tmp.named().as_file_mut()));
        let io = error::io_at(&path);
        w.write_all(&pack_header(pi as u32, &store.digest()))
            .map_err(&io)?;
        let blobs = write_blobs(
            &mut w,
            store,
            store_bytes,
            pi as u32,
            pack_of,
            &mut out.placements,
        )
        .map_err(&io)?;
        let (len, digest) = w.finish().map_err(&io)?;
        out.packs.push(PackRecord {
            kind,
            suffix: kind.suffix(),
            len,
            digest,
        });
        out.reports.push(PackReport {
            path: path.clone(),
            kind,
            len,
            blobs,
        });
        out.files.push(tmp);
    }
    Ok(out)
}

/// Writes the blobs of pack `pi` after what `w` holds, each at an 8-aligned offset, and
/// records where; a solid group's blobs share their frame, written once. Returns how many
/// blobs the pack holds.
fn write_blobs<W: Write>(
    w: &mut Hashing<W>,
    store: &Store<'_>,
    store_bytes: &[u8],
    pi: u32,
    pack_of: &dyn Fn(usize) -> u32,
    placements: &mut [Placement],
) -> std::io::Result<usize> {
    let mut blobs = 0;
    // The blob before (a group's blobs are all in one pack, one after another) and where
    // its frame went.
    let mut last: Option<(cubin_store::BlobView, u64)> = None;
    for b in store.blobs().filter(|b| pack_of(b.id as usize) == pi) {
        blobs += 1;
        let offset = match last.as_ref().filter(|(p, _)| b.shares_frame_with(p)) {
            Some(&(_, at)) => at,
            None => {
                w.pad_to_8()?;
                let at = w.len;
                w.write_all(&store_bytes[b.offset as usize..(b.offset + b.stored_len) as usize])?;
                at
            }
        };
        placements[b.id as usize] = Placement { pack: pi, offset };
        last = Some((b, offset));
    }
    Ok(blobs)
}

/// Each blob's pack, and the packs in a fixed order (architectures ascending, then PTX,
/// other, then families): a blob goes where its first entry's kind puts it, except that a
/// solid group stays whole: where one spans several archs of a GPU family, all that family's
/// SASS (or PTX) goes to one family pack.
fn assign_packs(store: &Store<'_>, input: &Path) -> Result<(Vec<PackKind>, Vec<u32>), SplitError> {
    let mut first_kind: Vec<Option<PackKind>> = vec![None; store.blob_count()];
    for e in store.entries() {
        first_kind[e.blob_id() as usize].get_or_insert(pack_kind(e.kind(), e.arch()));
    }
    let merged = families_in_groups(store, &first_kind);
    for k in first_kind.iter_mut().flatten() {
        let family = match *k {
            PackKind::Sass(a) if merged.contains(&PackKind::SassFamily(a / 10)) => {
                PackKind::SassFamily(a / 10)
            }
            PackKind::Ptx(a) if merged.contains(&PackKind::PtxFamily(a / 10)) => {
                PackKind::PtxFamily(a / 10)
            }
            other => other,
        };
        *k = family;
    }
    // A group whose blobs still differ in pack (kinds mixed, which fatpack does not write):
    // the whole group goes with its first blob.
    let blobs: Vec<_> = store.blobs().collect();
    for w in 1..blobs.len() {
        let (a, b) = (&blobs[w - 1], &blobs[w]);
        if b.shares_frame_with(a) {
            first_kind[b.id as usize] = first_kind[a.id as usize].or(first_kind[b.id as usize]);
        }
    }
    let mut kinds: Vec<PackKind> = first_kind.iter().flatten().copied().collect();
    kinds.sort_unstable();
    kinds.dedup();
    if kinds.is_empty() && store.blob_count() > 0 {
        return Err(SplitError::Bad {
            path: input.to_path_buf(),
            message: "the store has blobs but no entries".into(),
        });
    }
    let pack_of = first_kind
        .iter()
        .map(|k| {
            // An unreferenced blob (never written by fatpack) goes with the first pack.
            let k = k.unwrap_or(kinds.first().copied().unwrap_or(PackKind::Other));
            kinds.iter().position(|&x| x == k).unwrap_or(0) as u32
        })
        .collect();
    Ok((kinds, pack_of))
}

/// The families (as `SassFamily`/`PtxFamily`) whose blobs share a solid group across archs.
fn families_in_groups(store: &Store<'_>, kinds: &[Option<PackKind>]) -> BTreeSet<PackKind> {
    let mut out = BTreeSet::new();
    let blobs: Vec<_> = store.blobs().collect();
    for w in 1..blobs.len() {
        let (a, b) = (&blobs[w - 1], &blobs[w]);
        if !b.shares_frame_with(a) {
            continue;
        }
        match (kinds[a.id as usize], kinds[b.id as usize]) {
            (Some(PackKind::Sass(x)), Some(PackKind::Sass(y))) if x != y => {
                out.insert(PackKind::SassFamily(x / 10));
                out.insert(PackKind::SassFamily(y / 10));
            }
            (Some(PackKind::Ptx(x)), Some(PackKind::Ptx(y))) if x != y => {
                out.insert(PackKind::PtxFamily(x / 10));
                out.insert(PackKind::PtxFamily(y / 10));
            }
            _ => {}
        }
    }
    out
}

/// Puts what split wrote in place, each file synced first: packs, then the side file, the
/// host last (a host never names packs that are not there yet). Packs are data anyone who
/// may run the binary must read; the host keeps the input's permissions.
fn commit(
    outs: Outputs,
    pack_files: Vec<Staged>,
    side_tmp: Option<Staged>,
    host_tmp: Staged,
    input: &Path,
) -> Result<Option<PathBuf>, SplitError> {
    use std::os::unix::fs::PermissionsExt;
    let side_file = side_tmp.as_ref().map(|t| t.dest().to_path_buf());
    let mut set = pack_files;
    set.extend(side_tmp);
    for t in &set {
        t.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(error::io_at(t.dest()))?;
    }
    host_tmp.permissions_of(input)?;
    set.push(host_tmp);
    outs.commit(set)?;
    Ok(side_file)
}

/// Re-reads the written host (or side file) and packs: the manifest parses, its skeleton is
/// the store's, and every blob's bytes in its pack are the input's.
fn check_written(
    store: &Store<'_>,
    store_bytes: &[u8],
    host: &Path,
    side: Option<&Path>,
    packs: &[Staged],
    shown: &Path,
) -> Result<(), SplitError> {
    let bad = |message: String| SplitError::Bad {
        path: shown.to_path_buf(),
        message: format!("written output does not read back: {message}"),
    };
    let host_map = crate::inputs::map_file(host)?;
    let side_map = side.map(read_file).transpose()?;
    let slot = packed::recorded_slot(&host_map).ok_or_else(|| bad("no slot".into()))?;
    let bytes = match &side_map {
        Some(m) => &m[..],
        None => packed::section_bytes(&host_map).ok_or_else(|| bad("no section".into()))?,
    };
    let manifest = Manifest::parse(bytes).map_err(bad)?;
    let skel = Store::parse_skeleton(manifest.skeleton).map_err(|e| bad(e.to_string()))?;
    if skel.digest() != store.digest() || slot.digest != store.digest() {
        return Err(bad("digest differs".into()));
    }
    let maps = packs
        .iter()
        .map(|t| read_file(t.path()))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, (m, rec)) in maps.iter().zip(&manifest.packs).enumerate() {
        fatpack_format::split::check_pack(m, i as u32, &store.digest(), rec.len)
            .map_err(|e| bad(format!("pack {i} {e}")))?;
        if *blake3::hash(m).as_bytes() != rec.digest {
            return Err(bad(format!("pack {i} digest")));
        }
    }
    for b in store.blobs() {
        let (pi, r) = manifest
            .blob_range(b.id, b.stored_len)
            .ok_or_else(|| bad(format!("blob {} placement", b.id)))?;
        let want = &store_bytes[b.offset as usize..(b.offset + b.stored_len) as usize];
        if maps[pi].get(r) != Some(want) {
            return Err(bad(format!("blob {} bytes", b.id)));
        }
    }
    Ok(())
}

/// For each capability the binary has SASS for, the packs the runtime reads from on such a
/// GPU, by the same choice it makes.
fn needs(
    store: &Store<'_>,
    kinds: &[PackKind],
    pack_of: &dyn Fn(usize) -> u32,
    name: &std::ffi::OsStr,
) -> Vec<(u32, Vec<String>)> {
    let mut caps: Vec<u32> = store
        .entries()
        .filter(|e| e.kind() == EntryKind::Sass)
        .map(|e| e.arch())
        .collect();
    caps.sort_unstable();
    caps.dedup();
    loads(store, &caps, pack_of)
        .into_iter()
        .map(|(cap, used)| {
            let names = used
                .iter()
                .map(|&p| format!("{}{}", name.to_string_lossy(), kinds[p as usize].suffix()))
                .collect();
            (cap, names)
        })
        .collect()
}

/// For each of `caps`, the packs (by index) the runtime reads from on a GPU of that
/// capability: for every module, the pack of the entry it chooses.
fn loads(
    store: &Store<'_>,
    caps: &[u32],
    pack_of: &dyn Fn(usize) -> u32,
) -> Vec<(u32, BTreeSet<u32>)> {
    let modules: Vec<(Vec<EntryId>, Vec<u32>)> = store
        .modules()
        .map(|m| {
            m.entries()
                .map(|e| (EntryId::new(e.kind(), e.arch(), e.variant()), e.blob_id()))
                .unzip()
        })
        .collect();
    caps.iter()
        .map(|&cap| {
            let used = modules
                .iter()
                .filter_map(|(cands, blobs)| {
                    select::choose(cap, cands, None).map(|i| pack_of(blobs[i] as usize))
                })
                .collect();
            (cap, used)
        })
        .collect()
}

/// A writer that counts and hashes what passes through.
struct Hashing<W: Write> {
    inner: W,
    hasher: blake3::Hasher,
    len: u64,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: blake3::Hasher::new(),
            len: 0,
        }
    }

    fn pad_to_8(&mut self) -> std::io::Result<()> {
        let pad = (self.len.div_ceil(8) * 8 - self.len) as usize;
        self.write_all(&[0u8; 8][..pad])
    }

    fn finish(mut self) -> std::io::Result<(u64, [u8; 32])> {
        self.inner.flush()?;
        Ok((self.len, *self.hasher.finalize().as_bytes()))
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

const _: () = assert!(PACK_HEADER_LEN % 8 == 0);
