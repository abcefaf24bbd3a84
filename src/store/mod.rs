//! From the fatbin model to the store: each extracted container becomes a store module, each
//! entry a blob of its decompressed payload, with the entry's original header kept in `attrs`
//! so the runtime can rebuild a fatbin nvcc's runtime accepts.

use std::io::{Seek, Write};

use cubin_store::{EntryMeta, NewEntry, StoreSummary, StoreWriter, WriteOptions};

use crate::fatbin::{DecompressError, Entry};
use crate::inputs::Maps;
use crate::rewrite::Extracted;

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("{origin}: module {module}: {source}")]
    Payload {
        origin: String,
        module: String,
        #[source]
        source: DecompressError,
    },
    #[error("{origin}: changed on disk during the link")]
    Changed { origin: String },
    #[error(transparent)]
    Input(#[from] crate::inputs::InputError),
    #[error("writing the store: {0}")]
    Store(#[from] cubin_store::StoreError),
}

/// The store entry metadata for a fatbin entry.
pub fn entry_meta(e: &Entry) -> EntryMeta {
    let mut attrs = Vec::with_capacity(e.header_len());
    // The header as written for the stored (uncompressed) payload.
    let plain = Entry {
        stored: Vec::new(),
        ..e.clone()
    };
    plain.write_to(&mut attrs);
    EntryMeta {
        kind: e.kind(),
        arch: e.header.arch_number,
        variant: e.arch().variant,
        attrs,
    }
}

/// Add one extracted container as a module, reading it back from its file.
pub fn add_module<W: Write + Seek>(
    w: &mut StoreWriter<W>,
    m: &Extracted,
    maps: &Maps,
) -> Result<(), PackError> {
    let map = maps.get(&m.file)?;
    let bytes = usize::try_from(m.file_offset)
        .ok()
        .and_then(|start| map.get(start..start.checked_add(m.len as usize)?))
        .ok_or_else(|| PackError::Changed {
            origin: m.origin.clone(),
        })?;
    let (fatbin, _) = crate::fatbin::parse_one(bytes, 0).map_err(|_| PackError::Changed {
        origin: m.origin.clone(),
    })?;
    let id = w.add_module(&m.module)?;
    let mut raws = Vec::with_capacity(fatbin.entries.len());
    for e in &fatbin.entries {
        raws.push(e.payload().map_err(|source| PackError::Payload {
            origin: m.origin.clone(),
            module: m.module.clone(),
            source,
        })?);
    }
    // One module's entries compress in parallel (same bytes as one at a time); memory
    // stays at one module's device code.
    let batch = fatbin
        .entries
        .iter()
        .zip(&raws)
        .map(|(e, raw)| NewEntry {
            module: id,
            meta: entry_meta(e),
            raw,
        })
        .collect();
    w.add_entries(batch, 0)?;
    Ok(())
}

/// Write a whole store of `modules` (in this order) to `out`; `before(i)` hears of each
/// module as its turn comes (progress display).
pub fn write_store<W: Write + Seek>(
    out: W,
    modules: &[&Extracted],
    opts: WriteOptions,
    maps: &Maps,
    before: &mut dyn FnMut(usize),
) -> Result<(W, StoreSummary), PackError> {
    let mut w = StoreWriter::new(out, opts)?;
    for (i, m) in modules.iter().enumerate() {
        before(i);
        add_module(&mut w, m, maps)?;
    }
    Ok(w.finish()?)
}
