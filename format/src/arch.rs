//! GPU architecture names, the one definition shared by the CLI, the store and the runtime:
//! `sm_90`, `sm_90a`, `compute_100f`, and the CMake spellings users already write in
//! `CMAKE_CUDA_ARCHITECTURES` (`80`, `90a-real`, `86-virtual`).

use crate::prelude::*;
use core::fmt;

/// Whether code is tied to one exact chip (`a`), to a family (`f`), or forward compatible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Variant {
    #[default]
    Plain,
    /// `sm_90a`: runs only on exactly this compute capability.
    Specific,
    /// `sm_100f`: runs on this capability and later minor versions of the same major.
    Family,
}

impl Variant {
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Plain => "",
            Variant::Specific => "a",
            Variant::Family => "f",
        }
    }
}

/// Entry kind codes (a fatbin entry header's `kind`): defined with [`EntryKind`], which
/// they code, so that the fatbin layout builds on this module and not the reverse.
pub const KIND_PTX: u16 = 1;
pub const KIND_ELF: u16 = 2;
/// NVVM IR (LTO-IR): cuobjdump's "Fatbin nvvm code". cuFFT ships thousands, obfuscated,
/// for its own JIT link; fatpack keeps them as they are.
pub const KIND_NVVM: u16 = 8;

/// What an entry's bytes are: the fatbin entry kind, the store's entry kind and what
/// selection looks at are this one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// An ELF cubin (SASS for one architecture), linked or relocatable.
    Sass,
    /// PTX text (JIT-compiled by the driver).
    Ptx,
    /// Anything else (LTO IR, kinds nvcc may add), kept by its fatbin kind code.
    Other(u16),
}

impl EntryKind {
    /// The kind as a fatbin entry header codes it (1 PTX, 2 ELF).
    pub fn fatbin_code(self) -> u16 {
        match self {
            EntryKind::Ptx => KIND_PTX,
            EntryKind::Sass => KIND_ELF,
            EntryKind::Other(c) => c,
        }
    }

    pub fn from_fatbin_code(code: u16) -> Self {
        match code {
            KIND_PTX => EntryKind::Ptx,
            KIND_ELF => EntryKind::Sass,
            c => EntryKind::Other(c),
        }
    }
}

/// `sm_90a` for SASS, `compute_90` for PTX, `kind4:sm_90` for anything else.
pub fn arch_name(kind: EntryKind, arch: u32, variant: Variant) -> String {
    let suffix = variant.suffix();
    match kind {
        EntryKind::Sass => format!("sm_{arch}{suffix}"),
        EntryKind::Ptx => format!("compute_{arch}{suffix}"),
        EntryKind::Other(k) => format!("kind{k}:sm_{arch}{suffix}"),
    }
}

/// Parses `sm_90`, `sm_90a`, `compute_100f`, ... into (kind, arch, variant); `None` for
/// anything else (`Other` kinds are not parsed back).
pub fn parse_arch_name(name: &str) -> Option<(EntryKind, u32, Variant)> {
    let (kind, rest) = if let Some(r) = name.strip_prefix("sm_") {
        (EntryKind::Sass, r)
    } else if let Some(r) = name.strip_prefix("compute_") {
        (EntryKind::Ptx, r)
    } else {
        return None;
    };
    let a = parse_number_variant(rest)?;
    Some((kind, a.number, a.variant))
}

/// A compute capability as nvcc numbers it: `90` is 9.0, `121` is 12.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arch {
    pub number: u32,
    pub variant: Variant,
}

impl Arch {
    pub const fn new(number: u32) -> Self {
        Arch {
            number,
            variant: Variant::Plain,
        }
    }
    pub const fn with_variant(number: u32, variant: Variant) -> Self {
        Arch { number, variant }
    }
    pub fn major(self) -> u32 {
        self.number / 10
    }
    pub fn minor(self) -> u32 {
        self.number % 10
    }
    /// `sm_90a`
    pub fn sm_name(self) -> String {
        format!("sm_{}{}", self.number, self.variant.suffix())
    }
    /// `compute_90a`
    pub fn compute_name(self) -> String {
        format!("compute_{}{}", self.number, self.variant.suffix())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.number, self.variant.suffix())
    }
}

/// What an entry is: its code kind, arch number and variant (`sm_90a`, `compute_80`). The one
/// identity of an entry that the fatbin model, the store, selection, prune, split and the
/// runtime share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryId {
    pub kind: EntryKind,
    /// `major * 10 + minor`.
    pub arch: u32,
    pub variant: Variant,
}

/// Ordered by arch number, variant, then kind (`sm_80`, `compute_80`, `sm_90`, `sm_90a`):
/// how lists of them read in messages.
impl Ord for EntryId {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.arch, self.variant, self.kind).cmp(&(other.arch, other.variant, other.kind))
    }
}

impl PartialOrd for EntryId {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl EntryId {
    pub const fn new(kind: EntryKind, arch: u32, variant: Variant) -> Self {
        EntryId {
            kind,
            arch,
            variant,
        }
    }

    /// Parses `sm_90a`, `compute_80`, ...
    pub fn parse(name: &str) -> Option<Self> {
        parse_arch_name(name).map(|(kind, arch, variant)| EntryId::new(kind, arch, variant))
    }

    /// `sm_90a`, `compute_80`, ...
    pub fn name(&self) -> String {
        arch_name(self.kind, self.arch, self.variant)
    }

    /// The entry as a target a user can name (`--keep`, `--arch`): SASS or PTX; None for
    /// any other kind.
    pub fn code(kind: EntryKind, arch: u32, variant: Variant) -> Option<EntryId> {
        matches!(kind, EntryKind::Sass | EntryKind::Ptx)
            .then_some(EntryId::new(kind, arch, variant))
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "`{text}` is not an arch: expected sm_XX, compute_XX or a CMake-style \
     XX[a|f][-real|-virtual]{}",
    did_you_mean_arch(text)
)]
pub struct ArchParseError {
    pub text: String,
}

fn parse_number_variant(s: &str) -> Option<Arch> {
    let (digits, variant) = match s.as_bytes().last()? {
        b'a' => (&s[..s.len() - 1], Variant::Specific),
        b'f' => (&s[..s.len() - 1], Variant::Family),
        _ => (s, Variant::Plain),
    };
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: u32 = digits.parse().ok()?;
    // Compute capability numbers start at 1.0 and have one minor digit.
    if number < 10 {
        return None;
    }
    Some(Arch::with_variant(number, variant))
}

/// Parse one target spelling into the targets it names.
///
/// `sm_80` → SASS 80; `compute_90` → PTX 90; CMake style `80` → SASS and PTX (as CMake's
/// default `80` means `80-real` + `80-virtual`), `80-real` → SASS, `80-virtual` → PTX.
pub fn parse_targets(text: &str) -> Result<Vec<EntryId>, ArchParseError> {
    let err = || ArchParseError {
        text: text.to_string(),
    };
    // One spelling for each: `SM_90` and `sm90` are `sm_90`, `compute90` is `compute_90`.
    let lower = text.trim().to_ascii_lowercase();
    let t = match (lower.strip_prefix("sm"), lower.strip_prefix("compute")) {
        (Some(rest), _) if rest.starts_with(|c: char| c.is_ascii_digit()) => format!("sm_{rest}"),
        (_, Some(rest)) if rest.starts_with(|c: char| c.is_ascii_digit()) => {
            format!("compute_{rest}")
        }
        _ => lower,
    };
    let t = t.as_str();
    if let Some(rest) = t.strip_prefix("sm_") {
        let a = parse_number_variant(rest).ok_or_else(err)?;
        return Ok(vec![EntryId::new(EntryKind::Sass, a.number, a.variant)]);
    }
    if let Some(rest) = t.strip_prefix("compute_") {
        let a = parse_number_variant(rest).ok_or_else(err)?;
        return Ok(vec![EntryId::new(EntryKind::Ptx, a.number, a.variant)]);
    }
    let (num, kinds): (&str, &[EntryKind]) = if let Some(n) = t.strip_suffix("-real") {
        (n, &[EntryKind::Sass])
    } else if let Some(n) = t.strip_suffix("-virtual") {
        (n, &[EntryKind::Ptx])
    } else {
        (t, &[EntryKind::Sass, EntryKind::Ptx])
    };
    let a = parse_number_variant(num).ok_or_else(err)?;
    Ok(kinds
        .iter()
        .map(|&kind| EntryId::new(kind, a.number, a.variant))
        .collect())
}

/// The items of a list as every option that takes archs or capabilities reads it: separated
/// by `,` (nvcc), `;` (CMake) or spaces (Nix's `cudaCapabilities` joined by a shell).
fn list_items(text: &str) -> impl Iterator<Item = &str> {
    text.split([',', ';', ' '])
        .map(str::trim)
        .filter(|p| !p.is_empty())
}

/// Parse a list of targets (`--keep`), e.g. `80;90` or `sm_80,compute_90`.
pub fn parse_target_list(text: &str) -> Result<Vec<EntryId>, ArchParseError> {
    let mut out = Vec::new();
    for part in list_items(text) {
        for t in parse_targets(part)? {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    if out.is_empty() {
        return Err(ArchParseError {
            text: text.to_string(),
        });
    }
    Ok(out)
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "`{text}` is not a compute capability: expected 9.0, 90, sm_90 or compute_90{}",
    did_you_mean(text)
)]
pub struct CapabilityParseError {
    pub text: String,
}

/// `; did you mean 9.0?` where `text` holds a number that is a compute capability
/// (`sm-90`, `arch90`, `9,0`), or nothing.
pub fn did_you_mean(text: &str) -> String {
    match meant_number(text) {
        Some(n) if parse_capability(text).is_err() => {
            format!("; did you mean {}.{} (sm_{n})?", n / 10, n % 10)
        }
        _ => String::new(),
    }
}

/// `; did you mean sm_90?` where `text` holds a number that is an arch (`sm-90`, `arch90`),
/// spelled as `--keep` and `--arch` take it, or nothing.
pub fn did_you_mean_arch(text: &str) -> String {
    match meant_number(text) {
        Some(n) if parse_targets(text).is_err() => format!("; did you mean sm_{n}?"),
        _ => String::new(),
    }
}

/// The compute capability a misspelling holds (`sm-90`, `9,0`: 90).
fn meant_number(text: &str) -> Option<u32> {
    let digits: String = text
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits
        .parse::<u32>()
        .ok()
        .filter(|n| (10..=1299).contains(n))
}

/// One compute capability (`major * 10 + minor`) in any spelling a user has at hand: `9.0`
/// (nvidia-smi, Nix), `90`, `sm_90`, `compute_90`, CMake's `90a-real`. The `a`/`f` variant
/// and the code kind name no other capability, so they are accepted and dropped.
pub fn parse_capability(text: &str) -> Result<u32, CapabilityParseError> {
    let err = || CapabilityParseError {
        text: text.to_string(),
    };
    let t = text.trim();
    if let Some((major, minor)) = t.split_once('.') {
        // `9.0a`, `10.0f` (Nixpkgs' cudaCapabilities, TORCH_CUDA_ARCH_LIST): the variant
        // names no other capability.
        let minor = minor.trim_end_matches(['a', 'f']);
        let major: u32 = major.parse().map_err(|_| err())?;
        let minor: u32 = minor.parse().map_err(|_| err())?;
        if minor > 9 || !(1..1000).contains(&major) {
            return Err(err());
        }
        return Ok(major * 10 + minor);
    }
    let targets = parse_targets(t).map_err(|_| err())?;
    targets.first().map(|t| t.arch).ok_or_else(err)
}

/// A list of capabilities (`prune --for`), duplicates dropped, in the order given.
pub fn parse_capability_list(text: &str) -> Result<Vec<u32>, CapabilityParseError> {
    let mut out = Vec::new();
    for part in list_items(text) {
        let cap = parse_capability(part).map_err(|_| CapabilityParseError {
            text: text.to_string(),
        })?;
        if !out.contains(&cap) {
            out.push(cap);
        }
    }
    if out.is_empty() {
        return Err(CapabilityParseError {
            text: text.to_string(),
        });
    }
    Ok(out)
}

/// What `prune --for` names: GPUs, each to get the entry it would load, and virtual
/// architectures (nvcc's `compute_90`, CMake's `90-virtual`), each to keep the PTX a GPU of
/// that capability would JIT, for GPUs newer than any SASS kept. `9.0+PTX`
/// (`TORCH_CUDA_ARCH_LIST`) names both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForTargets {
    pub gpus: Vec<u32>,
    pub ptx: Vec<u32>,
}

/// Parses `--for`'s list (see [`ForTargets`]); every other spelling of a capability
/// ([`parse_capability`]) names a GPU.
pub fn parse_for_list(text: &str) -> Result<ForTargets, CapabilityParseError> {
    let err = || CapabilityParseError {
        text: text.to_string(),
    };
    let mut out = ForTargets::default();
    let add = |list: &mut Vec<u32>, cap: u32| {
        if !list.contains(&cap) {
            list.push(cap);
        }
    };
    for part in list_items(text) {
        let lower = part.to_ascii_lowercase();
        let (base, plus_ptx) = match lower.strip_suffix("+ptx") {
            Some(base) => (base, true),
            None => (lower.as_str(), false),
        };
        let virtual_only = !base.contains('.')
            && parse_targets(base).is_ok_and(|t| t.iter().all(|t| t.kind == EntryKind::Ptx));
        let cap = parse_capability(base).map_err(|_| err())?;
        match virtual_only {
            true => add(&mut out.ptx, cap),
            false => add(&mut out.gpus, cap),
        }
        if plus_ptx {
            add(&mut out.ptx, cap);
        }
    }
    if out.gpus.is_empty() && out.ptx.is_empty() {
        return Err(err());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_for_target_names_a_gpu_or_a_virtual_arch() {
        let gpu = |c: u32| ForTargets {
            gpus: vec![c],
            ptx: vec![],
        };
        let ptx = |c: u32| ForTargets {
            gpus: vec![],
            ptx: vec![c],
        };
        for (text, want) in [
            ("9.0", gpu(90)),
            ("90", gpu(90)),
            ("sm_90", gpu(90)),
            ("sm90", gpu(90)),
            ("SM_90", gpu(90)),
            ("9.0a", gpu(90)),
            ("90a", gpu(90)),
            ("sm_90a", gpu(90)),
            ("90-real", gpu(90)),
            ("90a-real", gpu(90)),
            ("10.0f", gpu(100)),
            ("compute_90", ptx(90)),
            ("COMPUTE_90", ptx(90)),
            ("90-virtual", ptx(90)),
            (
                "9.0+PTX",
                ForTargets {
                    gpus: vec![90],
                    ptx: vec![90],
                },
            ),
            (
                "8.0;9.0+PTX",
                ForTargets {
                    gpus: vec![80, 90],
                    ptx: vec![90],
                },
            ),
            (
                "80-real,90-virtual",
                ForTargets {
                    gpus: vec![80],
                    ptx: vec![90],
                },
            ),
        ] {
            assert_eq!(parse_for_list(text).unwrap(), want, "{text}");
        }
        for bad in ["", "+PTX", "compute", "9.0+SASS", "ninety"] {
            assert!(parse_for_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn capability_spellings() {
        for (text, want) in [
            ("8.9,9.0", vec![89, 90]),
            ("89;90", vec![89, 90]),
            ("sm_89 sm_90a", vec![89, 90]),
            ("90a-real;100f", vec![90, 100]),
            ("compute_120", vec![120]),
            ("10.3", vec![103]),
            ("9.0,90", vec![90]),
            // Every spelling a user has at hand, one capability.
            (
                "9.0 90 sm_90 sm90 SM_90 9.0a 90a sm_90a 90-real 90-virtual compute_90",
                vec![90],
            ),
            ("10.0f;100f;Sm100;compute100", vec![100]),
        ] {
            assert_eq!(parse_capability_list(text).unwrap(), want, "{text}");
        }
        for bad in [
            "", "x", "9.10", "9", "sm_", ";", "0.5", "9.0.1", "90b", "sm-90",
        ] {
            assert!(parse_capability_list(bad).is_err(), "{bad}");
        }
        let e = parse_capability_list("sm-90").unwrap_err().to_string();
        assert!(e.ends_with("; did you mean 9.0 (sm_90)?"), "{e}");
        assert_eq!(did_you_mean("x"), "");
    }

    #[test]
    fn parses_nvcc_and_cmake_spellings() {
        let sass = |n, v| EntryId::new(EntryKind::Sass, n, v);
        let ptx = |n, v| EntryId::new(EntryKind::Ptx, n, v);
        assert_eq!(
            parse_targets("sm_90a").unwrap(),
            vec![sass(90, Variant::Specific)]
        );
        assert_eq!(
            parse_targets("compute_100f").unwrap(),
            vec![ptx(100, Variant::Family)]
        );
        assert_eq!(
            parse_targets("80").unwrap(),
            vec![sass(80, Variant::Plain), ptx(80, Variant::Plain)]
        );
        assert_eq!(
            parse_targets("86-real").unwrap(),
            vec![sass(86, Variant::Plain)]
        );
        assert_eq!(
            parse_targets("90-virtual").unwrap(),
            vec![ptx(90, Variant::Plain)]
        );
        assert_eq!(
            parse_target_list("80-real;90-virtual").unwrap(),
            vec![sass(80, Variant::Plain), ptx(90, Variant::Plain)]
        );
        assert_eq!(
            parse_target_list("sm_80,sm_90,compute_90").unwrap().len(),
            3
        );
        for bad in [
            "",
            "sm_",
            "sm_9",
            "compute_x",
            "90b",
            "sm_90-real",
            ";",
            "12345",
        ] {
            assert!(parse_target_list(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn names_and_versions() {
        let a = Arch::with_variant(121, Variant::Plain);
        assert_eq!((a.major(), a.minor()), (12, 1));
        assert_eq!(
            Arch::with_variant(90, Variant::Specific).sm_name(),
            "sm_90a"
        );
        assert_eq!(Arch::new(90).compute_name(), "compute_90");
    }
}
