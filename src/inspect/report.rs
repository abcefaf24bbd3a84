//! The report model: built from a scanned file, serialised as JSON or drawn as a table.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::arch::EntryId;
use crate::fatbin::{DecompressError, Entry, EntryKind};
use crate::inputs::{FileKind, InputError};
use crate::{cubin, ptx};

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{origin}: module {module}: {source}")]
    Payload {
        origin: String,
        module: usize,
        #[source]
        source: DecompressError,
    },
    #[error(transparent)]
    Packed(#[from] crate::packed::OutputError),
    #[error("{path}: {source}")]
    Store {
        path: String,
        #[source]
        source: cubin_store::StoreError,
    },
    /// A split binary whose manifest or packs are wrong (the message names the file).
    #[error("{path}: {message}")]
    Split { path: String, message: String },
    /// A package (folder, wheel, conda package) that does not read, or one of its files.
    #[error("{path}: {message}")]
    Package { path: String, message: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct Kernel {
    pub mangled: String,
    pub demangled: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryReport {
    /// `sm_90a` or `compute_90`
    pub arch: String,
    /// `sass`, `ptx` or `other`
    pub kind: String,
    /// Relocatable device code (`-rdc=true`, before device link).
    pub relocatable: bool,
    /// How the payload is stored in the file: `none`, `lz4`, `zstd`.
    pub compression: String,
    pub raw_size: u64,
    pub stored_size: u64,
    pub kernel_count: usize,
    pub kernels: Vec<Kernel>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// Why the payload was not decoded (an obfuscated NVVM entry): sizes are the header's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_decoded: Option<String>,
    /// No GPU would ever load it: for every GPU that could run it, its module has a better
    /// entry (the runtime's selection, fatpack-format's `select::live`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dead: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleReport {
    /// The file or archive member, `libfoo.a(foo.o)`.
    pub origin: String,
    /// The section it came from, empty for standalone files.
    pub section: String,
    /// Which container of that section (a linked file has one per translation unit).
    pub index: usize,
    /// Who loads it: `cudart` (registered by the host code nvcc generated, from
    /// `.nv_fatbin`) or `program` (found in the program's own data, e.g. a library's
    /// `.data`, and loaded by the program itself through the driver API).
    pub loaded_by: &'static str,
    pub entries: Vec<EntryReport>,
}

/// The containers of one section.
#[derive(Debug, Clone, Serialize)]
pub struct SectionTotal {
    pub section: String,
    pub loaded_by: &'static str,
    pub containers: usize,
    pub stored_size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArchTotal {
    pub arch: String,
    pub kind: String,
    pub entries: usize,
    pub raw_size: u64,
    pub stored_size: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub modules: usize,
    pub entries: usize,
    pub raw_size: u64,
    /// Bytes the device code takes in the file; for stores, each shared blob counted once.
    pub stored_size: u64,
    /// Distinct kernels (by mangled name) over every entry: a kernel built for five archs
    /// counts once.
    pub kernels: usize,
    /// Entries no GPU would ever load (`fatpack prune --dead` drops them), and their bytes.
    pub dead_entries: usize,
    pub dead_stored_size: u64,
}

/// Where a packed file's store is and whether it matches the digest the file records.
#[derive(Debug, Clone, Serialize)]
pub struct PackedInfo {
    /// `.fatpack` inside the file, or the side file's path.
    pub store: String,
    pub store_size: u64,
    /// The store is mapped with the image (its own read-only `PT_LOAD`): the runtime reads
    /// it from memory, no file needed.
    pub mapped: bool,
    pub digest: String,
    pub digest_matches: bool,
    /// For a split binary (`fatpack split`): its packs, each with its state.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packs: Vec<PackInfo>,
}

/// One pack of a split binary.
#[derive(Debug, Clone, Serialize)]
pub struct PackInfo {
    pub path: String,
    /// `sm_90`, `PTX`, ...
    pub holds: String,
    pub size: u64,
    /// `ok`, or why it cannot be used (`is missing`, `belongs to another build`, ...).
    pub state: String,
}

/// The version of the `--json` layout (docs/inspect-json.md); raised on any change that is
/// not a new field.
pub const JSON_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// [`JSON_VERSION`].
    pub json_version: u32,
    pub path: String,
    pub kind: FileKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packed: Option<PackedInfo>,
    pub modules: Vec<ModuleReport>,
    /// Per section holding containers, in file order: how many, their bytes, who loads them.
    pub sections: Vec<SectionTotal>,
    pub per_arch: Vec<ArchTotal>,
    pub totals: Totals,
    /// With `inspect --for CAPS`: what `prune --for CAPS` would keep of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_keep: Option<WouldKeep>,
}

/// What `prune --for` would keep of a file (`inspect --for`).
#[derive(Debug, Clone, Serialize)]
pub struct WouldKeep {
    /// The capabilities, as given.
    pub caps: String,
    pub entries: usize,
    pub stored_size: u64,
    /// The entries kept, as `module:arch`: what a GPU of these capabilities loads.
    pub kept: Vec<String>,
    /// Kept entries that cannot be read here (a split binary's pack that is not installed).
    pub not_installed: Vec<String>,
}

pub(super) fn kernels_of(names: Vec<String>) -> Vec<Kernel> {
    names
        .into_iter()
        .map(|m| Kernel {
            demangled: super::demangle(&m),
            mangled: m,
        })
        .collect()
}

fn kind_name(k: EntryKind) -> &'static str {
    match k {
        EntryKind::Ptx => "ptx",
        EntryKind::Sass => "sass",
        EntryKind::Other(fatpack_format::fatbin::KIND_NVVM) => "nvvm",
        EntryKind::Other(_) => "other",
    }
}

/// Describe one payload's contents (kernel names, relocatable or not).
fn describe_payload(kind: EntryKind, payload: &[u8]) -> (bool, Vec<Kernel>) {
    match kind {
        EntryKind::Sass => match cubin::read(payload) {
            Ok(info) => (info.relocatable, kernels_of(info.kernels)),
            Err(_) => (false, Vec::new()),
        },
        EntryKind::Ptx => (false, kernels_of(ptx::kernels(payload))),
        EntryKind::Other(_) => (false, Vec::new()),
    }
}

pub(super) fn entry_report(e: &Entry, payload: &[u8]) -> EntryReport {
    let (relocatable, kernels) = describe_payload(e.kind(), payload);
    EntryReport {
        arch: e.arch_name(),
        kind: kind_name(e.kind()).to_string(),
        relocatable,
        compression: e.compression().name().to_string(),
        raw_size: e.raw_len(),
        stored_size: e.stored_len(),
        kernel_count: kernels.len(),
        kernels,
        options: e.options(),
        identifier: e.identifier(),
        not_decoded: None,
        dead: false,
    }
}

/// Marks the entries of `m` that no GPU would load. A container the program loads itself
/// with NVVM in it feeds the program's own JIT link, whose choice is not the driver's:
/// nothing in it is called dead (prune keeps it whole).
fn mark_dead(m: &mut ModuleReport) {
    let own_jit = m.loaded_by == "program"
        && m.entries
            .iter()
            .any(|e| e.kind != "sass" && e.kind != "ptx");
    if own_jit {
        return;
    }
    let code: Vec<(usize, EntryId)> = m
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == "sass" || e.kind == "ptx")
        .filter_map(|(i, e)| Some((i, EntryId::parse(&e.arch)?)))
        .collect();
    let ids: Vec<EntryId> = code.iter().map(|c| c.1).collect();
    for ((i, _), live) in code.iter().zip(fatpack_format::select::live(&ids)) {
        m.entries[*i].dead = !live;
    }
}

pub(super) fn summarise(
    path: String,
    kind: FileKind,
    mut modules: Vec<ModuleReport>,
    unique_stored: Option<u64>,
) -> FileReport {
    modules.iter_mut().for_each(mark_dead);
    let mut per_arch: BTreeMap<(String, String), ArchTotal> = BTreeMap::new();
    let mut kernels = std::collections::BTreeSet::new();
    let mut totals = Totals {
        modules: modules.len(),
        ..Totals::default()
    };
    for e in modules.iter().flat_map(|m| &m.entries) {
        let t = per_arch
            .entry((e.kind.clone(), e.arch.clone()))
            .or_insert_with(|| ArchTotal {
                arch: e.arch.clone(),
                kind: e.kind.clone(),
                entries: 0,
                raw_size: 0,
                stored_size: 0,
            });
        t.entries += 1;
        t.raw_size += e.raw_size;
        t.stored_size += e.stored_size;
        totals.entries += 1;
        totals.raw_size += e.raw_size;
        totals.stored_size += e.stored_size;
        if e.dead {
            totals.dead_entries += 1;
            totals.dead_stored_size += e.stored_size;
        }
        kernels.extend(e.kernels.iter().map(|k| k.mangled.as_str()));
    }
    totals.kernels = kernels.len();
    if let Some(u) = unique_stored {
        totals.stored_size = u;
    }
    let mut per_arch: Vec<ArchTotal> = per_arch.into_values().collect();
    // Numeric arch order (sm_75 before sm_100), SASS before PTX.
    per_arch.sort_by_key(|t| (t.kind != "sass", arch_sort_key(&t.arch)));
    let mut sections: Vec<SectionTotal> = Vec::new();
    for m in &modules {
        let stored: u64 = m.entries.iter().map(|e| e.stored_size).sum();
        match sections.last_mut() {
            Some(t) if t.section == m.section && t.loaded_by == m.loaded_by => {
                t.containers += 1;
                t.stored_size += stored;
            }
            _ => sections.push(SectionTotal {
                section: m.section.clone(),
                loaded_by: m.loaded_by,
                containers: 1,
                stored_size: stored,
            }),
        }
    }
    FileReport {
        json_version: JSON_VERSION,
        path,
        kind,
        packed: None,
        sections,
        modules,
        per_arch,
        totals,
        would_keep: None,
    }
}

fn arch_sort_key(name: &str) -> (u32, String) {
    let digits: String = name.chars().filter(char::is_ascii_digit).collect();
    (digits.parse().unwrap_or(0), name.to_string())
}

pub(super) fn payload_report(
    kind: EntryKind,
    arch: String,
    compression: &str,
    raw: &[u8],
    stored_size: u64,
) -> EntryReport {
    let (relocatable, kernels) = describe_payload(kind, raw);
    EntryReport {
        arch,
        kind: kind_name(kind).to_string(),
        relocatable,
        compression: compression.to_string(),
        raw_size: raw.len() as u64,
        stored_size,
        kernel_count: kernels.len(),
        kernels,
        options: None,
        identifier: None,
        not_decoded: None,
        dead: false,
    }
}
