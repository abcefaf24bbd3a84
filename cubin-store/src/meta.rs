//! Entry metadata: what kind of device code an entry is and for which GPU architecture.

#[allow(unused_imports)]
use crate::prelude::*;
use core::fmt;

// The kinds and arch names are the ones the CLI and the runtime use (fatpack-format).
pub use fatpack_format::arch::{
    arch_name, parse_arch_name, EntryId, EntryKind, Variant as ArchVariant,
};

/// Metadata of one entry as given to [`crate::StoreWriter::add_entry`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryMeta {
    /// What the entry is (`sm_90a`, `compute_80`): the identity every part of fatpack uses.
    pub id: EntryId,
    /// Opaque bytes kept verbatim (at most [`crate::MAX_ATTRS_LEN`]), e.g. the original
    /// fatbin entry header so the entry can be re-emitted exactly.
    pub attrs: Vec<u8>,
}

impl EntryMeta {
    pub fn new(kind: EntryKind, arch: u32, variant: ArchVariant) -> Self {
        EntryMeta {
            id: EntryId::new(kind, arch, variant),
            attrs: Vec::new(),
        }
    }

    /// `sm_90a` for SASS, `compute_90` for PTX, `sm_100f`, ...
    pub fn arch_name(&self) -> String {
        self.id.name()
    }
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
    /// A stretch of one zstd frame that several blobs share (a *solid group*, format 1.1):
    /// the blob is the group's decoded bytes `[skip, skip + raw_len)`.
    ZstdSolid,
}

impl Codec {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
            Codec::ZstdDict => 2,
            Codec::ZstdSolid => 3,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Option<Codec> {
        match v {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::ZstdDict),
            3 => Some(Codec::ZstdSolid),
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
            Codec::ZstdSolid => "zstd-solid",
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
