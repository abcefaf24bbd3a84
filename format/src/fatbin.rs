//! The CUDA fatbin container's wire layout: the one definition that the CLI's fatbin model
//! (read, prune, write back), `fatpack inspect` and the runtime's container encoder share.
//!
//! Learned from nvcc 13.0 output and checked against `cuobjdump`; all little-endian. A
//! container is a 16-byte [`ContainerHeader`] followed by entries, each an [`EntryHeader`]
//! (64 fixed bytes, then a tail up to `header_len` holding the identifier, ptxas options and
//! compatibility tables that the fixed fields point into) and its payload padded to 8
//! bytes. A section may hold several containers back to back, padded apart with zeros.

use crate::prelude::*;
use crate::wire_layout;
/// First word of every container.
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// The container version every nvcc seen writes.
pub const FATBIN_VERSION: u16 = 1;
pub const CONTAINER_HEADER_LEN: usize = ContainerHeader::LEN;
pub const ENTRY_HEADER_LEN: usize = EntryHeader::LEN;
/// Entry header format version in every nvcc output seen.
pub const ENTRY_FORMAT_VERSION: u16 = 0x0101;
/// `code_version` of the ELF entries nvcc 13 writes.
pub const ELF_CODE_VERSION: u32 = 0x0001_0008;

/// Entry kind codes (`EntryHeader::kind`), defined beside the kind they code.
pub use crate::arch::{KIND_ELF, KIND_NVVM, KIND_PTX};

/// Bits of `EntryHeader::flags`.
pub mod flags {
    pub const ADDR_64: u64 = 0x1;
    pub const DEBUG: u64 = 0x2;
    pub const HOST_LINUX: u64 = 0x10;
    /// `--compress-mode=speed`: one LZ4 block.
    pub const COMPRESSED_LZ4: u64 = 0x2000;
    /// nvcc 13's default compression: one zstd frame.
    pub const COMPRESSED_ZSTD: u64 = 0x8000;
    /// Either compression.
    pub const COMPRESSED: u64 = COMPRESSED_LZ4 | COMPRESSED_ZSTD;
    /// `sm_90a` / `compute_90a`.
    pub const ARCH_SPECIFIC: u64 = 0x10_0000;
    /// `sm_100f` / `compute_100f`.
    pub const ARCH_FAMILY: u64 = 0x20_0000;
}

wire_layout! {
    /// The 16 bytes at the start of a container.
    pub struct ContainerHeader (16) {
        magic: u32 = 0,
        version: u16 = 4,
        /// Bytes of this header (16); the entries start here.
        header_len: u16 = 6,
        /// Bytes of entries that follow the header.
        body_len: u64 = 8,
    }
}

wire_layout! {
    /// The fixed 64 bytes at the start of an entry.
    pub struct EntryHeader (64) {
        /// [`KIND_PTX`], [`KIND_ELF`], or another code.
        kind: u16 = 0,
        format_version: u16 = 2,
        /// Bytes of the whole header, tail included (>= 64); the payload starts here.
        header_len: u32 = 4,
        /// Bytes of payload as stored, padding to 8 included.
        payload_len: u64 = 8,
        /// For compressed entries: the compressed bytes inside the payload.
        compressed_len: u32 = 16,
        /// Offset (from the entry start) of the options block, 0 if none.
        options_offset: u32 = 20,
        /// PTX ISA version (`major << 16 | minor`) for PTX; ELF format version for cubins.
        code_version: u32 = 24,
        /// Compute capability number, `90` for sm_90.
        arch_number: u32 = 28,
        /// Offset (from the entry start) and length of the identifier string, 0 if none.
        ident_offset: u32 = 32,
        ident_len: u32 = 36,
        /// [`flags`].
        flags: u64 = 40,
        /// Zero in every nvcc output seen; kept for round trips.
        reserved: u64 = 48,
        /// For compressed entries: the decompressed size; 0 otherwise.
        uncompressed_len: u64 = 56,
    }
}

/// First word of a fatbin wrapper (`__fatBinC_Wrapper_t`, in `.nvFatBinSegment`): what the
/// host code hands `__cudaRegisterFatBinary`.
pub const WRAPPER_MAGIC: u32 = 0x4662_43b1;

wire_layout! {
    /// A fatbin wrapper as it lies in a 64-bit file (`.nvFatBinSegment`, 8-byte aligned).
    pub struct WrapperRecord (24) {
        /// [`WRAPPER_MAGIC`].
        magic: u32 = 0,
        /// 1, or 2 for a device link's wrapper (then `filename_or_fatbins` is a
        /// NULL-terminated array of the prelinked `__nv_relfatbin` containers).
        version: u32 = 4,
        /// Address of the container.
        data: u64 = 8,
        filename_or_fatbins: u64 = 16,
    }
}

impl ContainerHeader {
    /// A header for `body_len` bytes of entries.
    pub fn new(body_len: u64) -> Self {
        ContainerHeader {
            magic: FATBIN_MAGIC,
            version: FATBIN_VERSION,
            header_len: Self::LEN as u16,
            body_len,
        }
    }

    /// Header plus body: the container's length, `None` on overflow.
    pub fn total_len(&self) -> Option<u64> {
        u64::from(self.header_len).checked_add(self.body_len)
    }
}

impl EntryHeader {
    /// A minimal header like nvcc's for an uncompressed entry with no tail.
    pub fn new(
        kind: crate::arch::EntryKind,
        arch: crate::arch::Arch,
        code_version: u32,
        payload_len: u64,
    ) -> Self {
        EntryHeader {
            kind: kind.fatbin_code(),
            format_version: ENTRY_FORMAT_VERSION,
            header_len: Self::LEN as u32,
            payload_len,
            code_version,
            arch_number: arch.number,
            flags: flags::ADDR_64 | flags::HOST_LINUX | variant_flags(arch.variant),
            ..Default::default()
        }
    }

    pub fn entry_kind(&self) -> crate::arch::EntryKind {
        crate::arch::EntryKind::from_fatbin_code(self.kind)
    }

    pub fn variant(&self) -> crate::arch::Variant {
        use crate::arch::Variant;
        if self.flags & flags::ARCH_SPECIFIC != 0 {
            Variant::Specific
        } else if self.flags & flags::ARCH_FAMILY != 0 {
            Variant::Family
        } else {
            Variant::Plain
        }
    }

    pub fn arch(&self) -> crate::arch::Arch {
        crate::arch::Arch::with_variant(self.arch_number, self.variant())
    }

    /// The same header for an uncompressed payload of `payload_len` bytes.
    pub fn uncompressed(&self, payload_len: u64) -> Self {
        EntryHeader {
            payload_len,
            compressed_len: 0,
            flags: self.flags & !flags::COMPRESSED,
            uncompressed_len: 0,
            ..*self
        }
    }
}

/// The flag bits that say `a` or `f`.
pub fn variant_flags(v: crate::arch::Variant) -> u64 {
    match v {
        crate::arch::Variant::Plain => 0,
        crate::arch::Variant::Specific => flags::ARCH_SPECIFIC,
        crate::arch::Variant::Family => flags::ARCH_FAMILY,
    }
}

/// `len` rounded up to the 8-byte payload alignment; `None` on overflow.
pub fn padded(len: usize) -> Option<usize> {
    len.checked_add(7).map(|n| n & !7)
}

/// PTX ISA version of PTX text as `major << 16 | minor`, from its `.version` directive (what
/// nvcc records as a PTX entry's `code_version`); 0 when there is none.
pub fn ptx_version(ptx: &[u8]) -> u32 {
    let Some(at) = ptx.windows(8).position(|w| w == b".version") else {
        return 0;
    };
    let rest = &ptx[at + 8..];
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let num = |s: &[u8]| -> (u32, usize) {
        let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let v = s[..n].iter().fold(0u32, |a, d| {
            a.saturating_mul(10).saturating_add(u32::from(d - b'0'))
        });
        (v, n)
    };
    let (major, n) = num(rest);
    let minor = match rest.get(n) {
        Some(b'.') => num(&rest[n + 1..]).0,
        _ => 0,
    };
    (major << 16) | (minor & 0xFFFF)
}

/// Why a container cannot be encoded: the entry metadata is inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EncodeError(pub String);

/// One entry to encode: its identity, the header it had in its original container (kept
/// verbatim by the store, may be empty) and its raw payload.
#[derive(Debug, Clone, Copy)]
pub struct EntryInput<'a> {
    pub candidate: crate::arch::EntryId,
    pub attrs: &'a [u8],
    pub payload: &'a [u8],
}

/// The header for `e` with an uncompressed payload of `padded_len` bytes: its original header
/// with the compression fields cleared, or (when none was kept) a minimal one like nvcc's.
pub fn entry_header(e: &EntryInput<'_>, padded_len: usize) -> Result<Vec<u8>, EncodeError> {
    let c = &e.candidate;
    let plen = padded_len as u64;
    if e.attrs.is_empty() {
        let arch = crate::arch::Arch::with_variant(c.arch, c.variant);
        let code_version = match c.kind {
            crate::arch::EntryKind::Ptx => ptx_version(e.payload),
            _ => ELF_CODE_VERSION,
        };
        return Ok(EntryHeader::new(c.kind, arch, code_version, plen)
            .to_bytes()
            .to_vec());
    }
    let bad = |what: String| {
        Err(EncodeError(format!(
            "{}: stored entry header {what}",
            c.name()
        )))
    };
    let Some(h) = EntryHeader::read(e.attrs) else {
        return bad(format!(
            "is {} bytes (a fatbin entry header has at least {ENTRY_HEADER_LEN})",
            e.attrs.len()
        ));
    };
    if h.header_len as usize != e.attrs.len() {
        return bad(format!(
            "says it is {} bytes but {} are stored",
            h.header_len,
            e.attrs.len()
        ));
    }
    if h.kind != c.kind.fatbin_code() {
        return bad(format!(
            "has kind {}, the store says {}",
            h.kind,
            c.kind.fatbin_code()
        ));
    }
    if h.arch_number != c.arch {
        return bad(format!("is for arch {}", h.arch_number));
    }
    let mut out = e.attrs.to_vec();
    out[..ENTRY_HEADER_LEN].copy_from_slice(&h.uncompressed(plen).to_bytes());
    Ok(out)
}

/// The headers of `entries` and the length of the container they make.
pub fn plan_container(entries: &[EntryInput<'_>]) -> Result<(Vec<Vec<u8>>, usize), EncodeError> {
    let too_big = || EncodeError("fatbin larger than the address space".into());
    let mut headers = Vec::with_capacity(entries.len());
    let mut body = 0usize;
    for e in entries {
        let plen = padded(e.payload.len()).ok_or_else(too_big)?;
        let h = entry_header(e, plen)?;
        body = body
            .checked_add(h.len())
            .and_then(|b| b.checked_add(plen))
            .ok_or_else(too_big)?;
        headers.push(h);
    }
    let total = body.checked_add(CONTAINER_HEADER_LEN).ok_or_else(too_big)?;
    Ok((headers, total))
}

/// Writes one uncompressed container holding `entries`, in order, into `out`, which must be
/// zeroed and exactly as long as [`plan_container`] said (the padding is left as it is).
pub fn write_container(entries: &[EntryInput<'_>], headers: &[Vec<u8>], out: &mut [u8]) {
    let body = out.len() - CONTAINER_HEADER_LEN;
    out[..CONTAINER_HEADER_LEN].copy_from_slice(&ContainerHeader::new(body as u64).to_bytes());
    let mut at = CONTAINER_HEADER_LEN;
    for (e, h) in entries.iter().zip(headers) {
        out[at..at + h.len()].copy_from_slice(h);
        at += h.len();
        out[at..at + e.payload.len()].copy_from_slice(e.payload);
        at += padded(e.payload.len()).unwrap_or(e.payload.len());
    }
}

/// How an entry's payload goes into a container laid out before it exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadForm {
    /// The decoded bytes, `len` of them: the entry's header says uncompressed.
    Plain { len: usize },
    /// One zstd frame of `frame_len` bytes that decodes to `decoded_len`: the header says so
    /// as nvcc 13's compressed entries do ([`flags::COMPRESSED_ZSTD`]), for a driver that
    /// decodes them. Only for an entry with a stored header.
    Zstd {
        frame_len: usize,
        decoded_len: usize,
    },
}

impl PayloadForm {
    /// The bytes the payload takes before padding.
    pub fn len(&self) -> usize {
        match *self {
            PayloadForm::Plain { len } => len,
            PayloadForm::Zstd { frame_len, .. } => frame_len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A container laid out before its payloads exist, so they can be decoded (or copied)
/// straight into it (the runtime: no second copy of a module's code): `forms[i]` is entry i's
/// payload, and `entries[i].payload` is read only when the entry has no stored header
/// (`attrs`), for the minimal header (a PTX one takes its version from the payload); it must
/// then be the payload.
pub fn plan_empty_container(
    entries: &[EntryInput<'_>],
    forms: &[PayloadForm],
) -> Result<EmptyContainer, EncodeError> {
    let too_big = || EncodeError("fatbin larger than the address space".into());
    let mut headers = Vec::with_capacity(entries.len());
    let mut ranges = Vec::with_capacity(entries.len());
    let mut at = CONTAINER_HEADER_LEN;
    for (e, form) in entries.iter().zip(forms) {
        let len = form.len();
        let plain = matches!(form, PayloadForm::Plain { .. });
        if e.attrs.is_empty() && (!plain || e.payload.len() != len) {
            return Err(EncodeError(format!(
                "{}: no stored entry header, and no payload to make one from",
                e.candidate.name()
            )));
        }
        let plen = padded(len).ok_or_else(too_big)?;
        let mut h = entry_header(e, plen)?;
        if let PayloadForm::Zstd {
            frame_len,
            decoded_len,
        } = *form
        {
            let big = || {
                EncodeError(format!(
                    "{}: a compressed entry of {frame_len} bytes",
                    e.candidate.name()
                ))
            };
            // entry_header gives at least the fixed 64 bytes.
            let mut eh = EntryHeader::read(&h).ok_or_else(big)?;
            eh.flags = (eh.flags & !flags::COMPRESSED) | flags::COMPRESSED_ZSTD;
            eh.compressed_len = u32::try_from(frame_len).map_err(|_| big())?;
            eh.uncompressed_len = decoded_len as u64;
            h[..ENTRY_HEADER_LEN].copy_from_slice(&eh.to_bytes());
        }
        let start = at.checked_add(h.len()).ok_or_else(too_big)?;
        ranges.push(start..start.checked_add(len).ok_or_else(too_big)?);
        at = start.checked_add(plen).ok_or_else(too_big)?;
        headers.push(h);
    }
    Ok(EmptyContainer {
        headers,
        len: at,
        ranges,
    })
}

/// A container laid out before its payloads exist ([`plan_empty_container`]): headers and
/// the place of each payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyContainer {
    /// Each entry's header, written just before its payload.
    pub headers: Vec<Vec<u8>>,
    /// The container's length.
    pub len: usize,
    /// Where each payload goes.
    pub ranges: Vec<core::ops::Range<usize>>,
}

impl EmptyContainer {
    /// Writes the container header and the entry headers into `out` (zeroed, exactly `len`
    /// bytes); the payloads go into their ranges separately.
    pub fn write_headers(&self, out: &mut [u8]) {
        let body = out.len() - CONTAINER_HEADER_LEN;
        out[..CONTAINER_HEADER_LEN].copy_from_slice(&ContainerHeader::new(body as u64).to_bytes());
        for (h, r) in self.headers.iter().zip(&self.ranges) {
            out[r.start - h.len()..r.start].copy_from_slice(h);
        }
    }
}

/// [`plan_container`] and [`write_container`] into a new vector.
pub fn encode_container(entries: &[EntryInput<'_>]) -> Result<Vec<u8>, EncodeError> {
    let (headers, len) = plan_container(entries)?;
    let mut out = vec![0u8; len];
    write_container(entries, &headers, &mut out);
    Ok(out)
}

/// One entry of a container as [`read_container`] sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry<'a> {
    pub header: EntryHeader,
    /// The whole header, tail included.
    pub header_bytes: &'a [u8],
    /// The payload as stored, padding included.
    pub payload: &'a [u8],
}

/// Reads the container at the start of `b` (every size bounds-checked): its header, its
/// entries and the bytes it takes; `None` if it is not well formed.
pub fn read_container(b: &[u8]) -> Option<(ContainerHeader, Vec<RawEntry<'_>>, usize)> {
    let c = ContainerHeader::read(b)?;
    let end = usize::try_from(c.total_len()?).ok()?;
    if c.magic != FATBIN_MAGIC || usize::from(c.header_len) < CONTAINER_HEADER_LEN || end > b.len()
    {
        return None;
    }
    let mut out = Vec::new();
    let mut at = usize::from(c.header_len);
    while at < end {
        let e = &b[at..end];
        let h = EntryHeader::read(e)?;
        let hl = h.header_len as usize;
        let pl = usize::try_from(h.payload_len).ok()?;
        if hl < ENTRY_HEADER_LEN || hl.checked_add(pl)? > e.len() {
            return None;
        }
        out.push(RawEntry {
            header: h,
            header_bytes: &e[..hl],
            payload: &e[hl..hl + pl],
        });
        at += hl + pl;
    }
    Some((c, out, end))
}

#[cfg(test)]
mod in_place_tests {
    use super::*;

    #[test]
    fn a_container_laid_out_in_place_is_the_encoded_one() {
        let sass = EntryHeader::new(
            crate::arch::EntryKind::Sass,
            crate::arch::Arch::new(90),
            ELF_CODE_VERSION,
            0,
        )
        .to_bytes();
        let ptx = EntryHeader::new(
            crate::arch::EntryKind::Ptx,
            crate::arch::Arch::new(80),
            0x0008_0008,
            0,
        )
        .to_bytes();
        let payloads: [&[u8]; 2] = [&[7u8; 13], b".version 8.8\n.target sm_80\n"];
        let cands = [
            crate::arch::EntryId::new(crate::arch::EntryKind::Sass, 90, Default::default()),
            crate::arch::EntryId::new(crate::arch::EntryKind::Ptx, 80, Default::default()),
        ];
        let entries: Vec<EntryInput<'_>> = (0..2)
            .map(|i| EntryInput {
                candidate: cands[i],
                attrs: if i == 0 { &sass[..] } else { &ptx[..] },
                payload: payloads[i],
            })
            .collect();
        let whole = encode_container(&entries).unwrap();
        let forms: Vec<PayloadForm> = payloads
            .iter()
            .map(|p| PayloadForm::Plain { len: p.len() })
            .collect();
        let plan = plan_empty_container(&entries, &forms).unwrap();
        let mut out = vec![0u8; plan.len];
        plan.write_headers(&mut out);
        for (r, p) in plan.ranges.iter().zip(payloads) {
            out[r.clone()].copy_from_slice(p);
        }
        assert_eq!(out, whole);
        let no_attrs = [EntryInput {
            attrs: &[],
            payload: &[],
            ..entries[0]
        }];
        assert!(plan_empty_container(&no_attrs, &[PayloadForm::Plain { len: 13 }]).is_err());
        let with_payload = [EntryInput {
            attrs: &[],
            ..entries[1]
        }];
        let plan = plan_empty_container(
            &with_payload,
            &[PayloadForm::Plain {
                len: payloads[1].len(),
            }],
        )
        .unwrap();
        let mut out = vec![0u8; plan.len];
        plan.write_headers(&mut out);
        out[plan.ranges[0].clone()].copy_from_slice(payloads[1]);
        assert_eq!(out, encode_container(&with_payload).unwrap());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Arch, EntryKind, Variant};

    #[test]
    fn layouts_round_trip_at_their_offsets() {
        let h = EntryHeader {
            kind: KIND_ELF,
            format_version: ENTRY_FORMAT_VERSION,
            header_len: 80,
            payload_len: 0x1122_3344_5566_7788,
            compressed_len: 0x99aa_bbcc,
            options_offset: 64,
            code_version: 0x0008_0007,
            arch_number: 90,
            ident_offset: 72,
            ident_len: 5,
            flags: flags::ADDR_64 | flags::ARCH_SPECIFIC,
            reserved: 0,
            uncompressed_len: 4000,
        };
        let b = h.to_bytes();
        assert_eq!(b.len(), 64);
        assert_eq!(&b[0..2], &2u16.to_le_bytes());
        assert_eq!(&b[4..8], &80u32.to_le_bytes());
        assert_eq!(&b[28..32], &90u32.to_le_bytes());
        assert_eq!(&b[56..64], &4000u64.to_le_bytes());
        assert_eq!(EntryHeader::read(&b), Some(h));
        assert_eq!(EntryHeader::read(&b[..63]), None);
        assert_eq!(h.arch(), Arch::with_variant(90, Variant::Specific));
        assert_eq!(h.entry_kind(), EntryKind::Sass);
        let u = h.uncompressed(48);
        assert_eq!(
            (u.compressed_len, u.uncompressed_len, u.payload_len),
            (0, 0, 48)
        );
        assert_eq!(u.flags, h.flags);

        let c = ContainerHeader::new(0x3000);
        let cb = c.to_bytes();
        assert_eq!(&cb[..8], &[0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0]);
        assert_eq!(ContainerHeader::read(&cb), Some(c));
        assert_eq!(c.total_len(), Some(0x3010));
    }

    #[test]
    fn new_headers_carry_the_variant() {
        let h = EntryHeader::new(
            EntryKind::Ptx,
            Arch::with_variant(100, Variant::Family),
            ptx_version(b"//\n.version 8.8\n"),
            24,
        );
        assert_eq!(h.kind, KIND_PTX);
        assert_eq!(
            h.flags,
            flags::ADDR_64 | flags::HOST_LINUX | flags::ARCH_FAMILY
        );
        assert_eq!(h.code_version, 0x0008_0008);
        assert_eq!(ptx_version(b".version 12.10"), (12 << 16) | 10);
        assert_eq!(ptx_version(b"no directive"), 0);
        assert_eq!(padded(13), Some(16));
        assert_eq!(padded(usize::MAX), None);
    }
    use crate::arch::EntryId;

    /// A header like nvcc 13's for a zstd-compressed entry, with a 16-byte tail.
    fn nvcc_header(kind: u16, arch: u32, fl: u64) -> Vec<u8> {
        let h = EntryHeader {
            kind,
            format_version: ENTRY_FORMAT_VERSION,
            header_len: 80,
            payload_len: 1234,
            compressed_len: 1230,
            options_offset: 64,
            code_version: 0x0008_0007,
            arch_number: arch,
            flags: fl,
            uncompressed_len: 4000,
            ..Default::default()
        };
        let mut v = h.to_bytes().to_vec();
        v.extend_from_slice(b"-O3\0tail-bytes!\0");
        v
    }

    fn input<'a>(name: &str, attrs: &'a [u8], payload: &'a [u8]) -> EntryInput<'a> {
        EntryInput {
            candidate: EntryId::parse(name).unwrap(),
            attrs,
            payload,
        }
    }

    #[test]
    fn encodes_verbatim_headers_with_compression_cleared() {
        let h1 = nvcc_header(KIND_ELF, 90, 0x11 | flags::ARCH_SPECIFIC);
        let h2 = nvcc_header(KIND_PTX, 90, 0x11 | flags::COMPRESSED);
        let p1 = b"\x7fELF-cubin-for-sm_90a";
        let p2 = b".version 9.0\n.target sm_90\0";
        let b =
            encode_container(&[input("sm_90a", &h1, p1), input("compute_90", &h2, p2)]).unwrap();
        let (c, entries, used) = read_container(&b).unwrap();
        assert_eq!(
            (c.version, used, c.body_len as usize),
            (1, b.len(), b.len() - 16)
        );
        assert_eq!(entries.len(), 2);
        for (e, (h, p)) in entries.iter().zip([(&h1, &p1[..]), (&h2, &p2[..])]) {
            assert_eq!(e.header_bytes.len(), 80);
            assert_eq!(e.payload.len(), p.len().div_ceil(8) * 8);
            assert_eq!(&e.payload[..p.len()], p);
            assert!(e.payload[p.len()..].iter().all(|&z| z == 0));
            assert_eq!(e.header.payload_len as usize, e.payload.len());
            assert_eq!((e.header.compressed_len, e.header.uncompressed_len), (0, 0));
            assert_eq!(e.header.flags & flags::COMPRESSED, 0);
            // Everything else is the original header.
            let (got, orig) = (
                EntryHeader::read(e.header_bytes).unwrap(),
                EntryHeader::read(h).unwrap(),
            );
            let same_sizes = EntryHeader {
                payload_len: orig.payload_len,
                compressed_len: orig.compressed_len,
                flags: orig.flags,
                uncompressed_len: orig.uncompressed_len,
                ..got
            };
            assert_eq!(same_sizes, orig);
            assert_eq!(
                e.header_bytes.get(EntryHeader::LEN..),
                h.get(EntryHeader::LEN..)
            );
        }
        assert_eq!(entries[0].header.flags, 0x11 | flags::ARCH_SPECIFIC);
        assert_eq!(entries[1].header.flags, 0x11);
    }

    #[test]
    fn synthesises_a_header_when_none_was_stored() {
        let b = encode_container(&[input("compute_100f", &[], b"//\n.version 8.8\n")]).unwrap();
        let (_, e, _) = read_container(&b).unwrap();
        assert_eq!(e[0].header.kind, KIND_PTX);
        assert_eq!(e[0].header.arch_number, 100);
        assert_eq!(
            e[0].header.flags,
            flags::ADDR_64 | flags::HOST_LINUX | flags::ARCH_FAMILY
        );
        assert_eq!(e[0].header.code_version, 0x0008_0008);
        assert_eq!(e[0].header_bytes.len(), 64);
    }

    #[test]
    fn rejects_inconsistent_headers() {
        let good = nvcc_header(KIND_ELF, 80, 0x11);
        let mut short = good.clone();
        short.truncate(60);
        let mut wrong_size = good.clone();
        wrong_size[4..8].copy_from_slice(&96u32.to_le_bytes());
        let wrong_kind = nvcc_header(KIND_PTX, 80, 0x11);
        let wrong_arch = nvcc_header(KIND_ELF, 86, 0x11);
        for bad in [short, wrong_size, wrong_kind, wrong_arch] {
            assert!(encode_container(&[input("sm_80", &bad, b"x")]).is_err());
        }
        assert!(encode_container(&[input("sm_80", &good, b"x")]).is_ok());
    }

    #[test]
    fn empty_container_and_read_robustness() {
        let b = encode_container(&[]).unwrap();
        assert_eq!(b.len(), 16);
        assert_eq!(read_container(&b).unwrap().1.len(), 0);
        let h = nvcc_header(KIND_ELF, 80, 0x11);
        let full = encode_container(&[input("sm_80", &h, &[7u8; 13])]).unwrap();
        for cut in 0..full.len() {
            assert!(read_container(&full[..cut]).is_none());
        }
    }

    #[test]
    fn a_zstd_payload_is_flagged_as_nvcc_flags_its_compressed_entries() {
        let h = nvcc_header(KIND_ELF, 90, 0x11 | flags::COMPRESSED_LZ4);
        let e = input("sm_90", &h, b"");
        let form = PayloadForm::Zstd {
            frame_len: 13,
            decoded_len: 4000,
        };
        let plan = plan_empty_container(&[e], &[form]).unwrap();
        let mut out = vec![0u8; plan.len];
        plan.write_headers(&mut out);
        let r = plan.ranges[0].clone();
        assert_eq!(r.len(), 13);
        let eh = EntryHeader::read(&out[r.start - h.len()..]).unwrap();
        assert_eq!(
            (
                eh.flags,
                eh.compressed_len,
                eh.uncompressed_len,
                eh.payload_len
            ),
            (0x11 | flags::COMPRESSED_ZSTD, 13, 4000, 16)
        );
        assert_eq!(
            &out[r.start - h.len() + ENTRY_HEADER_LEN..r.start],
            &h[ENTRY_HEADER_LEN..],
            "the tail is kept"
        );
        let bare = input("sm_90", &[], b"");
        assert!(plan_empty_container(&[bare], &[form]).is_err());
    }
}
