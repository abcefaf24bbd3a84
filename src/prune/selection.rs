//! What `fatpack prune` keeps: exact labels (`--keep sm_90,compute_90`), or, per module, what
//! the runtime and cudart would choose on the GPUs named (`--for 8.9,9.0`), with the same
//! selection function the runtime uses (fatpack-format's `select`), `a`/`f` variants and the
//! PTX a GPU would JIT included.

use std::collections::{BTreeMap, BTreeSet};

use fatpack_format::arch::Target;
use fatpack_format::select::{self, capability_string, Candidate};

use super::PruneError;

#[derive(Debug, Clone)]
pub enum Selection {
    /// `--keep`: these exact targets, in every module.
    Keep(BTreeSet<Target>),
    /// `--for`: these compute capabilities (`major * 10 + minor`).
    For(Vec<u32>),
}

/// Per capability, which entries were chosen and how often: `9.0 -> {sm_90a: 3}`.
pub type Chosen = BTreeMap<u32, BTreeMap<String, usize>>;

/// Parses `--for`: `8.9,9.0`, `89;90`, `sm_89`, CMake's `89-real`/`90a`, Nix's `8.9`.
pub fn parse_capabilities(text: &str) -> Result<Vec<u32>, PruneError> {
    let bad = || PruneError::Capability(text.to_string());
    let mut out = Vec::new();
    for part in text
        .split([',', ';', ' '])
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let p = part
            .strip_prefix("sm_")
            .or_else(|| part.strip_prefix("compute_"))
            .unwrap_or(part);
        let p = p
            .strip_suffix("-real")
            .or_else(|| p.strip_suffix("-virtual"))
            .unwrap_or(p);
        let p = p.trim_end_matches(['a', 'f']);
        let cap = match p.split_once('.') {
            Some((major, minor)) => {
                let (major, minor): (u32, u32) = (
                    major.parse().map_err(|_| bad())?,
                    minor.parse().map_err(|_| bad())?,
                );
                if minor > 9 {
                    return Err(bad());
                }
                major * 10 + minor
            }
            None => p.parse::<u32>().map_err(|_| bad())?,
        };
        if !(10..10000).contains(&cap) {
            return Err(bad());
        }
        if !out.contains(&cap) {
            out.push(cap);
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

impl Selection {
    /// Which of a module's entries to keep. With `--for`, a capability nothing in the module
    /// runs on is an error naming the module: the pruned binary could not run it there.
    pub fn choose(
        &self,
        module: &str,
        cands: &[Candidate],
        chosen: &mut Chosen,
    ) -> Result<Vec<bool>, PruneError> {
        match self {
            Selection::Keep(keep) => Ok(cands
                .iter()
                .map(|c| Target::of(c.kind, c.arch, c.variant).is_some_and(|t| keep.contains(&t)))
                .collect()),
            Selection::For(caps) => {
                let mut keep = vec![false; cands.len()];
                for &cap in caps {
                    let i = select::select(cap, cands).ok_or_else(|| PruneError::NoneRuns {
                        module: module.to_string(),
                        capability: capability_string(cap),
                        has: select::list(cands),
                    })?;
                    keep[i] = true;
                    *chosen
                        .entry(cap)
                        .or_default()
                        .entry(cands[i].name())
                        .or_default() += 1;
                }
                Ok(keep)
            }
        }
    }

    /// `--keep` names only what the file has (checked against all its targets).
    pub fn check_present(
        &self,
        path: &std::path::Path,
        present: &BTreeSet<Target>,
    ) -> Result<(), PruneError> {
        let Selection::Keep(keep) = self else {
            return Ok(());
        };
        let missing: Vec<String> = keep.difference(present).map(|t| t.to_string()).collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(PruneError::Absent {
            path: path.to_path_buf(),
            missing: missing.join(", "),
            present: present
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// `9.0: sm_90a (3 modules), compute_90 (1)` for each capability.
pub fn describe(chosen: &Chosen) -> Vec<String> {
    chosen
        .iter()
        .map(|(cap, names)| {
            let parts: Vec<String> = names
                .iter()
                .map(|(n, k)| format!("{n} ({k} module{})", if *k == 1 { "" } else { "s" }))
                .collect();
            format!("{}: {}", capability_string(*cap), parts.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_spellings() {
        for (text, want) in [
            ("8.9,9.0", vec![89, 90]),
            ("89;90", vec![89, 90]),
            ("sm_89 sm_90a", vec![89, 90]),
            ("90a-real;100f", vec![90, 100]),
            ("10.3", vec![103]),
            ("9.0,90", vec![90]),
        ] {
            assert_eq!(parse_capabilities(text).unwrap(), want, "{text}");
        }
        for bad in ["", "x", "9.10", "9", "sm_", ";"] {
            assert!(parse_capabilities(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn for_keeps_what_the_runtime_would_choose() {
        let c = |n: &str| Candidate::parse(n).unwrap();
        let cands = [c("sm_80"), c("sm_90"), c("sm_90a"), c("compute_90")];
        let mut chosen = Chosen::new();
        let keep = Selection::For(vec![90, 86, 120])
            .choose("m", &cands, &mut chosen)
            .unwrap();
        // 9.0 runs sm_90a, 8.6 sm_80, 12.0 JITs compute_90.
        assert_eq!(keep, vec![true, false, true, true]);
        assert_eq!(chosen[&90]["sm_90a"], 1);
        let e = Selection::For(vec![75])
            .choose("m", &cands, &mut chosen)
            .unwrap_err();
        assert!(e.to_string().contains("7.5"), "{e}");
    }
}
