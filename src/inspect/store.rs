//! Inspecting a fatpack store: its modules and entries, straight from the index, with each
//! blob decompressed (and so digest-checked) to count its kernels.

use cubin_store::{EntryKind as StoreKind, Store};

use super::report::{payload_report, InspectError, ModuleReport};
use crate::fatbin::EntryKind;

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
            let kind = match meta.kind {
                StoreKind::Sass => EntryKind::Elf,
                StoreKind::Ptx => EntryKind::Ptx,
                StoreKind::Other(c) => EntryKind::Other(c),
            };
            entries.push(payload_report(
                kind,
                meta.arch_name(),
                "zstd",
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
