//! Inspecting a fatpack store: its modules and entries, straight from the index, with each
//! blob decompressed (and so digest-checked) to count its kernels.

use cubin_store::Store;

use std::path::Path;

use super::report::{
    payload_report, summarise, FileReport, InspectError, ModuleReport, PackInfo, PackedInfo,
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
                meta.id.kind,
                meta.arch_name(),
                &e.codec().to_string(),
                &raw,
                e.stored_share(),
            ));
        }
        out.push(ModuleReport {
            loaded_by: "fatpack",
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
    if fatpack_format::split::is_manifest(store_bytes) {
        return inspect_split(path, shown, kind, &p, &label).map(Some);
    }
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
        packs: Vec::new(),
    });
    Ok(Some(report))
}

/// A split binary: modules and entries from the index it carries, each entry read (and so
/// checked) from its pack where the pack is present; entries whose pack is not there are
/// listed from the index with `compression` saying so.
fn inspect_split(
    path: &Path,
    shown: &str,
    kind: FileKind,
    p: &packed::Packed<'_>,
    label: &str,
) -> Result<FileReport, InspectError> {
    let split_err = |e: crate::packed::SplitReadError| InspectError::Split {
        path: label.to_string(),
        message: e.to_string(),
    };
    let c = crate::packed::SplitContents::open(path, p.store.bytes(), &p.recorded_digest)
        .map_err(split_err)?;
    let unusable: Vec<(String, String)> = c
        .unusable()
        .into_iter()
        .map(|(p, why)| (p.display().to_string(), why.to_string()))
        .collect();
    let mut modules = Vec::new();
    for (index, m) in c.store.modules().enumerate() {
        let mut entries = Vec::new();
        for e in m.entries() {
            let meta = e.meta();
            let pack = c.manifest.placements[e.blob_id() as usize].pack as usize;
            let pack_path = c.pack_paths().nth(pack).map(|p| p.display().to_string());
            let missing = unusable.iter().any(|(u, _)| Some(u) == pack_path.as_ref());
            let codec = e.codec().to_string();
            if missing {
                let mut r =
                    payload_report(meta.id.kind, meta.arch_name(), "", &[], e.stored_share());
                r.raw_size = e.raw_len();
                r.compression = codec;
                r.not_decoded = Some(format!(
                    "its pack {} is missing",
                    pack_path.as_deref().unwrap_or("?")
                ));
                entries.push(r);
            } else {
                let raw = c.read_entry(&e).map_err(split_err)?;
                entries.push(payload_report(
                    meta.id.kind,
                    meta.arch_name(),
                    &codec,
                    &raw,
                    e.stored_share(),
                ));
            }
        }
        modules.push(ModuleReport {
            loaded_by: "fatpack",
            origin: m.name().to_string(),
            section: String::new(),
            index,
            entries,
        });
    }
    let stats = c.store.stats();
    let mut report = summarise(shown.to_string(), kind, modules, Some(stats.stored_bytes));
    let packs = c
        .pack_paths()
        .zip(&c.manifest.packs)
        .map(|(pp, rec)| {
            let shown = pp.display().to_string();
            let state = unusable
                .iter()
                .find(|(u, _)| *u == shown)
                .map_or_else(|| "ok".to_string(), |(_, why)| why.clone());
            PackInfo {
                path: shown,
                holds: rec.kind.describe(),
                size: rec.len,
                state,
            }
        })
        .collect();
    let digest = c.store.digest();
    report.packed = Some(PackedInfo {
        store: format!("{} (split manifest)", p.store.describe()),
        store_size: p.store.bytes().len() as u64,
        mapped: p.store.is_section() && p.slot.is_mapped(),
        digest: hex(&digest),
        digest_matches: digest == p.recorded_digest,
        packs,
    });
    Ok(report)
}
