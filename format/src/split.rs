//! Split outputs: what `fatpack split` leaves in a packed binary in place of its store, and
//! the header of each pack file it writes next to it. Read by the CLI (`join`, `inspect`,
//! `extract`) and by the runtime.
//!
//! A split binary keeps, where its store was (mapped segment, section or side file), a
//! **manifest**: the list of packs, where each blob of the store now lives, and the store's
//! detached index (cubin-store's *skeleton*: header, dictionary and index, which records
//! every blob's length and blake3). The store digest the binary's slot records is the
//! skeleton's, unchanged, so the binary still names exactly the device code it was built
//! with; every blob read from a pack is checked against the index.
//!
//! Manifest (all integers little-endian; offsets from the manifest's first byte):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `"FPSPLIT\0"` |
//! | 8 | 4 | version, 1 |
//! | 12 | 4 | `pack_count` |
//! | 16 | 4 | `blob_count` (the store's) |
//! | 20 | 4 | `names_len`: bytes of the name pool |
//! | 24 | 8 | `skeleton_len` |
//! | 32 | 64 × `pack_count` | pack records |
//! | … | 16 × `blob_count` | placements, by blob id: `u32` pack, `u32` zero, `u64` offset in the pack file |
//! | … | `names_len` | name pool: each pack's file-name suffix, `.sm_90.fatpack`, `.compute_90.fatpack` |
//! | … | `skeleton_len` | the detached store index, at the next multiple of 8 |
//!
//! Pack record: `u32` suffix offset and `u32` length in the name pool, `u8` kind (0 SASS,
//! 1 PTX, 2 other, 3 the SASS of a GPU family, 4 its PTX), 3 zero bytes, `u32` arch
//! (`major*10+minor`; the major for 3 and 4; 0 for other),
//! `u64` length of the pack file, 32-byte blake3 of the whole pack file, 8 zero bytes.
//!
//! Pack file `<binary><suffix>`: a 64-byte header, then blobs' stored bytes at the offsets
//! the placements give (8-aligned, zero padding):
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `"FPPACK\0\0"` |
//! | 8 | 4 | version, 1 |
//! | 12 | 4 | this pack's position in the manifest |
//! | 16 | 32 | the store digest (the binary's) |
//! | 48 | 16 | zero |
//!
//! Install hints `<binary>.fatpack-install` ([`HINT_SUFFIX`]): what `fatpack split` of a
//! package (wheel, conda, deb) installs beside each split binary in its host package, so
//! that a missing pack's error names the package that holds it and the command that
//! installs it. UTF-8 text, one line per pack: `<pack suffix> TAB <package> TAB <command>`.
//! Only words an error message; a missing or odd hint file changes nothing else.

use crate::prelude::*;
use crate::wire_layout;
use core::ops::Range;

wire_layout! {
    /// The first 32 bytes of a manifest.
    pub struct ManifestHeader (32) {
        magic: [u8; 8] = 0,
        version: u32 = 8,
        pack_count: u32 = 12,
        blob_count: u32 = 16,
        names_len: u32 = 20,
        skeleton_len: u64 = 24,
    }
}

wire_layout! {
    /// A pack as the manifest records it.
    pub struct PackWire (64) {
        /// The pack's file-name suffix: offset and length in the name pool.
        name_offset: u32 = 0,
        name_len: u32 = 4,
        /// 0 SASS, 1 PTX, 2 other, 3 a GPU family's SASS, 4 its PTX.
        kind: u8 = 8,
        /// Zero.
        pad: [u8; 3] = 9,
        /// `major*10+minor`; 0 for other.
        arch: u32 = 12,
        /// Length of the whole pack file.
        len: u64 = 16,
        /// blake3 of the whole pack file.
        digest: [u8; 32] = 24,
        /// Zero.
        reserved: [u8; 8] = 56,
    }
}

wire_layout! {
    /// Where a blob is, as the manifest records it.
    pub struct PlacementWire (16) {
        pack: u32 = 0,
        /// Zero.
        pad: u32 = 4,
        /// Offset in the pack file.
        offset: u64 = 8,
    }
}

wire_layout! {
    /// The header of a pack file.
    pub struct PackHeader (64) {
        magic: [u8; 8] = 0,
        version: u32 = 8,
        /// This pack's position in the manifest.
        index: u32 = 12,
        /// The store digest (the binary's).
        store_digest: [u8; 32] = 16,
    }
}

pub const MANIFEST_MAGIC: [u8; 8] = *b"FPSPLIT\0";
pub const PACK_MAGIC: [u8; 8] = *b"FPPACK\0\0";
pub const VERSION: u32 = 1;
pub const MANIFEST_HEADER_LEN: usize = ManifestHeader::LEN;
pub const PACK_RECORD_LEN: usize = PackWire::LEN;
pub const PLACEMENT_LEN: usize = PlacementWire::LEN;
pub const PACK_HEADER_LEN: usize = PackHeader::LEN;
/// Suffix shared by every pack file name (and the side file).
pub const PACK_EXT: &str = ".fatpack";

/// What a pack holds: the SASS of one architecture (plain, `a` and `f` variants together),
/// the PTX of one virtual architecture (likewise), or everything else. Per-arch PTX packs let
/// a GPU that JITs one old module's PTX take only that arch's. A release store's solid groups
/// may span the archs of one GPU family (cubin-store format 1.1); a group stays whole, so
/// such a family's SASS (or PTX) is one pack: `SassFamily(8)` holds sm_80, sm_86 and sm_89.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PackKind {
    Sass(u32),
    Ptx(u32),
    Other,
    /// The SASS of every arch `major*10 + minor` of one major version.
    SassFamily(u32),
    /// The PTX of one major version.
    PtxFamily(u32),
}

impl PackKind {
    /// The file-name suffix: `.sm_90.fatpack`, `.compute_90.fatpack`, `.sm_8x.fatpack`,
    /// `.other.fatpack`.
    pub fn suffix(self) -> String {
        match self {
            PackKind::Sass(a) => format!(".sm_{a}{PACK_EXT}"),
            PackKind::Ptx(a) => format!(".compute_{a}{PACK_EXT}"),
            PackKind::Other => format!(".other{PACK_EXT}"),
            PackKind::SassFamily(m) => format!(".sm_{m}x{PACK_EXT}"),
            PackKind::PtxFamily(m) => format!(".compute_{m}x{PACK_EXT}"),
        }
    }

    /// For messages: `sm_90`, `compute_90`, `sm_8x`, `other device code`.
    pub fn describe(self) -> String {
        match self {
            PackKind::Sass(a) => format!("sm_{a}"),
            PackKind::Ptx(a) => format!("compute_{a}"),
            PackKind::Other => "other device code".into(),
            PackKind::SassFamily(m) => format!("sm_{m}x"),
            PackKind::PtxFamily(m) => format!("compute_{m}x"),
        }
    }

    fn wire(self) -> (u8, u32) {
        match self {
            PackKind::Sass(a) => (0, a),
            PackKind::Ptx(a) => (1, a),
            PackKind::Other => (2, 0),
            PackKind::SassFamily(m) => (3, m),
            PackKind::PtxFamily(m) => (4, m),
        }
    }

    fn from_wire(kind: u8, arch: u32) -> Option<PackKind> {
        match (kind, arch) {
            (0, a) if a > 0 => Some(PackKind::Sass(a)),
            (1, a) if a > 0 => Some(PackKind::Ptx(a)),
            (2, 0) => Some(PackKind::Other),
            (3, m) if m > 0 => Some(PackKind::SassFamily(m)),
            (4, m) if m > 0 => Some(PackKind::PtxFamily(m)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackRecord {
    pub kind: PackKind,
    pub suffix: String,
    /// Length of the whole pack file.
    pub len: u64,
    /// blake3 of the whole pack file.
    pub digest: [u8; 32],
}

/// Where one blob is: which pack, at which offset of the pack file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub pack: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest<'a> {
    pub packs: Vec<PackRecord>,
    /// One per blob of the store, by blob id.
    pub placements: Vec<Placement>,
    /// The store's detached index (cubin-store's `Store::skeleton`).
    pub skeleton: &'a [u8],
}

/// Whether `b` starts like a manifest (as opposed to a store).
pub fn is_manifest(b: &[u8]) -> bool {
    b.get(..8) == Some(&MANIFEST_MAGIC[..])
}

fn slice(b: &[u8], at: usize, len: u64) -> Option<&[u8]> {
    b.get(at..at.checked_add(usize::try_from(len).ok()?)?)
}

impl<'a> Manifest<'a> {
    /// Parses and bounds-checks a manifest; bytes after the skeleton are ignored (section
    /// padding). Placements are checked against the pack table (pack in range, offset past
    /// the pack header); blob lengths are the skeleton's to check.
    pub fn parse(b: &'a [u8]) -> Result<Manifest<'a>, String> {
        if !is_manifest(b) {
            return Err("not a split manifest (bad magic)".into());
        }
        let short = || "split manifest truncated".to_string();
        let h = ManifestHeader::read(b).ok_or_else(short)?;
        if h.version != VERSION {
            return Err(format!(
                "split manifest version {} (this fatpack reads {VERSION})",
                h.version
            ));
        }
        let (pack_count, blob_count) = (h.pack_count as usize, h.blob_count as usize);
        let names_len = h.names_len as usize;
        // Bounded by the slice before anything is allocated.
        let packs_at = MANIFEST_HEADER_LEN;
        let placements_at = pack_count
            .checked_mul(PACK_RECORD_LEN)
            .and_then(|n| n.checked_add(packs_at))
            .ok_or_else(short)?;
        let names_at = blob_count
            .checked_mul(PLACEMENT_LEN)
            .and_then(|n| n.checked_add(placements_at))
            .ok_or_else(short)?;
        let names = slice(b, names_at, names_len as u64).ok_or_else(short)?;
        let skeleton_at = (names_at + names_len).div_ceil(8) * 8;
        let skeleton = slice(b, skeleton_at, h.skeleton_len).ok_or_else(short)?;
        let mut packs = Vec::with_capacity(pack_count);
        for i in 0..pack_count {
            let r = PackWire::read(&b[packs_at + i * PACK_RECORD_LEN..]).ok_or_else(short)?;
            let name = slice(names, r.name_offset as usize, u64::from(r.name_len))
                .and_then(|n| core::str::from_utf8(n).ok())
                .ok_or_else(|| format!("split manifest: pack {i} has a bad name"))?;
            let kind = PackKind::from_wire(r.kind, r.arch)
                .filter(|_| r.pad == [0; 3] && r.reserved == [0; 8])
                .ok_or_else(|| format!("split manifest: pack {i} has a bad kind"))?;
            // The name is joined to a path: it must stay a suffix of the binary's own name.
            if name != kind.suffix() {
                return Err(format!(
                    "split manifest: pack {i} is named \"{name}\", not \"{}\"",
                    kind.suffix()
                ));
            }
            packs.push(PackRecord {
                kind,
                suffix: name.to_owned(),
                len: r.len,
                digest: r.digest,
            });
        }
        let mut placements = Vec::with_capacity(blob_count);
        for i in 0..blob_count {
            let r =
                PlacementWire::read(&b[placements_at + i * PLACEMENT_LEN..]).ok_or_else(short)?;
            let ok = packs
                .get(r.pack as usize)
                .is_some_and(|p| r.offset >= PACK_HEADER_LEN as u64 && r.offset <= p.len)
                && r.pad == 0;
            if !ok {
                return Err(format!("split manifest: blob {i} has a bad placement"));
            }
            placements.push(Placement {
                pack: r.pack,
                offset: r.offset,
            });
        }
        Ok(Manifest {
            packs,
            placements,
            skeleton,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut names = Vec::new();
        let names_len: usize = self.packs.iter().map(|p| p.suffix.len()).sum();
        let header = ManifestHeader {
            magic: MANIFEST_MAGIC,
            version: VERSION,
            pack_count: self.packs.len() as u32,
            blob_count: self.placements.len() as u32,
            names_len: names_len as u32,
            skeleton_len: self.skeleton.len() as u64,
        };
        let mut out = header.to_bytes().to_vec();
        for p in &self.packs {
            let (kind, arch) = p.kind.wire();
            let record = PackWire {
                name_offset: names.len() as u32,
                name_len: p.suffix.len() as u32,
                kind,
                arch,
                len: p.len,
                digest: p.digest,
                ..PackWire::default()
            };
            out.extend_from_slice(&record.to_bytes());
            names.extend_from_slice(p.suffix.as_bytes());
        }
        for pl in &self.placements {
            let record = PlacementWire {
                pack: pl.pack,
                pad: 0,
                offset: pl.offset,
            };
            out.extend_from_slice(&record.to_bytes());
        }
        out.extend_from_slice(&names);
        out.resize(out.len().div_ceil(8) * 8, 0);
        out.extend_from_slice(self.skeleton);
        out
    }

    /// The byte range of blob `id` in its pack file, `stored_len` long.
    pub fn blob_range(&self, id: u32, stored_len: u64) -> Option<(usize, Range<usize>)> {
        let p = self.placements.get(id as usize)?;
        let pack = self.packs.get(p.pack as usize)?;
        let end = p
            .offset
            .checked_add(stored_len)
            .filter(|&e| e <= pack.len)?;
        Some((
            p.pack as usize,
            usize::try_from(p.offset).ok()?..usize::try_from(end).ok()?,
        ))
    }
}

/// The 64-byte header of pack `index` of a binary whose store digest is `store_digest`.
pub fn pack_header(index: u32, store_digest: &[u8; 32]) -> [u8; PACK_HEADER_LEN] {
    PackHeader {
        magic: PACK_MAGIC,
        version: VERSION,
        index,
        store_digest: *store_digest,
    }
    .to_bytes()
}

/// Checks that `file` is pack `index` of the binary with `store_digest`, `len` bytes long;
/// the error says what is wrong (the caller names the file).
pub fn check_pack(
    file: &[u8],
    index: u32,
    store_digest: &[u8; 32],
    len: u64,
) -> Result<(), String> {
    let h = PackHeader::read(file).ok_or("too short to be a fatpack pack")?;
    if h.magic != PACK_MAGIC || h.version != VERSION {
        return Err("not a fatpack pack (bad magic or version)".into());
    }
    if h.store_digest != *store_digest {
        return Err("belongs to another build (store digest differs)".into());
    }
    if h.index != index {
        return Err("is another pack of this build (renamed?)".into());
    }
    if file.len() as u64 != len {
        return Err(format!(
            "is {} bytes, the binary records {len} (truncated or appended to)",
            file.len()
        ));
    }
    Ok(())
}

/// The install hint file's suffix after the binary's name.
pub const HINT_SUFFIX: &str = ".fatpack-install";
/// No hint file is read past this.
pub const HINT_MAX: usize = 64 * 1024;

/// One line of an install hint file; `None` if a field holds a tab or line break (a name
/// no package format allows).
pub fn hint_line(suffix: &str, package: &str, command: &str) -> Option<String> {
    let plain = |f: &str| !f.is_empty() && !f.contains(['\t', '\n', '\r']);
    (plain(suffix) && plain(package) && plain(command))
        .then(|| format!("{suffix}\t{package}\t{command}\n"))
}

/// The (package, command) a hint file's `text` gives for the pack `suffix`. A line whose
/// fields are empty or hold control bytes is passed over (the text ends up in a terminal).
/// Plain loops: the runtime links this, and every packed output pays for its code.
pub fn find_hint<'a>(text: &'a [u8], suffix: &str) -> Option<(&'a [u8], &'a [u8])> {
    let text = &text[..HINT_MAX.min(text.len())];
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        let line = &rest[..end];
        rest = &rest[(end + 1).min(rest.len())..];
        let Some(after) = line.strip_prefix(suffix.as_bytes()) else {
            continue;
        };
        let Some(fields) = after.strip_prefix(b"\t") else {
            continue;
        };
        let Some(tab) = fields.iter().position(|&b| b == b'\t') else {
            continue;
        };
        let (package, command) = (&fields[..tab], &fields[tab + 1..]);
        let plain = |f: &[u8]| !f.is_empty() && f.iter().all(|&b| b >= 0x20 && b != 0x7f);
        if plain(package) && plain(command) {
            return Some((package, command));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_found_by_pack_suffix() {
        let text = [
            hint_line(
                ".sm_90.fatpack",
                "x-sm90",
                "pip install 'x-host[sm90]==1.0'",
            )
            .unwrap(),
            hint_line(".sm_80.fatpack", "x-sm80", "pip install x-sm80").unwrap(),
        ]
        .concat();
        assert_eq!(
            find_hint(text.as_bytes(), ".sm_90.fatpack"),
            Some((&b"x-sm90"[..], &b"pip install 'x-host[sm90]==1.0'"[..]))
        );
        assert_eq!(find_hint(text.as_bytes(), ".sm_75.fatpack"), None);
        assert_eq!(hint_line(".sm_90.fatpack", "a\tb", "c"), None);
        // Control bytes (an escape sequence, a stray tab or CR): the line is passed over.
        for bad in [
            &b".sm_90.fatpack\tp\x1b[31m\tcmd"[..],
            b".sm_90.fatpack\tp\tc\td",
            b".sm_90.fatpack\tp\tc\r",
            b".sm_90.fatpack\t\tc",
        ] {
            assert_eq!(find_hint(bad, ".sm_90.fatpack"), None, "{bad:?}");
        }
    }

    fn sample(skeleton: &[u8]) -> Manifest<'_> {
        Manifest {
            packs: vec![
                PackRecord {
                    kind: PackKind::Sass(90),
                    suffix: PackKind::Sass(90).suffix(),
                    len: 200,
                    digest: [3; 32],
                },
                PackRecord {
                    kind: PackKind::Ptx(80),
                    suffix: PackKind::Ptx(80).suffix(),
                    len: 64,
                    digest: [4; 32],
                },
            ],
            placements: vec![
                Placement {
                    pack: 0,
                    offset: 64,
                },
                Placement {
                    pack: 1,
                    offset: 64,
                },
            ],
            skeleton,
        }
    }

    #[test]
    fn manifests_round_trip_and_truncations_are_refused() {
        let m = sample(b"skeleton bytes");
        let b = m.to_bytes();
        assert_eq!(Manifest::parse(&b).unwrap(), m);
        for n in 0..b.len() {
            assert!(Manifest::parse(&b[..n]).is_err(), "prefix {n}");
        }
        assert_eq!(m.blob_range(0, 136), Some((0, 64..200)));
        assert_eq!(m.blob_range(0, 137), None);
        assert_eq!(m.blob_range(1, 0), Some((1, 64..64)));
        assert_eq!(m.blob_range(2, 0), None);
    }

    #[test]
    fn any_changed_byte_parses_or_is_refused_never_panics() {
        let b = sample(b"skeleton bytes").to_bytes();
        for at in 0..b.len() {
            for bit in [0x01u8, 0x80, 0xff] {
                let mut m = b.clone();
                m[at] ^= bit;
                if let Ok(p) = Manifest::parse(&m) {
                    // Whatever parses stays inside what it describes.
                    for id in 0..p.placements.len() as u32 {
                        if let Some((pack, r)) = p.blob_range(id, 8) {
                            assert!(r.end as u64 <= p.packs[pack].len);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bad_names_kinds_and_placements_are_refused() {
        let b = sample(b"s").to_bytes();
        let names_at = MANIFEST_HEADER_LEN + 2 * PACK_RECORD_LEN + 2 * PLACEMENT_LEN;
        let mut evil = b.clone();
        // ".sm_90.fatpack" -> "/sm_90.fatpack": a name that would leave the folder.
        evil[names_at] = b'/';
        assert!(Manifest::parse(&evil).unwrap_err().contains("named"));
        let mut k = b.clone();
        k[MANIFEST_HEADER_LEN + 8] = 7;
        assert!(Manifest::parse(&k).unwrap_err().contains("kind"));
        let mut p = b.clone();
        p[MANIFEST_HEADER_LEN + 2 * PACK_RECORD_LEN] = 5;
        assert!(Manifest::parse(&p).unwrap_err().contains("placement"));
        let mut o = b;
        o[MANIFEST_HEADER_LEN + 2 * PACK_RECORD_LEN + 8] = 1; // offset 1: inside the header
        assert!(Manifest::parse(&o).unwrap_err().contains("placement"));
    }

    #[test]
    fn pack_headers_identify_build_and_position() {
        let mut f = pack_header(2, &[9; 32]).to_vec();
        f.extend_from_slice(&[0; 16]);
        assert!(check_pack(&f, 2, &[9; 32], 80).is_ok());
        assert!(check_pack(&f, 1, &[9; 32], 80)
            .unwrap_err()
            .contains("another pack"));
        assert!(check_pack(&f, 2, &[8; 32], 80)
            .unwrap_err()
            .contains("another build"));
        assert!(check_pack(&f, 2, &[9; 32], 81)
            .unwrap_err()
            .contains("records"));
        assert!(check_pack(&f[..10], 2, &[9; 32], 80).is_err());
    }
}
