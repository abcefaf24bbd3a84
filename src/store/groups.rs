//! A release store's layout: which blobs share a solid group (cubin-store format 1.1).
//!
//! One library's cubins for one GPU repeat each other across modules (kernel variants), and a
//! module's cubins for neighbouring archs of one family (sm_80/86/89) repeat each other too;
//! a frame per blob sees neither. Blobs are grouped by kind and GPU family (or arch), in module
//! order, up to a number of raw bytes per group: the runtime decodes a group from its start
//! up to the blob a module needs, so the cap bounds what a first load decodes, and a GPU only
//! ever decodes groups of its own family. `fatpack split` keeps a group whole in one pack.

use cubin_store::{ArchVariant, EntryKind, Store};

/// Which blobs may share a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// SASS of one GPU family (sm_80, sm_86, sm_89 together; sm_90 with sm_90a), PTX of one
    /// family: a family's archs share most of a module's code.
    Family,
    /// One arch and variant: each GPU decodes only its own code.
    Arch,
}

/// How a release store groups its blobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Solid {
    pub grouping: Grouping,
    /// A group is closed before it passes this many raw bytes (a blob larger than this is a
    /// group of its own).
    pub group_bytes: u64,
}

impl Solid {
    /// The release default: 8 MiB by family. On the H200's host (BENCHMARKS.md, "Release
    /// stores") a first load decodes at about 0.4 GB/s from a group's start, so 8 MiB keeps
    /// every module's first load under 20 ms (32 MiB: up to 80 ms) and the static cuBLAS
    /// program's run time at plain's; larger groups are smaller (cuBLASLt: 0.83x nvcc's size
    /// mode at 8 MiB, 0.73x at 32) and `--group-mib` trades one for the other.
    pub const RELEASE: Solid = Solid {
        grouping: Grouping::Family,
        group_bytes: 8 << 20,
    };
}

/// A group's key: blobs with different keys never share a group.
fn key(grouping: Grouping, kind: EntryKind, arch: u32, variant: ArchVariant) -> (u8, u32, u8) {
    let k = match kind {
        EntryKind::Sass => 0,
        EntryKind::Ptx => 1,
        EntryKind::Other(_) => return (2, 0, 0),
    };
    match grouping {
        Grouping::Family => (k, arch / 10, 0),
        Grouping::Arch => (k, arch, variant_tag(variant)),
    }
}

fn variant_tag(v: ArchVariant) -> u8 {
    match v {
        ArchVariant::Plain => 0,
        ArchVariant::Specific => 1,
        _ => 2,
    }
}

/// The store's blobs in groups: each blob once, in the group its first entry (module order)
/// puts it in; groups of one key follow one another, keys in order of first use. A group is
/// a list of blob ids of `store`.
pub fn plan(store: &Store<'_>, solid: Solid) -> Vec<Vec<u32>> {
    struct Open {
        key: (u8, u32, u8),
        done: Vec<Vec<u32>>,
        current: Vec<u32>,
        bytes: u64,
    }
    let mut keys: Vec<Open> = Vec::new();
    let mut placed = vec![false; store.blob_count()];
    for e in store.entries() {
        let id = e.blob_id();
        match placed.get_mut(id as usize) {
            Some(p) if !*p => *p = true,
            _ => continue,
        }
        let k = key(solid.grouping, e.kind(), e.arch(), e.variant());
        let at = match keys.iter().position(|o| o.key == k) {
            Some(i) => i,
            None => {
                keys.push(Open {
                    key: k,
                    done: Vec::new(),
                    current: Vec::new(),
                    bytes: 0,
                });
                keys.len() - 1
            }
        };
        let Some(open) = keys.get_mut(at) else {
            continue;
        };
        let len = e.raw_len();
        if !open.current.is_empty() && open.bytes.saturating_add(len) > solid.group_bytes {
            open.done.push(std::mem::take(&mut open.current));
            open.bytes = 0;
        }
        open.current.push(id);
        open.bytes = open.bytes.saturating_add(len);
    }
    keys.into_iter()
        .flat_map(|mut o| {
            if !o.current.is_empty() {
                o.done.push(o.current);
            }
            o.done
        })
        .collect()
}

/// The blobs of `store` in solid groups ([`plan`]), then its modules and entries
/// naming them. Groups are decoded and compressed a few at a time (one per worker), so memory
/// stays at a few groups' raw bytes.
pub fn write_solid<W: std::io::Write + std::io::Seek>(
    store: &Store<'_>,
    solid: Solid,
    w: &mut cubin_store::StoreWriter<W>,
) -> Result<(), cubin_store::StoreError> {
    let plan = plan(store, solid);
    let mut new_id = vec![u32::MAX; store.blob_count()];
    let budget = crate::parallel::workers(plan.len());
    let per_batch = budget.count().max(1);
    for batch in plan.chunks(per_batch) {
        let raws: Vec<Vec<Vec<u8>>> = batch
            .iter()
            .map(|g| g.iter().map(|&id| store.read_blob(id)).collect())
            .collect::<Result<_, _>>()?;
        let refs: Vec<Vec<&[u8]>> = raws
            .iter()
            .map(|g| g.iter().map(Vec::as_slice).collect())
            .collect();
        let ids = w.add_groups(&refs, per_batch)?;
        for (g, got) in batch.iter().zip(ids) {
            for (&old, new) in g.iter().zip(got) {
                if let Some(slot) = new_id.get_mut(old as usize) {
                    *slot = new;
                }
            }
        }
    }
    drop(budget);
    for m in store.modules() {
        let id = w.add_module(m.name())?;
        for e in m.entries() {
            let blob = new_id
                .get(e.blob_id() as usize)
                .copied()
                .unwrap_or(u32::MAX);
            w.add_entry_for_blob(id, e.meta(), blob)?;
        }
    }
    Ok(())
}
