//! `fatpack join HOST -o OUT`: a split binary and its packs back into one packed binary, the
//! same bytes as before `fatpack split`.

use std::io::Write;
use std::path::{Path, PathBuf};

use cubin_store::{Store, StoreError};

use super::error::io_at;
use super::{verify_all, SplitContents, SplitError};
use crate::commit::{Outputs, Staged};
use crate::inputs::read_file;
use crate::packed::{self, side_path};

#[derive(Debug, Clone)]
pub struct JoinReport {
    pub output: PathBuf,
    pub side_file: Option<PathBuf>,
    pub len: u64,
    pub packs: usize,
}

/// Writes the store back from the packs (blobs at the offsets its index records).
fn assemble<W: Write>(c: &SplitContents<'_>, w: &mut W, host: &Path) -> Result<u64, SplitError> {
    let mut failed = None;
    let r = c.store.assemble(w, |id| {
        c.blob_bytes(id).map_err(|e| {
            failed = Some(e);
            StoreError::MalformedIndex(format!("blob {id} unavailable"))
        })
    });
    match (r, failed) {
        (_, Some(e)) => Err(e.into()),
        (Ok(n), None) => Ok(n),
        (Err(source), None) => Err(SplitError::Store(crate::error::StoreAt {
            path: host.to_path_buf(),
            source,
        })),
    }
}

pub fn join(host: &Path, output: &Path) -> Result<JoinReport, SplitError> {
    let outs = Outputs::new(&[host]);
    outs.check(output)?;
    let map = read_file(host)?;
    let data: &[u8] = &map;
    let located =
        packed::locate(host, data)?.ok_or_else(|| SplitError::NotPacked(host.to_path_buf()))?;
    let manifest_bytes = located.store.bytes();
    if !fatpack_format::split::is_manifest(manifest_bytes) {
        return Err(SplitError::NotSplit(host.to_path_buf()));
    }
    let recorded = located.recorded_digest;
    let contents = SplitContents::open(host, manifest_bytes, &recorded)?;
    contents.verify_packs()?;

    let temp = |dest: &Path| outs.file(dest);
    let out_tmp = temp(output)?;
    std::fs::write(out_tmp.path(), data).map_err(io_at(output))?;
    let embedded = located.store.is_section();
    let side = side_path(output);
    let side_tmp = if embedded {
        packed::replace_store(out_tmp.path(), &recorded, located.slot.is_mapped(), |w| {
            assemble(&contents, w, host)
        })?;
        None
    } else {
        let mut t = temp(&side)?;
        use std::os::unix::fs::PermissionsExt;
        t.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .map_err(io_at(&side))?;
        let mut w = std::io::BufWriter::new(t.named().as_file_mut());
        assemble(&contents, &mut w, host)?;
        w.flush().map_err(io_at(&side))?;
        drop(w);
        Some(t)
    };

    // The joined store must be whole and the binary's before it replaces anything.
    {
        let out_map = read_file(out_tmp.path())?;
        let side_map = side_tmp.as_ref().map(|t| read_file(t.path())).transpose()?;
        let lost = |what: &str| SplitError::Bad {
            path: output.to_path_buf(),
            message: format!("the joined binary lost its {what}"),
        };
        let slot = packed::recorded_slot(&out_map).ok_or_else(|| lost("slot"))?;
        let bytes = match &side_map {
            Some(m) => &m[..],
            None => packed::section_bytes(&out_map).ok_or_else(|| lost("store section"))?,
        };
        let store = Store::parse(bytes).map_err(|source| {
            SplitError::Store(crate::error::StoreAt {
                path: output.to_path_buf(),
                source,
            })
        })?;
        if store.digest() != recorded || slot.digest != recorded {
            return Err(SplitError::Bad {
                path: output.to_path_buf(),
                message: "the joined store's digest is not the one the binary records".into(),
            });
        }
        verify_all(&store, output)?;
    }

    out_tmp.permissions_of(host)?;
    // Measured before the commit: once in place, another writer may replace it.
    let len = out_tmp.as_file().metadata().map_err(io_at(output))?.len();
    let side_file = side_tmp.as_ref().map(|_| side.clone());
    let mut set: Vec<Staged> = side_tmp.into_iter().collect();
    set.push(out_tmp);
    outs.commit(set)?;
    Ok(JoinReport {
        output: output.to_path_buf(),
        side_file,
        len,
        packs: contents.manifest.packs.len(),
    })
}
