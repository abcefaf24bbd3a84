//! The store of the binary this runtime copy is linked into, checked against the slot the
//! glue object carries in memory.
//!
//! Where the store is comes from the slot (`fatpack_format::link::StoreSlot`):
//! - **mapped** (what `fatpack ld` makes wherever the linker left it a program header): a
//!   read-only `PT_LOAD` after everything else the image loads, reached through the slot's
//!   relative address. No file is opened, so nothing can go wrong with paths: launching
//!   through ld.so, renaming or deleting the file, a `chdir`, strip tools (the section is
//!   allocated, so they keep it).
//! - **section** or **side file**: read through the file, which is resolved from the kernel's
//!   own record of what is mapped (`/proc/self/maps`; never the current directory) and
//!   opened at the first registration (program or library load), not at first use: a file
//!   replaced by rename afterwards, as package managers do, does not matter. Only regular
//!   files are opened, without blocking.
//!
//! A **split** binary (`fatpack split`) keeps a manifest where its store was: the store's
//! detached index plus where each blob now is, in pack files `<binary>.sm_90.fatpack`, ...
//! next to the binary's real path (from `/proc/self/maps`, never the current directory).
//! The packs are opened at the first registration too (regular files only, without
//! blocking) and mapped when a blob in them is first needed; a missing one is an error only
//! for the modules that need it, naming the pack.
//!
//! Whatever the source, `Store::parse` copies and verifies the header and index once, and
//! every blob is verified after decompression into memory of our own, so rewriting the file
//! in place cannot change what was checked.

use super::hash::Overlapped;
use super::sys::{self, open_regular, show, Fd, Once};
use crate::prelude::*;

use cubin_store::{EntryView, Store};

use fatpack_format::elf;
use fatpack_format::link::{
    StoreLocation, StoreSlot, DIGEST_SECTION, SIDE_FILE_SUFFIX, STORE_SECTION,
};
use fatpack_format::split::{self, Manifest};

extern "C" {
    /// The glue object's slot in its allocated section `.fatpack_digest`, hidden, patched by
    /// `fatpack ld` after the link. Hidden matters: each packed library must read its own.
    static __fatpack_store_digest: [u8; StoreSlot::LEN];
}

pub(crate) struct Image {
    pub store: Store<'static>,
    /// Where the store was found, for messages.
    pub origin: String,
    /// For a split binary: its manifest and packs.
    split: Option<&'static Split>,
}

struct Split {
    manifest: Manifest<'static>,
    packs: Vec<Pack>,
}

/// One pack of a split binary: opened at the first registration, mapped at first use.
struct Pack {
    path: Vec<u8>,
    file: Result<Fd, String>,
    bytes: Once<Result<&'static [u8], String>>,
}

/// Why an entry could not be read.
pub(crate) enum ReadError {
    /// Its pack is missing or unusable: (pack path, why); the path's suffix says what the
    /// pack holds.
    Pack(Vec<u8>, String),
    Other(String),
}

/// A store that lives in a file: the file, opened at the first registration.
struct Opened {
    file: Fd,
    /// The object's path (for the section) or the side file's, for messages.
    path: Vec<u8>,
}

static OPENED: Once<Result<Opened, String>> = Once::new();
static SOURCE: Once<Result<(&'static [u8], String), String>> = Once::new();
static SPLIT: Once<Result<Split, String>> = Once::new();
static IMAGE: Once<Result<Image, String>> = Once::new();

fn slot() -> StoreSlot {
    // SAFETY: the glue object defines the symbol as StoreSlot::LEN bytes; volatile because
    // the bytes are patched in the file after compilation, so no compiler may assume the
    // placeholder.
    let bytes = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(__fatpack_store_digest)) };
    StoreSlot::read(&bytes).unwrap_or_default()
}

/// Called at each registration of a packed module: for a store in a file, resolves and
/// opens that file now, while it is still the one this image was loaded from. Nothing is
/// read or mapped; a mapped store needs nothing at all.
pub(crate) fn prepare() {
    if !slot().is_mapped() {
        opened();
    }
    if let Ok((bytes, origin)) = source() {
        if split::is_manifest(bytes) {
            split_of(bytes, origin);
        }
    }
}

/// A split binary's manifest, read once, and the packs it names, each opened now if it is
/// there.
fn split_of(manifest: &'static [u8], origin: &str) -> &'static Result<Split, String> {
    SPLIT.get_or_init(|| {
        let manifest = Manifest::parse(manifest)
            .map_err(|e| format!("the device code store ({origin}) is damaged: {e}"))?;
        let me = self_object()?;
        let object = object_path(&me)?;
        let packs = manifest
            .packs
            .iter()
            .map(|rec| {
                let mut path = object.clone();
                path.extend_from_slice(rec.suffix.as_bytes());
                let file = open_regular(&path);
                if let Err(e) = &file {
                    debug!("pack: {e}");
                }
                Pack {
                    path,
                    file,
                    bytes: Once::new(),
                }
            })
            .collect();
        Ok(Split { manifest, packs })
    })
}

fn opened() -> &'static Result<Opened, String> {
    OPENED.get_or_init(|| {
        let r = open_file(slot().location);
        if let Err(e) = &r {
            debug!("store file: {e}");
        }
        r
    })
}

/// Opened once per runtime copy; a failure is kept too (the file will not get better).
pub(crate) fn get() -> Result<&'static Image, &'static str> {
    IMAGE
        .get_or_init(|| {
            let r = load();
            match &r {
                Ok(i) => debug!(
                    "store: {} ({} modules, {} entries, {} blobs)",
                    i.origin,
                    i.store.module_count(),
                    i.store.entry_count(),
                    i.store.blob_count()
                ),
                Err(e) => debug!("store unusable: {e}"),
            }
            r
        })
        .as_ref()
        .map_err(String::as_str)
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The loaded object that contains this runtime copy (found by one of our functions).
type SelfObject = super::sys::LoadedObject;

fn self_object() -> Result<SelfObject, String> {
    super::sys::object_containing(self_object as *const () as usize)
        .ok_or_else(|| "cannot find the loaded object that contains the fatpack runtime".into())
}

/// The file mapped at `addr`, as the kernel records it in /proc/self/maps: an absolute,
/// resolved path (whatever relative name the object was loaded by, whatever the current
/// directory is now), and whether the file has been deleted or replaced since.
fn maps_path(addr: usize) -> Option<(Vec<u8>, bool)> {
    let maps = sys::read_file(b"/proc/self/maps")?;
    for line in maps.split(|&b| b == b'\n') {
        let mut f = line.splitn(6, |&b| b == b' ');
        let range = f.next()?;
        let dash = range.iter().position(|&b| b == b'-')?;
        let hexnum = |b: &[u8]| usize::from_str_radix(core::str::from_utf8(b).ok()?, 16).ok();
        let (a, b) = (hexnum(&range[..dash])?, hexnum(&range[dash + 1..])?);
        if !(a..b).contains(&addr) {
            continue;
        }
        let path = f.nth(4)?.trim_ascii_start();
        if path.first() != Some(&b'/') {
            return None;
        }
        return Some(match path.strip_suffix(b" (deleted)") {
            Some(p) => (p.to_vec(), true),
            None => (path.to_vec(), false),
        });
    }
    None
}

/// The path of the file this image was loaded from; never relative to the current
/// directory.
fn object_path(me: &SelfObject) -> Result<Vec<u8>, String> {
    if let Some((p, deleted)) = maps_path(me.addr) {
        if deleted {
            return Err(format!(
                "{} was deleted or replaced after it was loaded, before its device code \
                 could be found",
                show(&p)
            ));
        }
        return Ok(p);
    }
    // No /proc/self/maps (a sandbox without /proc): the loader's own record, if absolute.
    if me.name.is_empty() {
        return sys::read_link(b"/proc/self/exe")
            .map_err(|e| format!("cannot resolve the program's path: {e}"));
    }
    if me.name.first() == Some(&b'/') {
        Ok(me.name.clone())
    } else {
        Err(format!(
            "cannot resolve {} to an absolute path (no /proc/self/maps)",
            show(&me.name)
        ))
    }
}

fn open_file(location: StoreLocation) -> Result<Opened, String> {
    let me = self_object()?;
    let path = object_path(&me)?;
    let side = || {
        let mut s = path.clone();
        s.extend_from_slice(SIDE_FILE_SUFFIX.as_bytes());
        s
    };
    let try_side = |why: String| -> Result<Opened, String> {
        let side = side();
        match open_regular(&side) {
            Ok(file) => Ok(Opened { file, path: side }),
            Err(e) => Err(format!(
                "no device code store: {why}; side file: {e} (was it installed next to the \
                 binary?)"
            )),
        }
    };
    match location {
        StoreLocation::SideFile => {
            try_side(format!("{} keeps its store in a side file", show(&path)))
        }
        StoreLocation::Section | StoreLocation::Mapped => {
            let file = open_regular(&path)?;
            Ok(Opened { file, path })
        }
        // An unpatched slot: the digest check reports it; look where older outputs kept it.
        StoreLocation::Unknown => match open_regular(&path) {
            Ok(file) => Ok(Opened { file, path }),
            Err(e) => try_side(e),
        },
    }
}

/// The mapped store's bytes, after checking they lie inside this image's own segments.
fn mapped_bytes(me: &SelfObject, s: &StoreSlot) -> Result<&'static [u8], String> {
    let at = core::ptr::addr_of!(__fatpack_store_digest) as usize;
    let start = at.wrapping_add(s.store_rel as usize);
    let len = usize::try_from(s.store_len).map_err(|_| "mapped store too large")?;
    let end = start.checked_add(len).ok_or("mapped store wraps around")?;
    if !me.loads.iter().any(|&(a, b)| a <= start && end <= b) {
        return Err(format!(
            "the slot places the store at {start:#x}..{end:#x}, outside every segment of \
             this image (was a program header removed?)"
        ));
    }
    // SAFETY: the range lies inside a PT_LOAD of this very object, mapped read-only by the
    // loader for as long as this code is (the code reading it is in the same object).
    Ok(unsafe { core::slice::from_raw_parts(start as *const u8, len) })
}

/// The bytes where the store is (a store, or a split manifest) and a description of where.
fn source() -> Result<(&'static [u8], &'static str), &'static str> {
    SOURCE
        .get_or_init(find_source)
        .as_ref()
        .map(|(b, o)| (*b, o.as_str()))
        .map_err(String::as_str)
}

fn find_source() -> Result<(&'static [u8], String), String> {
    let slot = slot();
    Ok(if slot.is_mapped() {
        let me = self_object()?;
        let whose = if me.name.is_empty() {
            "the program".to_owned()
        } else {
            String::from_utf8_lossy(&me.name).into_owned()
        };
        (
            mapped_bytes(&me, &slot)?,
            format!("mapped with the image of {whose}"),
        )
    } else {
        let o = opened().as_ref().map_err(String::clone)?;
        let file = sys::map(&o.file, &o.path)?;
        let is_elf = file.get(..4) == Some(b"\x7fELF");
        if is_elf {
            match elf::find_section(file, STORE_SECTION)
                .map_err(|e| format!("{}: {e}", show(&o.path)))?
            {
                Some(r) => (
                    &file[r],
                    format!("section {STORE_SECTION} of {}", show(&o.path)),
                ),
                None => {
                    return Err(format!(
                        "no device code store: {} has no {STORE_SECTION} section",
                        show(&o.path)
                    ))
                }
            }
        } else {
            (file, show(&o.path))
        }
    })
}

fn load() -> Result<Image, String> {
    let slot = slot();
    let (bytes, origin) = source().map_err(str::to_owned)?;
    let origin = origin.to_owned();
    let (bytes, split) = if split::is_manifest(bytes) {
        let split = split_of(bytes, &origin).as_ref().map_err(String::clone)?;
        (split.manifest.skeleton, Some(split))
    } else {
        (bytes, None)
    };
    let parsed = match split {
        Some(_) => Store::parse_skeleton(bytes),
        None => Store::parse(bytes),
    };
    let store = parsed.map_err(|e| format!("the device code store ({origin}) is damaged: {e}"))?;
    if split
        .as_ref()
        .is_some_and(|s| s.manifest.placements.len() != store.blob_count())
    {
        return Err(format!(
            "the device code store ({origin}) is damaged: its split manifest does not place \
             every blob"
        ));
    }
    if slot.digest == [0; 32] {
        return Err(format!(
            "{DIGEST_SECTION} holds no store digest (the binary was not finished by fatpack ld)"
        ));
    }
    let got = store.digest();
    if got != slot.digest {
        return Err(format!(
            "the device code store ({origin}) does not belong to this binary: digest {} \
             but the binary expects {} (stale or replaced store)",
            hex(&got),
            hex(&slot.digest)
        ));
    }
    Ok(Image {
        store,
        origin,
        split,
    })
}

/// Which package holds the pack at `pack_path` and the command that installs it, in words,
/// from the install hint file beside this binary (`fatpack split` of a package writes it
/// into the host package), if there is one. Only for the message of a missing pack.
#[cold]
pub(crate) fn install_hint(pack_path: &[u8]) -> Option<String> {
    let split = SPLIT.get()?.as_ref().ok()?;
    let pi = split.packs.iter().position(|p| p.path == pack_path)?;
    let suffix = &split.manifest.packs[pi].suffix;
    let mut hint = pack_path.strip_suffix(suffix.as_bytes())?.to_vec();
    hint.extend_from_slice(split::HINT_SUFFIX.as_bytes());
    let text = sys::read_file_max(&hint, split::HINT_MAX)?;
    let (package, command) = split::find_hint(&text, suffix)?;
    Some(format!(
        "it is in package {}: {}",
        show(package),
        show(command)
    ))
}

impl Image {
    /// The stored bytes of one entry, unchecked: from the store itself, or from the pack that
    /// holds them (mapped and checked against the manifest at its first use), with that
    /// pack's index.
    pub(crate) fn stored_entry(
        &self,
        e: &EntryView<'_>,
    ) -> Result<(&'static [u8], Option<usize>), ReadError> {
        let Some(split) = &self.split else {
            let stored = self
                .store
                .stored_bytes(e)
                .map_err(|err| ReadError::Other(err.to_string()))?;
            return Ok((stored, None));
        };
        let (pi, range) = split
            .manifest
            .blob_range(e.blob_id(), e.stored_len())
            .ok_or_else(|| ReadError::Other("the split manifest misplaces it".into()))?;
        let pack = &split.packs[pi];
        let fail = |why: String| ReadError::Pack(pack.path.clone(), why);
        let bytes = self
            .pack_bytes(split, pi)
            .as_ref()
            .map_err(|e| fail(e.clone()))?;
        let stored = bytes
            .get(range)
            .ok_or_else(|| fail("shorter than the binary records".into()))?;
        Ok((stored, Some(pi)))
    }

    /// Maps and checks every pack of a split binary that is installed, as a load's first read
    /// of each would (a damaged one gives that load the same error): decoding ahead calls this
    /// on the application's thread, so that its helper can read them without the one-time
    /// set-up a fork could leave half-done.
    pub(crate) fn map_installed_packs(&self) {
        let Some(split) = &self.split else {
            return;
        };
        for (pi, pack) in split.packs.iter().enumerate() {
            if pack.file.is_ok() {
                let _ = self.pack_bytes(split, pi);
            }
        }
    }

    /// Pack `pi`'s bytes, mapped and checked against the manifest once.
    fn pack_bytes<'s>(&self, split: &'s Split, pi: usize) -> &'s Result<&'static [u8], String> {
        let pack = &split.packs[pi];
        pack.bytes.get_or_init(|| {
            let file = pack.file.as_ref().map_err(String::clone)?;
            let m = sys::map(file, &pack.path)?;
            let rec = &split.manifest.packs[pi];
            split::check_pack(m, pi as u32, &self.store.digest(), rec.len)
                .map_err(|e| format!("{} {e}", show(&pack.path)))?;
            Ok(m)
        })
    }

    /// Whether an entry's stored bytes are in memory already: always in a store, for a split
    /// binary once its pack was mapped.
    pub(crate) fn is_mapped(&self, e: &EntryView<'_>) -> bool {
        let Some(split) = &self.split else {
            return true;
        };
        split
            .manifest
            .blob_range(e.blob_id(), e.stored_len())
            .is_some_and(|(pi, _)| split.packs[pi].bytes.get().is_some())
    }

    /// Decodes one entry into `out` (exactly its raw length) and checks it against the
    /// verified index. `given`: its stored bytes as the caller already copied them (the
    /// bytes a driver was handed), else they are read where they are kept.
    pub(crate) fn read_entry_into(
        &self,
        e: &EntryView<'_>,
        given: Option<&[u8]>,
        out: &mut [u8],
    ) -> Result<(), ReadError> {
        let (stored, pack) = match given {
            Some(g) => (g, None),
            None => self.stored_entry(e)?,
        };
        let sink = Overlapped::new(out.len());
        self.store
            .read_entry_from_into(e, stored, out, sink)
            .map_err(|err| match (pack, &self.split) {
                (Some(pi), Some(split)) => {
                    let path = &split.packs[pi].path;
                    ReadError::Pack(path.clone(), format!("{}: {err}", show(path)))
                }
                _ => ReadError::Other(err.to_string()),
            })
    }
}
