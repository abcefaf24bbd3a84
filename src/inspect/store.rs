//! Inspecting a fatpack store: its modules and entries, straight from the index, with each
//! blob decompressed (and so digest-checked) to count its kernels.

use cubin_store::Store;

use std::path::Path;

use super::report::{
    payload_report, summarise, FileReport, InspectError, ModuleReport, PackedInfo,
};
use crate::inputs::FileKind;
use crate::packed;

fn store_err(path: &str) -> impl Fn(cubin_store::StoreError) -> InspectError + '_ {
    move |source| InspectError::Store {
        path: path.to_string(),
        source,
    }
}

pub(super) fn modules(path: &str, data: &[u8]) -> Result<Vec<ModuleReport>, InspectError> {
    let store = Store::parse(data).map_err(store_err(path))?;
    let mut out = Vec::new();
    for (index, m) in store.modules().enumerate() {
        let mut entries = Vec::new();
        for e in m.entries() {
            let raw = store.read_entry(&e).map_err(store_err(path))?;
            let meta = e.meta();
            entries.push(payload_report(
                meta.kind,
                meta.arch_name(),
                &e.codec().to_string(),
                &raw,
                e.stored_len(),
            ));
        }
        out.push(ModuleReport {
            origin: m.name().to_string(),
            section: String::new(),
            index,
            entries,
        });
    }
    Ok(out)
}

pub(super) fn unique_stored_bytes(path: &str, data: &[u8]) -> Result<u64, InspectError> {
    let store = Store::parse(data).map_err(store_err(path))?;
    Ok(store.stats().stored_bytes)
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// A file `fatpack ld` produced: its store (inside, or beside it) and the recorded digest.
/// `None` when the file is not packed.
pub(super) fn inspect_packed(
    path: &Path,
    shown: &str,
    kind: FileKind,
    data: &[u8],
) -> Result<Option<FileReport>, InspectError> {
    let located = packed::locate(path, data)?;
    let Some(p) = located else {
        return Ok(None);
    };
    let (store_bytes, store_name) = (p.store.bytes(), p.store.describe());
    let recorded = p.recorded_digest;
    let label = format!("{shown} [{store_name}]");
    let modules = modules(&label, store_bytes)?;
    let store = Store::parse(store_bytes).map_err(store_err(&label))?;
    let digest = store.digest();
    let mut report = summarise(
        shown.to_string(),
        kind,
        modules,
        Some(store.stats().stored_bytes),
    );
    report.packed = Some(PackedInfo {
        store: store_name,
        store_size: store_bytes.len() as u64,
        mapped: p.store.is_section() && p.slot.is_mapped(),
        digest: hex(&digest),
        digest_matches: digest == recorded,
    });
    Ok(Some(report))
}
