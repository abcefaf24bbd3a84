//! Reading a split binary from the command line: its manifest, the store's detached index,
//! and the packs next to it. `inspect`, `extract` and `join` read entries through this, so
//! every byte they report or write is checked against the index the binary carries. Here,
//! with the packed file's other readers, so that no command imports another to read one.

use std::path::{Path, PathBuf};

use cubin_store::{EntryView, Store};
use fatpack_format::split::{check_pack, Manifest};

/// A pack's state when it is not installed: normal, not a problem.
pub const MISSING: &str = "is missing";

use crate::inputs::read_file;

/// What is wrong with a split binary or one of its packs, read.
#[derive(Debug, thiserror::Error)]
pub enum SplitReadError {
    #[error("{}: pack {}: {message}", host.display(), pack.display())]
    Pack {
        host: PathBuf,
        pack: PathBuf,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Bad { path: PathBuf, message: String },
    #[error(transparent)]
    Store(#[from] crate::error::StoreAt),
}

pub struct SplitContents<'a> {
    /// The store as the binary records it, without its blobs.
    pub store: Store<'static>,
    pub manifest: Manifest<'a>,
    /// Each pack's path and its mapped bytes, or why it cannot be used.
    packs: Vec<(PathBuf, Result<Vec<u8>, String>)>,
    host: PathBuf,
}

impl<'a> SplitContents<'a> {
    /// `manifest` is what the binary at `host` keeps where its store was; `recorded` the
    /// digest its slot records. Packs are looked up as `<host><suffix>`; a missing or wrong
    /// pack is only an error when something in it is read.
    pub fn open(
        host: &Path,
        manifest: &'a [u8],
        recorded: &[u8; 32],
    ) -> Result<SplitContents<'a>, SplitReadError> {
        let bad = |message: String| SplitReadError::Bad {
            path: host.to_path_buf(),
            message,
        };
        let manifest = Manifest::parse(manifest).map_err(bad)?;
        let store = Store::parse_skeleton(manifest.skeleton).map_err(|source| {
            SplitReadError::Store(crate::error::StoreAt {
                path: host.to_path_buf(),
                source,
            })
        })?;
        if manifest.placements.len() != store.blob_count() {
            return Err(bad(format!(
                "the split manifest places {} blobs, the store has {}",
                manifest.placements.len(),
                store.blob_count()
            )));
        }
        if store.digest() != *recorded {
            return Err(bad(
                "the split manifest describes another store than the binary records".into(),
            ));
        }
        // Next to the file the host resolves to, as the runtime looks (it sees the real file).
        let real = std::fs::canonicalize(host).unwrap_or_else(|_| host.to_path_buf());
        let packs = manifest
            .packs
            .iter()
            .enumerate()
            .map(|(i, rec)| {
                let mut p = real.as_os_str().to_owned();
                p.push(&rec.suffix);
                let path = PathBuf::from(p);
                let m = read_file(&path).map_err(|e| match &e {
                    crate::inputs::InputError::Io { source, .. }
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        MISSING.to_string()
                    }
                    _ => e.to_string(),
                });
                let m = m.and_then(|m| {
                    check_pack(&m, i as u32, recorded, rec.len)?;
                    Ok(m)
                });
                (path, m)
            })
            .collect();
        Ok(SplitContents {
            store,
            manifest,
            packs,
            host: host.to_path_buf(),
        })
    }

    /// Packs that are missing or not this binary's, with the reason ([`MISSING`] for one that
    /// is not there: a machine is given only its GPUs' packs).
    pub fn unusable(&self) -> Vec<(&Path, &str)> {
        self.packs
            .iter()
            .filter_map(|(p, m)| m.as_ref().err().map(|e| (p.as_path(), e.as_str())))
            .collect()
    }

    pub fn pack_paths(&self) -> impl Iterator<Item = &Path> {
        self.packs.iter().map(|(p, _)| p.as_path())
    }

    fn pack_err(&self, pack: &Path, message: impl Into<String>) -> SplitReadError {
        SplitReadError::Pack {
            host: self.host.clone(),
            pack: pack.to_path_buf(),
            message: message.into(),
        }
    }

    /// The stored bytes of blob `id`, from its pack.
    pub fn blob_bytes(&self, id: u32) -> Result<&[u8], SplitReadError> {
        let b = self.store.blob(id).ok_or_else(|| SplitReadError::Bad {
            path: self.host.clone(),
            message: format!("no blob {id}"),
        })?;
        let (pi, range) =
            self.manifest
                .blob_range(id, b.stored_len)
                .ok_or_else(|| SplitReadError::Bad {
                    path: self.host.clone(),
                    message: format!("blob {id} is placed outside its pack"),
                })?;
        let (path, m) = &self.packs[pi];
        let m = m.as_ref().map_err(|e| self.pack_err(path, e.clone()))?;
        m.get(range)
            .ok_or_else(|| self.pack_err(path, "is shorter than the binary records"))
    }

    /// One entry, decoded and checked against the index.
    pub fn read_entry(&self, e: &EntryView<'_>) -> Result<Vec<u8>, SplitReadError> {
        let bytes = self.blob_bytes(e.blob_id())?;
        self.store.read_entry_from(e, bytes).map_err(|source| {
            SplitReadError::Store(crate::error::StoreAt {
                path: self.packs[self.manifest.placements[e.blob_id() as usize].pack as usize]
                    .0
                    .clone(),
                source,
            })
        })
    }

    /// Every pack present and whole: its blake3 as the binary records it.
    pub fn verify_packs(&self) -> Result<(), SplitReadError> {
        for ((path, m), rec) in self.packs.iter().zip(&self.manifest.packs) {
            let m = m.as_ref().map_err(|e| self.pack_err(path, e.clone()))?;
            if *blake3::hash(m).as_bytes() != rec.digest {
                return Err(self.pack_err(
                    path,
                    "its contents differ from what the binary records (damaged or replaced)",
                ));
            }
        }
        Ok(())
    }
}
