//! How a pruned wheel says which GPUs it is for, so that an installer picks it only where
//! it gives the GPU what the whole build would have.
//!
//! - **Variant wheel** (PEP 817/825, the default): the file name gains a variant label
//!   (`nvidia_cufft-12.4.0.43-py3-none-manylinux2014_x86_64-sm90.whl`) and the wheel a
//!   `*.dist-info/variant.json` mapping it to the property `nvidia :: sm_arch ::
//!   90_real` (NVIDIA's variant provider's feature: the GPUs the wheel runs on). The
//!   version is unchanged. Today's pip ignores such a file beside the fat wheel (it is not
//!   a valid PEP 427 name for it); a variant-aware installer picks it on a matching GPU and
//!   falls back to the fat wheel elsewhere.
//! - **Local label** (`--local-label`): the label goes into the version's local part
//!   (`1.0+cu130` -> `1.0+cu130.sm90`), as PyTorch's `+cu130` builds do. Every installer
//!   reads it, but PEP 440 sorts a local version above its public one and `==1.0` matches
//!   it: such wheels must each sit in an index of their own, never beside the fat wheel.
//!
//! The label names the selection, one spelling for each: `--for 9.0,8.0` and `--for
//! 80;sm_90` are both `sm80.sm90`; `--keep sm_90,compute_90` is `k.s90.c90`; `--dead` is
//! `live`; a label longer than PEP 825's 16 characters becomes its kind's prefix and a
//! digest. The properties are what the kept code serves ([`fatpack_format::select::Runs`]): every real GPU that
//! gets from every module exactly the entry the whole build gave it, PTX's forward range
//! included.

use fatpack_format::arch::{EntryKind, Variant};
use fatpack_format::select::REAL_GPUS;
use sha2::Digest;

use crate::prune::Selection;

/// How a pruned wheel records what it was pruned for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WheelForm {
    /// A PEP 817/825 variant wheel: a variant label and `variant.json` (the default).
    #[default]
    Variant,
    /// The label in the version's local part, for per-variant indexes.
    LocalLabel,
}

/// PEP 825's longest label.
const MAX_LABEL: usize = 16;

/// The schema of PEP 850's variant metadata, v0.2.0, by the URL installers know: uv 0.13.9
/// accepts this one and PEP 825's (`peps/825/v0.1.1.json`), and warns of an unknown schema
/// at variantlib 0.2.2's own spelling of the same version (`/v0.2.0.json`), which variantlib
/// writes but does not check.
pub const SCHEMA: &str = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json";
/// NVIDIA's variant provider: the plugin that tells an installer the machine's GPUs.
pub const PROVIDER_REQUIRES: &str = "nvidia-variant-provider>=0.0.1,<1.0.0";
pub const PROVIDER_API: &str = "nvidia_variant_provider.plugin:NvidiaVariantPlugin";

/// The one label of a selection (see the module's doc).
pub fn label(sel: &Selection) -> String {
    let (prefix, parts): (&str, Vec<String>) = match sel {
        Selection::For(t) => {
            let sorted = |v: &[u32]| {
                let mut v = v.to_vec();
                v.sort_unstable();
                v.dedup();
                v
            };
            let gpus = sorted(&t.gpus).into_iter().map(|c| format!("sm{c}"));
            let ptx = sorted(&t.ptx).into_iter().map(|c| format!("c{c}"));
            ("sm", gpus.chain(ptx).collect())
        }
        Selection::Keep { targets, .. } => {
            let mut parts = vec!["k".to_string()];
            parts.extend(targets.iter().map(|t| {
                let kind = match t.kind {
                    EntryKind::Sass => "s",
                    EntryKind::Ptx => "c",
                    EntryKind::Other(_) => "o",
                };
                let variant = match t.variant {
                    Variant::Plain => "",
                    Variant::Family => "f",
                    Variant::Specific => "a",
                };
                format!("{kind}{}{variant}", t.arch)
            }));
            ("k", parts)
        }
        Selection::Dead => return "live".into(),
    };
    joined(prefix, &parts)
}

/// `parts` joined by `.`, or, longer than PEP 825's 16 characters, `prefix` and a digest of
/// them.
pub(super) fn joined(prefix: &str, parts: &[String]) -> String {
    let long = parts.join(".");
    if long.len() <= MAX_LABEL {
        return long;
    }
    let digest = sha2::Sha256::digest(long.as_bytes());
    let hex = super::tarball::hex(&digest);
    format!("{prefix}{}", &hex[..MAX_LABEL - prefix.len()])
}

/// Whether a segment of a local label is one [`label`] writes (so that a wheel pruned
/// again gets one label, not two: `+cu130.sm90` pruned for 9.0 stays `+cu130.sm90`).
pub(super) fn is_ours(segment: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some(rest) = segment.strip_prefix("sm") {
        return digits(rest) || hex(rest, MAX_LABEL - 2);
    }
    if segment == "k" || segment == "live" {
        return true;
    }
    if let Some(rest) = segment.strip_prefix('k') {
        return hex(rest, MAX_LABEL - 1);
    }
    match segment.strip_prefix(['s', 'c']) {
        Some(rest) => digits(rest.trim_end_matches(['a', 'f'])),
        None => false,
    }
}

/// `version` with the local label set to `label`: what fatpack wrote there before is
/// replaced, the rest (PyTorch's `+cu130`) kept.
pub fn local_version(version: &str, label: &str) -> String {
    let Some((public, local)) = version.split_once('+') else {
        return format!("{version}+{label}");
    };
    let mut segments: Vec<&str> = local.split('.').collect();
    while segments.last().is_some_and(|s| is_ours(s)) {
        segments.pop();
    }
    segments.push(label);
    format!("{public}+{}", segments.join("."))
}

/// The GPUs NVIDIA's variant provider picks a variant claiming `{cap}_real` on: a GPU of
/// capability `M.m` supports `M{m'}_real` for every `m' <= m` of its own major version (and
/// `M0_virtual`), so `80_real` is picked on 8.0, 8.6, 8.7, 8.8 and 8.9 alike.
pub fn provider_picks(cap: u32) -> impl Iterator<Item = u32> {
    REAL_GPUS
        .iter()
        .copied()
        .filter(move |&g| g / 10 == cap / 10 && g >= cap)
}

/// The `nvidia :: sm_arch` values a variant serving `claims` may carry: `{cap}_real` for
/// each claimed GPU whose every match under NVIDIA's provider ([`provider_picks`]) is
/// claimed too, so that every GPU the provider picks the variant on gets from it what the
/// fat wheel gives it. Returns the values and, for each claimed GPU left out, the GPUs of
/// its family the variant does not serve as the fat wheel does.
pub fn sm_arch_values(claims: &[u32]) -> (Vec<String>, Vec<(u32, Vec<u32>)>) {
    let mut values = Vec::new();
    let mut open = Vec::new();
    for &c in claims {
        let missing: Vec<u32> = provider_picks(c).filter(|g| !claims.contains(g)).collect();
        match missing.is_empty() {
            true => values.push(format!("{c}_real")),
            false => open.push((c, missing)),
        }
    }
    (values, open)
}

/// [`sm_arch_values`] of a variant wheel's `claims`, refused where a GPU the selection
/// names (`--for`), or every GPU it serves, would be picked by NVIDIA's provider along with
/// GPUs it does not serve as the fat wheel does: the refusal names the `--for` that covers
/// them.
pub(super) fn closed_values(
    input: &std::path::Path,
    claims: &[u32],
    sel: &Selection,
) -> Result<Vec<String>, crate::prune::PruneError> {
    use fatpack_format::select::capability_string;
    let (values, open) = sm_arch_values(claims);
    let asked: &[u32] = match sel {
        Selection::For(t) => &t.gpus,
        _ => &[],
    };
    let blocking: Vec<&(u32, Vec<u32>)> = open
        .iter()
        .filter(|(c, _)| asked.contains(c) || values.is_empty())
        .collect();
    if blocking.is_empty() {
        return Ok(values);
    }
    let mut cover: Vec<u32> = asked.to_vec();
    cover.extend(
        blocking
            .iter()
            .flat_map(|(c, m)| std::iter::once(*c).chain(m.clone())),
    );
    cover.sort_unstable();
    cover.dedup();
    let spell = |v: &[u32]| v.iter().map(|&c| capability_string(c)).collect::<Vec<_>>();
    let (c, missing) = blocking[0];
    Err(crate::prune::PruneError::Package {
        path: input.to_path_buf(),
        message: format!(
            "NVIDIA's variant provider would pick a variant for {} on {} too, which it does \
             not serve as the fat wheel does; prune --for {} (or --local-label, for an index \
             of its own)",
            capability_string(*c),
            spell(missing).join(", "),
            spell(&cover).join(",")
        ),
    })
}

/// A wheel's `variant.json` (PEP 825 variant metadata, in the schema variantlib reads):
/// the one variant `label`, with the GPUs the kept code serves.
pub fn variant_json(label: &str, sm_arch: &[String]) -> String {
    let doc = serde_json::json!({
        "$schema": SCHEMA,
        "default-priorities": { "namespace": ["nvidia"] },
        "providers": {
            "nvidia": {
                "plugin-api": PROVIDER_API,
                "requires": [PROVIDER_REQUIRES],
            }
        },
        "variants": { label: { "nvidia": { "sm_arch": sm_arch } } },
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::EntryId;
    use fatpack_format::select::Runs;

    fn keep(list: &[&str]) -> Selection {
        Selection::Keep {
            targets: list.iter().map(|n| EntryId::parse(n).unwrap()).collect(),
            allow_empty: false,
        }
    }

    #[test]
    fn one_selection_one_label() {
        assert_eq!(label(&Selection::for_gpus(&[90, 80])), "sm80.sm90");
        assert_eq!(label(&Selection::for_gpus(&[80, 90, 90])), "sm80.sm90");
        assert_eq!(label(&keep(&["sm_90", "compute_90"])), "k.s90.c90");
        assert_eq!(label(&keep(&["sm_90a"])), "k.s90a");
        assert_eq!(label(&Selection::Dead), "live");
        // --for 9.0 and --keep sm_90 keep different things: different labels.
        assert_ne!(label(&Selection::for_gpus(&[90])), label(&keep(&["sm_90"])));
        let many = label(&Selection::for_gpus(&[75, 80, 86, 89, 90, 100, 120]));
        assert_eq!(many.len(), 16);
        assert!(many.starts_with("sm") && is_ours(&many), "{many}");
        for l in [
            many,
            label(&keep(&["sm_80", "sm_86", "sm_89", "sm_90", "sm_100"])),
        ] {
            assert!(l.len() <= MAX_LABEL);
            assert!(l
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_'));
        }
    }

    #[test]
    fn local_labels_do_not_stack() {
        assert_eq!(local_version("1.0", "sm90"), "1.0+sm90");
        assert_eq!(local_version("2.11.0+cu130", "sm90"), "2.11.0+cu130.sm90");
        assert_eq!(
            local_version("2.11.0+cu130.sm90", "sm90"),
            "2.11.0+cu130.sm90"
        );
        assert_eq!(
            local_version("2.11.0+cu130.sm80.sm90", "sm90"),
            "2.11.0+cu130.sm90"
        );
        assert_eq!(
            local_version("1.0+cu130.k.s90.c90", "live"),
            "1.0+cu130.live"
        );
        assert_eq!(local_version("1.0+cpu", "sm90"), "1.0+cpu.sm90");
    }

    #[test]
    fn variant_json_names_the_label_and_the_gpus() {
        let mut runs = Runs::default();
        let e = |n: &str| EntryId::parse(n).unwrap();
        runs.note(&[e("sm_80"), e("sm_90")], &[false, true]);
        let (values, open) = sm_arch_values(&runs.capabilities());
        assert_eq!(values, ["90_real"]);
        assert!(open.is_empty());
        let doc: serde_json::Value = serde_json::from_str(&variant_json("sm90", &values)).unwrap();
        assert_eq!(doc["variants"]["sm90"]["nvidia"]["sm_arch"][0], "90_real");
        assert_eq!(doc["$schema"], SCHEMA);
    }

    #[test]
    fn values_are_closed_under_the_providers_matching() {
        // 8.0 alone: the provider would pick it on 8.6-8.9 too.
        let (values, open) = sm_arch_values(&[80]);
        assert!(values.is_empty());
        assert_eq!(open, [(80, vec![86, 87, 88, 89])]);
        let (values, open) = sm_arch_values(&[80, 86, 87, 88, 89, 90]);
        assert_eq!(
            values,
            ["80_real", "86_real", "87_real", "88_real", "89_real", "90_real"]
        );
        assert!(open.is_empty());
        // 10.0 is picked on 10.1 and 10.3; 12.1 only on itself.
        assert_eq!(sm_arch_values(&[100, 121]).0, ["121_real"]);
        assert_eq!(provider_picks(120).collect::<Vec<_>>(), [120, 121]);
    }
}
