//! Entry metadata: what kind of device code an entry is and for which GPU architecture.

use std::fmt;

/// What an entry's raw bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// An ELF cubin (SASS for one architecture).
    Sass,
    /// PTX text (JIT-compiled by the driver).
    Ptx,
    /// Anything else, tagged by the caller (e.g. an unrecognised fatbin entry kind).
    Other(u16),
}

/// Architecture suffix: `sm_90` vs `sm_90a` vs `sm_100f`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ArchVariant {
    #[default]
    Plain,
    /// Architecture-specific features (`sm_90a`): runs only on exactly that arch.
    Specific,
    /// Family-specific features (`sm_100f`): runs on the family.
    Family,
}

impl ArchVariant {
    pub fn suffix(self) -> &'static str {
        match self {
            ArchVariant::Plain => "",
            ArchVariant::Specific => "a",
            ArchVariant::Family => "f",
        }
    }
}

/// Metadata of one entry as given to [`crate::StoreWriter::add_entry`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryMeta {
    pub kind: EntryKind,
    /// `major * 10 + minor`, e.g. 90 for sm_90, 100 for sm_100.
    pub arch: u32,
    pub variant: ArchVariant,
    /// Opaque bytes kept verbatim (at most [`crate::MAX_ATTRS_LEN`]), e.g. the original
    /// fatbin entry header so the entry can be re-emitted exactly.
    pub attrs: Vec<u8>,
}

impl EntryMeta {
    pub fn new(kind: EntryKind, arch: u32, variant: ArchVariant) -> Self {
        EntryMeta {
            kind,
            arch,
            variant,
            attrs: Vec::new(),
        }
    }

    /// `sm_90a` for SASS, `compute_90` for PTX, `sm_100f`, ...
    pub fn arch_name(&self) -> String {
        arch_name(self.kind, self.arch, self.variant)
    }
}

/// Formats an architecture name; shared by [`EntryMeta`] and the reader's views.
pub fn arch_name(kind: EntryKind, arch: u32, variant: ArchVariant) -> String {
    let suffix = variant.suffix();
    match kind {
        EntryKind::Sass => format!("sm_{arch}{suffix}"),
        EntryKind::Ptx => format!("compute_{arch}{suffix}"),
        EntryKind::Other(k) => format!("kind{k}:sm_{arch}{suffix}"),
    }
}

/// Parses `sm_90`, `sm_90a`, `compute_100f`, ... into (kind, arch, variant).
///
/// Returns `None` for anything else; `Other` kinds are not parsed back.
pub fn parse_arch_name(name: &str) -> Option<(EntryKind, u32, ArchVariant)> {
    let (kind, rest) = if let Some(r) = name.strip_prefix("sm_") {
        (EntryKind::Sass, r)
    } else if let Some(r) = name.strip_prefix("compute_") {
        (EntryKind::Ptx, r)
    } else {
        return None;
    };
    let (digits, variant) = if let Some(d) = rest.strip_suffix('a') {
        (d, ArchVariant::Specific)
    } else if let Some(d) = rest.strip_suffix('f') {
        (d, ArchVariant::Family)
    } else {
        (rest, ArchVariant::Plain)
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((kind, digits.parse().ok()?, variant))
}

/// How a blob's stored bytes encode its raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Stored verbatim (used when compression would not shrink the data).
    Raw,
    /// One zstd frame, no dictionary.
    Zstd,
    /// One zstd frame compressed with the store's dictionary.
    ZstdDict,
}

impl Codec {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
            Codec::ZstdDict => 2,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Option<Codec> {
        match v {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::ZstdDict),
            _ => None,
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd+dict",
        })
    }
}

pub(crate) fn kind_to_wire(kind: EntryKind) -> (u8, u16) {
    match kind {
        EntryKind::Sass => (0, 0),
        EntryKind::Ptx => (1, 0),
        EntryKind::Other(v) => (2, v),
    }
}

pub(crate) fn kind_from_wire(tag: u8, value: u16) -> Option<EntryKind> {
    match (tag, value) {
        (0, 0) => Some(EntryKind::Sass),
        (1, 0) => Some(EntryKind::Ptx),
        (2, v) => Some(EntryKind::Other(v)),
        _ => None,
    }
}

pub(crate) fn variant_to_wire(v: ArchVariant) -> u8 {
    match v {
        ArchVariant::Plain => 0,
        ArchVariant::Specific => 1,
        ArchVariant::Family => 2,
    }
}

pub(crate) fn variant_from_wire(v: u8) -> Option<ArchVariant> {
    match v {
        0 => Some(ArchVariant::Plain),
        1 => Some(ArchVariant::Specific),
        2 => Some(ArchVariant::Family),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (kind, arch, variant, name) in [
            (EntryKind::Sass, 90, ArchVariant::Specific, "sm_90a"),
            (EntryKind::Ptx, 90, ArchVariant::Plain, "compute_90"),
            (EntryKind::Sass, 100, ArchVariant::Family, "sm_100f"),
            (EntryKind::Ptx, 120, ArchVariant::Specific, "compute_120a"),
        ] {
            assert_eq!(arch_name(kind, arch, variant), name);
            assert_eq!(parse_arch_name(name), Some((kind, arch, variant)));
        }
        assert_eq!(
            arch_name(EntryKind::Other(7), 80, ArchVariant::Plain),
            "kind7:sm_80"
        );
        for bad in ["sm_", "sm_a", "sm_9x", "lto_90", "compute_", "sm_+90"] {
            assert_eq!(parse_arch_name(bad), None, "{bad}");
        }
    }
}
