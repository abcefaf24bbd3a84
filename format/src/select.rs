//! Which entry of a module to load on a device (docs/DESIGN.md, "Selection").
//!
//! Capabilities and arch numbers are `major * 10 + minor` (sm_86 = 86, sm_100 = 100), as in
//! the store. Rules for a device of capability M.m:
//! 1. exact SASS `sm_Mm`, preferring `a` over `f` over plain (an `a` build exists because it
//!    uses features the plain one lacks);
//! 2. else the highest SASS `sm_Mk`, k < m, plain or `f` (`f` preferred at equal k);
//!    `a` SASS never runs on another device;
//! 3. else the newest PTX that JIT-compiles for the device: plain `compute_X` with X <= Mm,
//!    `f` PTX of the same major with a lower or equal minor, `a` PTX only on the exact device;
//! 4. else nothing: the caller reports the capability and what the module has.
//!
//! Entries of any other kind (LTO IR, unknown) are never chosen.

use crate::arch::{EntryId, EntryKind, Variant};
use crate::prelude::*;
use alloc::collections::BTreeMap;

/// `major * 10 + minor`, as the store numbers archs. None for nonsense (negative, minor >= 10).
pub fn capability(major: i32, minor: i32) -> Option<u32> {
    let (major, minor) = (u32::try_from(major).ok()?, u32::try_from(minor).ok()?);
    (minor < 10).then_some(major.checked_mul(10)?.checked_add(minor)?)
}

/// `9.0` for 90, `10.3` for 103.
pub fn capability_string(cap: u32) -> String {
    format!("{}.{}", cap / 10, cap % 10)
}

/// Whether the driver can run (SASS) or JIT (PTX) `c` on a device of capability `cap`.
pub fn runs_on(c: &EntryId, cap: u32) -> bool {
    let same_major = c.arch / 10 == cap / 10;
    match (c.kind, c.variant) {
        (EntryKind::Sass | EntryKind::Ptx, Variant::Specific) => c.arch == cap,
        (EntryKind::Sass, Variant::Plain | Variant::Family) => same_major && c.arch <= cap,
        (EntryKind::Ptx, Variant::Family) => same_major && c.arch <= cap,
        (EntryKind::Ptx, Variant::Plain) => c.arch <= cap,
        (EntryKind::Other(_), _) => false,
    }
}

/// The best entry for capability `cap`, as an index into `entries`; the first of equals.
pub fn select(cap: u32, entries: &[EntryId]) -> Option<usize> {
    let rank = |c: &EntryId| {
        let variant = match c.variant {
            Variant::Plain => 0u8,
            Variant::Family => 1,
            Variant::Specific => 2,
        };
        // Any runnable SASS beats any PTX; the highest runnable arch is the closest one.
        (matches!(c.kind, EntryKind::Sass), c.arch, variant)
    };
    let mut best: Option<(usize, (bool, u32, u8))> = None;
    for (i, c) in entries.iter().enumerate() {
        if !runs_on(c, cap) {
            continue;
        }
        let r = rank(c);
        match best {
            Some((_, b)) if r <= b => {}
            _ => best = Some((i, r)),
        }
    }
    best.map(|(i, _)| i)
}

/// Which of a module's entries some GPU would load ([`select`] for every capability from
/// 1.0 to 99.9, real or not, so that an entry a future GPU could pick counts as live: a
/// build with sm_107 SASS is not called dead because 10.7 is missing from some list); the
/// others are dead weight: shadowed, for every GPU that could run them, by a better entry
/// of the same module.
pub fn live(entries: &[EntryId]) -> Vec<bool> {
    let mut live = vec![false; entries.len()];
    for cap in 10..1000 {
        if let Some(i) = select(cap, entries) {
            live[i] = true;
        }
    }
    live
}

/// The compute capabilities of the GPUs NVIDIA has shipped or announced (Maxwell 5.0 to
/// Blackwell 12.1; 10.1 is what CUDA 12.8-12.9 called Thor, 11.0 in CUDA 13). What a
/// package says it runs on (a wheel variant's `nvidia :: sm_arch`, a conda package's
/// `__cuda_arch` range) is a subset of these: a capability no GPU has is never a claim.
pub const REAL_GPUS: &[u32] = &[
    50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121,
];

/// For each real GPU ([`REAL_GPUS`]), whether a pruned package still gives it exactly the
/// entry the whole build gave it, module by module: a GPU that ran something before and runs
/// something else (or nothing) now is out. A GPU that no module ran before is out too: the
/// package never ran there. This is what a variant may claim, so that an installer that
/// picks it for a GPU gives that GPU the code the fat package would have.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Runs(BTreeMap<u32, bool>);

impl Runs {
    /// One module: its entries before, and which of them are kept.
    pub fn note(&mut self, before: &[EntryId], kept: &[bool]) {
        let after: Vec<EntryId> = before
            .iter()
            .zip(kept)
            .filter(|(_, k)| **k)
            .map(|(e, _)| *e)
            .collect();
        for &cap in REAL_GPUS {
            let Some(b) = select(cap, before) else {
                continue;
            };
            let same = select(cap, &after).map(|a| after[a]) == Some(before[b]);
            *self.0.entry(cap).or_insert(true) &= same;
        }
    }

    /// Another file's modules (a package's files each say where they run).
    pub fn merge(&mut self, other: &Runs) {
        for (&cap, &same) in &other.0 {
            *self.0.entry(cap).or_insert(true) &= same;
        }
    }

    /// The GPUs every module still serves as before, ascending.
    pub fn capabilities(&self) -> Vec<u32> {
        self.0
            .iter()
            .filter(|(_, s)| **s)
            .map(|(c, _)| *c)
            .collect()
    }
}

/// The entry named by `FATPACK_ARCH` (exact kind, arch and variant), whatever the device.
pub fn select_forced(forced: &EntryId, entries: &[EntryId]) -> Option<usize> {
    entries.iter().position(|c| c == forced)
}

/// `forced` if given, else [`select`].
pub fn choose(cap: u32, entries: &[EntryId], forced: Option<&EntryId>) -> Option<usize> {
    match forced {
        Some(f) => select_forced(f, entries),
        None => select(cap, entries),
    }
}

/// `sm_80, sm_90a, compute_90`: what a module offers, for error messages.
pub fn list(entries: &[EntryId]) -> String {
    if entries.is_empty() {
        return "no entries".to_owned();
    }
    entries
        .iter()
        .map(EntryId::name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str) -> EntryId {
        EntryId::parse(name).unwrap_or_else(|| panic!("bad arch name {name}"))
    }

    fn pick(cap: u32, names: &[&str]) -> Option<String> {
        let entries: Vec<_> = names.iter().map(|n| c(n)).collect();
        select(cap, &entries).map(|i| names[i].to_owned())
    }

    #[test]
    fn table() {
        let cases: &[(u32, &[&str], Option<&str>)] = &[
            // Exact SASS.
            (86, &["sm_80", "sm_86", "compute_86"], Some("sm_86")),
            (90, &["sm_90", "compute_90"], Some("sm_90")),
            // Exact prefers a over f over plain.
            (90, &["sm_90", "sm_90a"], Some("sm_90a")),
            (100, &["sm_100", "sm_100f", "sm_100a"], Some("sm_100a")),
            (100, &["sm_100", "sm_100f"], Some("sm_100f")),
            // Same major, lower minor: the highest one.
            (89, &["sm_75", "sm_80", "sm_86", "sm_90"], Some("sm_86")),
            (87, &["sm_80", "compute_86"], Some("sm_80")),
            // SASS of a lower minor beats newer PTX.
            (86, &["sm_80", "compute_86"], Some("sm_80")),
            // Family SASS runs on the family; preferred over plain at equal arch.
            (103, &["sm_100f", "compute_90"], Some("sm_100f")),
            (103, &["sm_100", "sm_100f"], Some("sm_100f")),
            (103, &["sm_103f", "sm_100"], Some("sm_103f")),
            (100, &["sm_103f", "compute_100"], Some("compute_100")),
            // `a` only on the exact device.
            (103, &["sm_100a", "compute_80"], Some("compute_80")),
            (91, &["sm_90a"], None),
            (90, &["sm_90a", "sm_80"], Some("sm_90a")),
            // Never across majors, up or down.
            (90, &["sm_80", "sm_86"], None),
            (80, &["sm_86", "sm_90"], None),
            (120, &["sm_100", "sm_100f"], None),
            // PTX fallback: newest one not above the device.
            (
                120,
                &["sm_90", "compute_80", "compute_90"],
                Some("compute_90"),
            ),
            (90, &["compute_100", "compute_80"], Some("compute_80")),
            (75, &["sm_80", "compute_80"], None),
            (90, &["compute_90a"], Some("compute_90a")),
            (100, &["compute_90a", "compute_86"], Some("compute_86")),
            (103, &["compute_100f"], Some("compute_100f")),
            (120, &["compute_100f"], None),
            (90, &["compute_90", "compute_90a"], Some("compute_90a")),
            // Relocatable modules (rdc) look the same.
            (90, &["sm_80", "compute_90"], Some("compute_90")),
            // First of duplicates.
            (86, &["sm_86", "sm_86"], Some("sm_86")),
            // Empty module.
            (90, &[], None),
        ];
        for (cap, names, want) in cases {
            assert_eq!(
                pick(*cap, names).as_deref(),
                *want,
                "device {cap} with {names:?}"
            );
        }
    }

    #[test]
    fn live_entries_are_those_some_gpu_chooses() {
        let names = [
            "sm_80",
            "sm_86",
            "compute_80",
            "compute_90",
            "sm_120",
            "sm_120f",
            "sm_90a",
        ];
        let entries: Vec<EntryId> = names.iter().map(|n| c(n)).collect();
        let dead: Vec<&str> = names
            .iter()
            .zip(live(&entries))
            .filter(|(_, l)| !l)
            .map(|(n, _)| *n)
            .collect();
        // compute_80: every GPU from 8.0 on has SASS or newer PTX; sm_120: 12.x prefers
        // the f build; sm_90a lives on its own device, compute_90 on 9.x others and beyond.
        assert_eq!(dead, ["compute_80", "sm_120"]);
        assert!(live(&[c("compute_75")]).iter().all(|&l| l));
        // An arch no list names is still a GPU that would load it.
        assert_eq!(live(&[c("sm_100f"), c("sm_107")]), [true, true]);
    }

    #[test]
    fn other_kinds_never_chosen() {
        let e = [EntryId::new(EntryKind::Other(4), 90, Variant::Plain)];
        assert_eq!(select(90, &e), None);
    }

    #[test]
    fn duplicates_pick_the_first() {
        let e = [c("sm_80"), c("sm_86"), c("sm_86")];
        assert_eq!(select(86, &e), Some(1));
        assert_eq!(select(89, &e), Some(1));
    }

    #[test]
    fn forced() {
        let e = [c("sm_80"), c("sm_90a"), c("compute_90")];
        assert_eq!(choose(86, &e, Some(&c("compute_90"))), Some(2));
        assert_eq!(choose(90, &e, Some(&c("sm_80"))), Some(0));
        assert_eq!(choose(90, &e, Some(&c("sm_90"))), None);
        assert_eq!(choose(90, &e, None), Some(1));
    }

    #[test]
    fn capability_numbers() {
        assert_eq!(capability(9, 0), Some(90));
        assert_eq!(capability(10, 3), Some(103));
        assert_eq!(capability(12, 1), Some(121));
        assert_eq!(capability(-1, 0), None);
        assert_eq!(capability(8, 10), None);
        assert_eq!(capability_string(103), "10.3");
        assert_eq!(list(&[c("sm_80"), c("compute_90")]), "sm_80, compute_90");
    }
}
