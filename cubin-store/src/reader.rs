//! Zero-copy store reader over a byte slice.
//!
//! [`Store::parse`] validates the header, the index digest and every offset, length and
//! reference in the index, so that the views handed out afterwards cannot point outside the
//! slice. Blob bytes are only touched by [`Store::read_entry`] / [`Store::verify`].

use core::ops::Range;

use crate::prelude::*;

use crate::error::{Result, StoreError};
use crate::format::*;
use crate::meta::{
    arch_name, kind_from_wire, variant_from_wire, ArchVariant, Codec, EntryKind, EntryMeta,
};

#[derive(Debug)]
pub(crate) struct BlobInfo {
    offset: u64,
    stored_len: u64,
    raw_len: u64,
    codec: Codec,
    /// Codec 3: where the blob starts in its group's decoded bytes; 0 otherwise.
    skip: u64,
    /// Codec 3: decoded length of the whole group (its frame's content size, the end of its
    /// last stretch); the CLI's (the runtime checks only that the frame reaches the blob).
    #[cfg(feature = "std")]
    group_len: u64,
    digest: [u8; 32],
    refs: u32,
    /// First entry referencing this blob (for error messages), `u32::MAX` if none.
    first_ref: u32,
}

#[derive(Debug)]
pub(crate) struct ModInfo {
    name: Range<usize>,
    first: u32,
    count: u32,
}

#[derive(Debug)]
pub(crate) struct EntInfo {
    kind: EntryKind,
    variant: ArchVariant,
    arch: u32,
    blob: u32,
    attrs: Range<usize>,
    module: u32,
    index_in_module: u32,
}

fn blake3_of(b: &[u8]) -> [u8; 32] {
    *blake3::hash(b).as_bytes()
}

/// Computes the blake3 an entry's decoded bytes are checked against, told of them block by
/// block as they are decoded, so that hashing can run beside decoding (the runtime hashes on
/// a second thread: on the path to a program's first kernel the two together cost nearly
/// what decoding alone does).
///
/// What [`Store::read_entry_from_into`] guarantees to the sink: every `decoded` it is given
/// is a prefix of the same output buffer, each one at least as long as the one before; the
/// bytes of a prefix are never written again during the read; and the buffer stays alive
/// and untouched by the reader until `finish` returns or the sink is dropped (a failed read
/// drops it). So a sink may keep reading a prefix it was given (from another thread) until
/// then.
pub trait Blake3Sink {
    /// `decoded` is the output decoded so far.
    fn progress(&mut self, decoded: &[u8]);
    /// Decoding is done and `out` is all of it: blake3 of `out`.
    fn finish(self, out: &[u8]) -> [u8; 32];
}

/// The plain sink: one blake3 of the whole output at the end.
pub struct HashAtEnd;

impl Blake3Sink for HashAtEnd {
    fn progress(&mut self, _decoded: &[u8]) {}
    fn finish(self, out: &[u8]) -> [u8; 32] {
        blake3_of(out)
    }
}

/// Sorts `v` by `less`, in place, O(n log n). The reader's one sort: core's sort code is
/// over 10 KB, and this reader is linked into every packed output.
fn heapsort(v: &mut [u32], less: impl Fn(u32, u32) -> bool) {
    let sift = |v: &mut [u32], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && less(v[child], v[child + 1]) {
            child += 1;
        }
        if !less(v[root], v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    };
    for i in (0..v.len() / 2).rev() {
        sift(v, i, v.len());
    }
    for end in (1..v.len()).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

/// Where [`Parsed::parse_from`] reads the header, dictionary and index from.
pub(crate) trait Source {
    /// How many bytes of the store this source claims to cover.
    fn len(&self) -> u64;
    /// The bytes at `r`, in store offsets; `None` if the source does not hold them.
    fn get(&self, r: Range<usize>) -> Option<&[u8]>;
}

impl Source for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn get(&self, r: Range<usize>) -> Option<&[u8]> {
        <[u8]>::get(self, r)
    }
}

/// Everything [`Store::parse`] learns, independent of the slice's lifetime so a
/// [`crate::MappedStore`] can keep it next to its mapping.
pub(crate) struct Parsed {
    major: u16,
    minor: u16,
    header_len: u64,
    file_len: usize,
    index_len: u64,
    /// The whole header (`header_len` bytes), copied: the digest covers it, and a detached
    /// index ([`Store::skeleton`]) carries it.
    header: Box<[u8]>,
    index_offset: u64,
    dict_offset: u64,
    /// The index bytes, copied once and verified: module names and entry attributes are
    /// read from here, never again from the (possibly shared, possibly rewritten) mapping.
    index: Box<[u8]>,
    /// The dictionary, copied and verified likewise.
    dict: Option<Box<[u8]>>,
    digest: [u8; 32],
    blobs: Vec<BlobInfo>,
    modules: Vec<ModInfo>,
    entries: Vec<EntInfo>,
    /// Module indices sorted by name, for binary search.
    by_name: Vec<u32>,
    /// The dictionary digested for decoding (the CLI's; see `blockwise::Dict`).
    #[cfg(feature = "std")]
    ddict: Option<crate::blockwise::Dictionary>,
    /// Solid groups decoded whole, so that reading every entry decodes each group once
    /// (the CLI's; the runtime keeps one group, `last_group`).
    #[cfg(feature = "std")]
    groups: crate::solid::GroupCache,
    /// The last solid group the runtime read from, decoded as far as it needed, with its
    /// decoder: the next blob of that group continues from there. At most one group's bytes
    /// are kept (its decoded prefix).
    #[cfg(not(feature = "std"))]
    last_group: crate::blockwise::LastGroup,
}

enum ParsedRef<'a> {
    Owned(Box<Parsed>),
    Borrowed(&'a Parsed),
}

impl core::ops::Deref for ParsedRef<'_> {
    type Target = Parsed;
    fn deref(&self) -> &Parsed {
        match self {
            ParsedRef::Owned(p) => p,
            ParsedRef::Borrowed(p) => p,
        }
    }
}

/// A validated store borrowed from a byte slice (a whole `.fatpack` file, or an ELF section
/// inside a mapped object).
pub struct Store<'a> {
    bytes: &'a [u8],
    parsed: ParsedRef<'a>,
}

impl core::fmt::Debug for Store<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Store")
            .field("version", &(self.parsed.major, self.parsed.minor))
            .field("file_len", &self.parsed.file_len)
            .field("modules", &self.parsed.modules.len())
            .field("entries", &self.parsed.entries.len())
            .field("blobs", &self.parsed.blobs.len())
            .finish()
    }
}

/// Aggregate numbers about a store, for `inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreStats {
    pub version: (u16, u16),
    pub file_len: u64,
    pub header_len: u64,
    pub index_len: u64,
    pub dict_len: u64,
    pub modules: usize,
    pub entries: usize,
    pub blobs: usize,
    /// Blobs referenced by more than one entry.
    pub shared_blobs: usize,
    /// Sum of raw lengths over entries (what the store would be without dedup or compression).
    pub raw_bytes: u64,
    /// Sum of raw lengths over blobs (after dedup, before compression).
    pub unique_raw_bytes: u64,
    /// Sum of stored lengths over blobs.
    pub stored_bytes: u64,
}

impl<'a> Store<'a> {
    /// Validates `bytes` as a store. Bytes after the store's `file_len` are ignored (e.g.
    /// section padding). Blob contents are not read.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let parsed = Parsed::parse(bytes)?;
        let bytes = bytes.get(..parsed.file_len).unwrap_or_default();
        Ok(Store {
            bytes,
            parsed: ParsedRef::Owned(Box::new(parsed)),
        })
    }

    /// A store whose blobs are not in any slice this reader holds.
    pub(crate) fn detached(parsed: Parsed) -> Store<'static> {
        Store {
            bytes: &[],
            parsed: ParsedRef::Owned(Box::new(parsed)),
        }
    }

    /// Whether the blobs are elsewhere ([`Store::parse_skeleton`]): only
    /// [`Store::read_entry_from`] can read them.
    pub fn is_detached(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn parsed(&self) -> &Parsed {
        &self.parsed
    }

    pub(crate) fn from_parsed(bytes: &'a [u8], parsed: &'a Parsed) -> Self {
        Store {
            bytes: bytes.get(..parsed.file_len).unwrap_or_default(),
            parsed: ParsedRef::Borrowed(parsed),
        }
    }

    /// Whole-store digest: blake3 of the header bytes `[0, header_len)`. The header contains
    /// the index digest (which lists every blob's blake3) and the dictionary digest, so two
    /// stores with equal digests have identical modules, entries, metadata and contents.
    pub fn digest(&self) -> [u8; 32] {
        self.parsed.digest
    }

    /// Format version (major, minor) the store was written with.
    pub fn version(&self) -> (u16, u16) {
        (self.parsed.major, self.parsed.minor)
    }

    /// The store's bytes, exactly `file_len` long.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The zstd dictionary shared by `ZstdDict` blobs, if the store has one.
    pub fn dictionary(&self) -> Option<&[u8]> {
        self.parsed.dict.as_deref()
    }

    pub fn module_count(&self) -> usize {
        self.parsed.modules.len()
    }

    pub fn entry_count(&self) -> usize {
        self.parsed.entries.len()
    }

    pub fn blob_count(&self) -> usize {
        self.parsed.blobs.len()
    }

    /// Modules in the order they were added.
    pub fn modules(&self) -> impl ExactSizeIterator<Item = ModuleView<'_>> + '_ {
        self.parsed
            .modules
            .iter()
            .enumerate()
            .map(move |(i, info)| ModuleView {
                store: self.coerce(),
                info,
                index: i,
            })
    }

    pub fn module(&self, idx: usize) -> Option<ModuleView<'_>> {
        self.parsed.modules.get(idx).map(|info| ModuleView {
            store: self.coerce(),
            info,
            index: idx,
        })
    }

    pub fn module_by_name(&self, name: &str) -> Option<ModuleView<'_>> {
        let by_name = &self.parsed.by_name;
        let pos = by_name
            .binary_search_by(|&m| self.module_name_bytes(m).cmp(name.as_bytes()))
            .ok()?;
        self.module(*by_name.get(pos)? as usize)
    }

    /// Every entry of every module, in module order.
    pub fn entries(&self) -> impl Iterator<Item = EntryView<'_>> + '_ {
        let store = self.coerce();
        self.parsed
            .entries
            .iter()
            .filter_map(move |info| EntryView::new(store, info))
    }

    /// Blobs in storage order.
    pub fn blobs(&self) -> impl ExactSizeIterator<Item = BlobView> + '_ {
        self.parsed
            .blobs
            .iter()
            .enumerate()
            .map(|(i, b)| BlobView::new(i as u32, b))
    }

    pub fn blob(&self, id: u32) -> Option<BlobView> {
        self.parsed
            .blobs
            .get(id as usize)
            .map(|b| BlobView::new(id, b))
    }

    /// Decompresses one entry and checks its length and blake3.
    pub fn read_entry(&self, e: &EntryView<'_>) -> Result<Vec<u8>> {
        if !core::ptr::eq::<Parsed>(&*e.store.parsed, &*self.parsed) {
            return Err(StoreError::ForeignEntry);
        }
        self.read_blob_inner(e.info.blob, Some(e.info))
    }

    /// Decompresses one blob by id and checks its length and blake3.
    pub fn read_blob(&self, id: u32) -> Result<Vec<u8>> {
        self.read_blob_inner(id, None)
    }

    /// Like [`Store::read_entry`], with the entry's stored bytes supplied by the caller: for
    /// a detached store ([`Store::parse_skeleton`]) whose blobs live in other files. The
    /// bytes are checked against this store's index (stored length, raw length, blake3).
    pub fn read_entry_from(&self, e: &EntryView<'_>, stored: &[u8]) -> Result<Vec<u8>> {
        if !core::ptr::eq::<Parsed>(&*e.store.parsed, &*self.parsed) {
            return Err(StoreError::ForeignEntry);
        }
        self.decode_blob(e.info.blob, Some(e.info), stored)
    }

    /// [`Store::read_entry_from`] into the caller's buffer, which must be exactly the
    /// entry's raw length; on error its contents are unspecified. `blake3` computes the
    /// digest the decoded bytes are checked against, as they are decoded ([`Blake3Sink`];
    /// [`HashAtEnd`] hashes once at the end); it must give blake3's hash of exactly `out`.
    pub fn read_entry_from_into(
        &self,
        e: &EntryView<'_>,
        stored: &[u8],
        out: &mut [u8],
        blake3: impl Blake3Sink,
    ) -> Result<()> {
        if !core::ptr::eq::<Parsed>(&*e.store.parsed, &*self.parsed) {
            return Err(StoreError::ForeignEntry);
        }
        self.decode_blob_into(e.info.blob, Some(e.info), stored, out, blake3)
    }

    /// The stored bytes of an entry of this (not detached) store.
    pub fn stored_bytes(&self, e: &EntryView<'_>) -> Result<&'a [u8]> {
        if !core::ptr::eq::<Parsed>(&*e.store.parsed, &*self.parsed) {
            return Err(StoreError::ForeignEntry);
        }
        self.stored_of(e.info.blob)
    }

    /// Like [`Store::read_blob`], with the stored bytes supplied by the caller.
    pub fn read_blob_from(&self, id: u32, stored: &[u8]) -> Result<Vec<u8>> {
        self.decode_blob(id, None, stored)
    }

    /// Reads and checks every blob, one at a time (memory stays at the largest blob).
    pub fn verify(&self) -> Result<()> {
        for id in 0..self.parsed.blobs.len() {
            self.read_blob_inner(id as u32, None)?;
        }
        Ok(())
    }

    pub fn stats(&self) -> StoreStats {
        let p = &*self.parsed;
        let raw_bytes = p
            .entries
            .iter()
            .filter_map(|e| p.blobs.get(e.blob as usize))
            .fold(0u64, |acc, b| acc.saturating_add(b.raw_len));
        StoreStats {
            version: (p.major, p.minor),
            file_len: p.file_len as u64,
            header_len: p.header_len,
            index_len: p.index_len,
            dict_len: p.dict.as_ref().map_or(0, |r| r.len() as u64),
            modules: p.modules.len(),
            entries: p.entries.len(),
            blobs: p.blobs.len(),
            shared_blobs: p.blobs.iter().filter(|b| b.refs > 1).count(),
            raw_bytes,
            unique_raw_bytes: p
                .blobs
                .iter()
                .fold(0u64, |acc, b| acc.saturating_add(b.raw_len)),
            stored_bytes: distinct_frames(p.blobs.iter().map(|b| (b.offset, b.stored_len))),
        }
    }

    /// Shortens the borrow so views can hold `&'s Store<'s>` (Store is covariant).
    fn coerce(&self) -> &Store<'_> {
        self
    }

    fn module_name_bytes(&self, m: u32) -> &[u8] {
        self.parsed
            .modules
            .get(m as usize)
            .and_then(|info| self.parsed.index.get(info.name.clone()))
            .unwrap_or_default()
    }

    fn module_name(&self, m: u32) -> &str {
        core::str::from_utf8(self.module_name_bytes(m)).unwrap_or_default()
    }

    /// Names the blob for error messages: by its entry if we know it, else by first referrer.
    fn describe(&self, id: u32, entry: Option<&EntInfo>) -> (String, String) {
        let entry = entry.or_else(|| {
            let first = self.parsed.blobs.get(id as usize)?.first_ref;
            self.parsed.entries.get(first as usize)
        });
        match entry {
            Some(e) => (
                self.module_name(e.module).to_owned(),
                arch_name(e.kind, e.arch, e.variant),
            ),
            None => ("<unreferenced>".to_owned(), format!("blob {id}")),
        }
    }

    fn read_blob_inner(&self, id: u32, entry: Option<&EntInfo>) -> Result<Vec<u8>> {
        self.decode_blob(id, entry, self.stored_of(id)?)
    }

    /// The stored bytes of blob `id` in this store's slice (none in a detached store).
    fn stored_of(&self, id: u32) -> Result<&'a [u8]> {
        let blob = self
            .parsed
            .blobs
            .get(id as usize)
            .ok_or(StoreError::ForeignEntry)?;
        let oob = || StoreError::BlobOutOfBounds {
            blob: id,
            offset: blob.offset,
            len: blob.stored_len,
            start: 0,
            end: self.bytes.len() as u64,
        };
        let start = usize::try_from(blob.offset).map_err(|_| oob())?;
        let len = usize::try_from(blob.stored_len).map_err(|_| oob())?;
        start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(oob)
    }

    /// Decodes `src`, the stored bytes of blob `id` (from this store or from wherever a
    /// detached store's blobs are), and checks length and blake3 against the index.
    fn decode_blob(&self, id: u32, entry: Option<&EntInfo>, src: &[u8]) -> Result<Vec<u8>> {
        let blob = self
            .parsed
            .blobs
            .get(id as usize)
            .ok_or(StoreError::ForeignEntry)?;
        let raw_len = usize::try_from(blob.raw_len)
            .map_err(|_| StoreError::OutOfMemory { need: blob.raw_len })?;
        let mut out = Vec::new();
        out.try_reserve_exact(raw_len)
            .map_err(|_| StoreError::OutOfMemory { need: blob.raw_len })?;
        out.resize(raw_len, 0);
        self.decode_blob_into(id, entry, src, &mut out, HashAtEnd)?;
        Ok(out)
    }

    fn check_stored(&self, id: u32, entry: Option<&EntInfo>, src: &[u8]) -> Result<()> {
        let blob = self
            .parsed
            .blobs
            .get(id as usize)
            .ok_or(StoreError::ForeignEntry)?;
        if src.len() as u64 != blob.stored_len {
            let (module, arch) = self.describe(id, entry);
            return Err(StoreError::BlobLengthMismatch {
                module,
                arch,
                expected: blob.stored_len,
                found: src.len() as u64,
            });
        }
        Ok(())
    }

    /// [`Store::decode_blob`] into `out`, which must be exactly the blob's raw length: the
    /// caller's buffer (the runtime decodes straight into the container it hands cudart).
    fn decode_blob_into(
        &self,
        id: u32,
        entry: Option<&EntInfo>,
        src: &[u8],
        out: &mut [u8],
        mut digest: impl Blake3Sink,
    ) -> Result<()> {
        let blob = self
            .parsed
            .blobs
            .get(id as usize)
            .ok_or(StoreError::ForeignEntry)?;
        self.check_stored(id, entry, src)?;
        if out.len() as u64 != blob.raw_len {
            let (module, arch) = self.describe(id, entry);
            return Err(StoreError::BlobLengthMismatch {
                module,
                arch,
                expected: blob.raw_len,
                found: out.len() as u64,
            });
        }
        let corrupt = |message: String| {
            let (module, arch) = self.describe(id, entry);
            StoreError::CorruptFrame {
                module,
                arch,
                message,
            }
        };
        if blob.codec == Codec::Raw {
            out.copy_from_slice(src);
            digest.progress(out);
        } else {
            let n = self
                .decompress_into(blob, src, out, &mut |p| digest.progress(p))
                .map_err(|e| match e {
                    DecodeError::Frame(m) => corrupt(m),
                    DecodeError::Dict(m) => StoreError::BadDictionary(m),
                })?;
            if n as u64 != blob.raw_len {
                let (module, arch) = self.describe(id, entry);
                return Err(StoreError::BlobLengthMismatch {
                    module,
                    arch,
                    expected: blob.raw_len,
                    found: n as u64,
                });
            }
        }
        if digest.finish(out) != blob.digest {
            let (module, arch) = self.describe(id, entry);
            return Err(StoreError::BlobDigestMismatch { module, arch });
        }
        Ok(())
    }

    /// Decodes the zstd blob `blob` (codecs 1-3) from its stored bytes `src` into `out`
    /// (exactly its raw length), telling `progress` of each prefix of `out` that is final;
    /// returns the bytes decoded. A frame is checked before it reaches the decoder, so only
    /// plain single zstd frames do (no skippable frames, no concatenation, no legacy
    /// formats), with the content size the index implies. Codecs 1 and 2 decode a block at a
    /// time straight into `out` (zstd's buffer-less API, the earlier output serving as
    /// history); a frame that would decode past it fails ("destination buffer too small").
    /// A solid group's blob is its stretch of the group: the runtime decodes the group's
    /// prefix up to it and keeps nothing; the CLI decodes the group whole once and keeps it
    /// for its other blobs (reading every entry then decodes each group once). One call of
    /// the decoder for all codecs: the runtime linked into every packed output stays small.
    #[inline(never)]
    fn decompress_into(
        &self,
        blob: &BlobInfo,
        src: &[u8],
        out: &mut [u8],
        progress: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, DecodeError> {
        let solid = blob.codec == Codec::ZstdSolid;
        let (skip, len) = (blob.skip as usize, out.len());
        // Parse checked skip + raw_len against the ratio bound: no overflow.
        let end = skip + len;
        #[cfg(feature = "std")]
        if let Some(group) = solid.then(|| self.parsed.groups.get(blob.offset)).flatten() {
            let stretch = group.get(skip..end).ok_or_else(|| {
                DecodeError::Frame("the group's frame ends before the blob".into())
            })?;
            out.copy_from_slice(stretch);
            progress(out);
            return Ok(len);
        }
        let content = check_frame(src).map_err(DecodeError::Frame)?;
        #[cfg(feature = "std")]
        let fits = content == if solid { blob.group_len } else { blob.raw_len };
        #[cfg(not(feature = "std"))]
        let fits = if solid {
            content >= end as u64
        } else {
            content == blob.raw_len
        };
        if !fits {
            return Err(DecodeError::Frame(
                "the frame's content size is not the index's".into(),
            ));
        }
        #[cfg(not(feature = "std"))]
        if solid {
            return self.parsed.last_group.with(|kept| {
                let g = match kept {
                    Some(g) if g.key == blob.offset => g,
                    _ => kept.insert(
                        crate::blockwise::Resumable::new(blob.offset, content as usize)
                            .ok_or_else(|| {
                                DecodeError::Frame("out of memory for the solid group".into())
                            })?,
                    ),
                };
                let stretch = match g.advance(src, end) {
                    Ok(_) => g.decoded().get(skip..end).ok_or_else(|| {
                        DecodeError::Frame("the group's frame ends before the blob".into())
                    }),
                    Err(e) => Err(e.into()),
                };
                match stretch {
                    Ok(stretch) => out.copy_from_slice(stretch),
                    // A damaged group is not kept.
                    Err(e) => {
                        *kept = None;
                        return Err(e);
                    }
                }
                progress(out);
                Ok(len)
            });
        }
        let dict = match blob.codec {
            Codec::ZstdDict => Some(self.dictionary_for_decoding().ok_or_else(|| {
                DecodeError::Dict("blob needs a dictionary the store lacks".into())
            })?),
            _ => None,
        };
        // A solid blob (the CLI's; the runtime's took the kept group above): the whole group,
        // into a buffer of its own.
        let mut group: Vec<u8> = Vec::new();
        #[cfg(feature = "std")]
        if solid {
            group
                .try_reserve_exact(content as usize)
                .map_err(|_| DecodeError::Frame("out of memory for the solid group".into()))?;
            group.resize(content as usize, 0);
        }
        let (dst, tell): (&mut [u8], Progress<'_>) = if solid {
            (&mut group, &mut |_: &[u8]| {})
        } else {
            (out, progress)
        };
        let n = crate::blockwise::decode_frame_into(src, dict, dst, tell)?;
        if !solid {
            return Ok(n);
        }
        let stretch = group
            .get(skip..end)
            .filter(|_| n >= end)
            .ok_or_else(|| DecodeError::Frame("the group's frame ends before the blob".into()))?;
        out.copy_from_slice(stretch);
        progress(out);
        #[cfg(feature = "std")]
        self.parsed.groups.keep(blob.offset, group);
        Ok(len)
    }

    /// The store's dictionary as the decoder takes it: digested once (the CLI's), or its
    /// bytes (the runtime's, which reads each module once).
    fn dictionary_for_decoding(&self) -> Option<crate::blockwise::Dict<'_>> {
        #[cfg(feature = "std")]
        return self
            .parsed
            .ddict
            .as_ref()
            .map(crate::blockwise::Dict::Digested);
        #[cfg(not(feature = "std"))]
        return self
            .parsed
            .dict
            .as_deref()
            .map(crate::blockwise::Dict::Bytes);
    }
}

/// Told of each prefix of the output that is final.
type Progress<'a> = &'a mut dyn FnMut(&[u8]);

enum DecodeError {
    Frame(String),
    Dict(String),
}

impl From<crate::blockwise::Failure> for DecodeError {
    fn from(e: crate::blockwise::Failure) -> Self {
        match e {
            crate::blockwise::Failure::Dictionary(m) => DecodeError::Dict(m),
            crate::blockwise::Failure::Frame(m) => DecodeError::Frame(m),
        }
    }
}

/// Checked before any frame reaches the decoder, so only plain single zstd frames do (no
/// skippable frames, no concatenation, no legacy formats): the magic, a content size, and one
/// frame spanning all of `src`. Returns the content size. Static messages: the runtime linked
/// into every packed output has no room for more formatting (its size budget is a test).
fn check_frame(src: &[u8]) -> core::result::Result<u64, String> {
    if src.get(..4) != Some(&ZSTD_MAGIC[..]) {
        return Err("not a zstd frame (bad frame magic)".into());
    }
    let content = match zstd_safe::get_frame_content_size(src) {
        Ok(Some(n)) => n,
        Ok(None) => return Err("frame has no content size".into()),
        Err(_) => return Err("unreadable frame header".into()),
    };
    match zstd_safe::find_frame_compressed_size(src) {
        Ok(n) if n == src.len() => Ok(content),
        Ok(_) => Err("the frame's length is not the blob's".into()),
        Err(code) => Err(zstd_safe::get_error_name(code).to_owned()),
    }
}

/// One blob as recorded in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobView {
    pub id: u32,
    /// Offset from the start of the store.
    pub offset: u64,
    pub stored_len: u64,
    pub raw_len: u64,
    pub codec: Codec,
    /// [`Codec::ZstdSolid`]: where the blob starts in its group's decoded bytes (the group's
    /// frame is `offset..offset + stored_len`, shared by its blobs); 0 otherwise.
    pub skip: u64,
    /// blake3 of the raw (decompressed) bytes.
    pub digest: [u8; 32],
    /// Number of entries that use this blob.
    pub ref_count: u32,
}

impl BlobView {
    /// Whether this blob is in the same solid group as `before`, the blob before it: the
    /// two share one frame, which is stored (and copied, and counted) once.
    pub fn shares_frame_with(&self, before: &BlobView) -> bool {
        self.codec == Codec::ZstdSolid
            && before.codec == Codec::ZstdSolid
            && self.offset == before.offset
    }

    fn new(id: u32, b: &BlobInfo) -> Self {
        BlobView {
            id,
            offset: b.offset,
            stored_len: b.stored_len,
            raw_len: b.raw_len,
            codec: b.codec,
            skip: b.skip,
            digest: b.digest,
            ref_count: b.refs,
        }
    }
}

/// A module of a parsed store.
#[derive(Clone, Copy)]
pub struct ModuleView<'s> {
    store: &'s Store<'s>,
    info: &'s ModInfo,
    index: usize,
}

impl core::fmt::Debug for ModuleView<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ModuleView")
            .field("index", &self.index)
            .field("name", &self.name())
            .field("entries", &self.info.count)
            .finish()
    }
}

impl<'s> ModuleView<'s> {
    /// Position in the store (insertion order).
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn name(&self) -> &'s str {
        core::str::from_utf8(
            self.store
                .parsed
                .index
                .get(self.info.name.clone())
                .unwrap_or_default(),
        )
        .unwrap_or_default()
    }

    pub fn entry_count(&self) -> usize {
        self.info.count as usize
    }

    /// Entries in the order they were added.
    pub fn entries(&self) -> impl Iterator<Item = EntryView<'s>> + 's {
        let store = self.store;
        let first = self.info.first as usize;
        let end = first.saturating_add(self.info.count as usize);
        store
            .parsed
            .entries
            .get(first..end)
            .unwrap_or_default()
            .iter()
            .filter_map(move |info| EntryView::new(store, info))
    }

    pub fn entry(&self, idx: usize) -> Option<EntryView<'s>> {
        if idx >= self.info.count as usize {
            return None;
        }
        let info = self
            .store
            .parsed
            .entries
            .get((self.info.first as usize).checked_add(idx)?)?;
        EntryView::new(self.store, info)
    }

    /// First entry with exactly this kind, arch and variant.
    pub fn find(&self, kind: EntryKind, arch: u32, variant: ArchVariant) -> Option<EntryView<'s>> {
        self.entries()
            .find(|e| e.kind() == kind && e.arch() == arch && e.variant() == variant)
    }
}

/// An entry of a parsed store: metadata plus where its bytes are.
#[derive(Clone, Copy)]
pub struct EntryView<'s> {
    store: &'s Store<'s>,
    info: &'s EntInfo,
    blob: &'s BlobInfo,
}

impl core::fmt::Debug for EntryView<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EntryView")
            .field("module", &self.module_name())
            .field("arch", &self.arch_name())
            .field("blob", &self.info.blob)
            .field("raw_len", &self.blob.raw_len)
            .field("stored_len", &self.blob.stored_len)
            .finish()
    }
}

impl<'s> EntryView<'s> {
    fn new(store: &'s Store<'s>, info: &'s EntInfo) -> Option<Self> {
        let blob = store.parsed.blobs.get(info.blob as usize)?;
        Some(EntryView { store, info, blob })
    }

    pub fn module_index(&self) -> usize {
        self.info.module as usize
    }

    pub fn module_name(&self) -> &'s str {
        self.store.module_name(self.info.module)
    }

    /// Position within its module.
    pub fn index_in_module(&self) -> usize {
        self.info.index_in_module as usize
    }

    pub fn kind(&self) -> EntryKind {
        self.info.kind
    }

    pub fn arch(&self) -> u32 {
        self.info.arch
    }

    pub fn variant(&self) -> ArchVariant {
        self.info.variant
    }

    pub fn attrs(&self) -> &'s [u8] {
        self.store
            .parsed
            .index
            .get(self.info.attrs.clone())
            .unwrap_or_default()
    }

    /// The metadata as it was given to the writer.
    pub fn meta(&self) -> EntryMeta {
        EntryMeta {
            id: crate::meta::EntryId::new(self.info.kind, self.info.arch, self.info.variant),
            attrs: self.attrs().to_vec(),
        }
    }

    pub fn arch_name(&self) -> String {
        arch_name(self.info.kind, self.info.arch, self.info.variant)
    }

    pub fn blob_id(&self) -> u32 {
        self.info.blob
    }

    pub fn blob(&self) -> BlobView {
        BlobView::new(self.info.blob, self.blob)
    }

    pub fn raw_len(&self) -> u64 {
        self.blob.raw_len
    }

    /// The stored bytes of the entry's blob; for a blob of a solid group, the whole group's
    /// frame (see [`EntryView::stored_share`]).
    pub fn stored_len(&self) -> u64 {
        self.blob.stored_len
    }

    #[cfg(feature = "std")]
    /// What the entry's blob costs in the store: its stored length, or for a blob of a solid
    /// group its share of the group's frame, in proportion to its raw length (the shares of a
    /// group add up to its frame, give or take rounding).
    pub fn stored_share(&self) -> u64 {
        match self.blob.codec {
            Codec::ZstdSolid if self.blob.group_len > 0 => {
                (u128::from(self.blob.stored_len) * u128::from(self.blob.raw_len)
                    / u128::from(self.blob.group_len)) as u64
            }
            _ => self.blob.stored_len,
        }
    }

    pub fn codec(&self) -> Codec {
        self.blob.codec
    }

    /// blake3 of the raw bytes.
    pub fn digest(&self) -> [u8; 32] {
        self.blob.digest
    }

    /// Number of entries (this one included) that share the blob.
    pub fn ref_count(&self) -> u32 {
        self.blob.refs
    }

    /// True if another entry uses the same bytes.
    pub fn is_shared(&self) -> bool {
        self.blob.refs > 1
    }

    /// Same as [`Store::read_entry`].
    pub fn read(&self) -> Result<Vec<u8>> {
        self.store.read_blob_inner(self.info.blob, Some(self.info))
    }
}

// ---------------------------------------------------------------------------------------------
// Validation.

fn header_err(msg: impl Into<String>) -> StoreError {
    StoreError::MalformedHeader(msg.into())
}

fn index_err(msg: impl Into<String>) -> StoreError {
    StoreError::MalformedIndex(msg.into())
}

/// `start..start+len` as a `usize` range, if it fits and ends at or before `limit`.
fn range_within(start: u64, len: u64, limit: u64) -> Option<Range<usize>> {
    let end = start.checked_add(len)?;
    if end > limit {
        return None;
    }
    Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
}

impl Parsed {
    pub(crate) fn file_len(&self) -> usize {
        self.file_len
    }

    pub(crate) fn header_bytes(&self) -> &[u8] {
        &self.header
    }

    pub(crate) fn index_bytes(&self) -> &[u8] {
        &self.index
    }

    pub(crate) fn index_at(&self) -> u64 {
        self.index_offset
    }

    pub(crate) fn dict_bytes(&self) -> &[u8] {
        self.dict.as_deref().unwrap_or_default()
    }

    pub(crate) fn dict_at(&self) -> Option<u64> {
        self.dict.as_ref().map(|_| self.dict_offset)
    }

    pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed> {
        Self::parse_from(&bytes)
    }

    /// Parses from wherever `src` finds the header, dictionary and index: a whole store, or
    /// a detached index whose blobs live elsewhere ([`crate::skeleton`]).
    pub(crate) fn parse_from(src: &dyn Source) -> Result<Parsed> {
        let have = src.len();
        let (hdr, h) = read_header(src, have)?;
        let header_len = u64::from(h.header_len);
        let file_len_us =
            usize::try_from(h.file_len).map_err(|_| truncated("store", h.file_len, have))?;
        let index = read_index(src, &h)?;
        let dict = read_dictionary(src, &h)?;
        let (data_start, dict) = match dict {
            Some((end, d)) => (end, Some(d)),
            None => (header_len, None),
        };
        #[cfg(feature = "std")]
        let ddict = match dict.as_deref() {
            Some(d) => Some(crate::blockwise::Dictionary::new(d).ok_or(
                StoreError::OutOfMemory {
                    need: d.len() as u64,
                },
            )?),
            None => None,
        };
        let tables = Tables::parse(&index, h.index_len)?;
        let mut blobs = tables.blobs(&index, data_start, &h, dict.is_some())?;
        let modules = tables.modules(&index)?;
        let entries = tables.entries(&index, &modules, &mut blobs)?;
        let by_name = sorted_names(&index, &modules)?;

        // The digest covers the whole header (header_len may exceed the fixed fields); the
        // bytes past HEADER_LEN are copied here once, then only the copy is hashed.
        let header_len_us = usize::try_from(header_len).unwrap_or(HEADER_LEN);
        let full_header: Box<[u8]> = match src.get(HEADER_LEN..header_len_us) {
            Some(rest) => hdr.iter().chain(rest).copied().collect(),
            None => hdr.to_vec().into(),
        };
        let digest = store_digest(&full_header);
        Ok(Parsed {
            major: h.major,
            minor: h.minor,
            header_len,
            file_len: file_len_us,
            index_len: h.index_len,
            header: full_header,
            index_offset: h.index_offset,
            dict_offset: h.dict_offset,
            index,
            dict,
            digest,
            blobs,
            modules,
            entries,
            by_name,
            #[cfg(feature = "std")]
            ddict,
            #[cfg(feature = "std")]
            groups: Default::default(),
            #[cfg(not(feature = "std"))]
            last_group: Default::default(),
        })
    }
}

fn truncated(what: &'static str, need: u64, have: u64) -> StoreError {
    StoreError::Truncated { what, need, have }
}

/// The fixed header, as a copy (a file rewritten in place while it is mapped cannot change
/// what was verified), and its fields checked against each other and the source's length.
fn read_header(src: &dyn Source, have: u64) -> Result<([u8; HEADER_LEN], Header)> {
    let head = src
        .get(0..HEADER_LEN.min(have as usize))
        .unwrap_or_default();
    // Check what is present in order, so a short prefix of a valid store reports
    // truncation while garbage or a newer store reports what it is: the magic (bytes 0-7)
    // and the version (8-11, see Header) are read from as much as there is.
    if let Some(found) = get_array::<8>(head, 0) {
        if found != MAGIC {
            return Err(StoreError::BadMagic { found });
        }
    }
    if let (Some(major), Some(minor)) = (get_array::<2>(head, 8), get_array::<2>(head, 10)) {
        let (major, minor) = (u16::from_le_bytes(major), u16::from_le_bytes(minor));
        if major != FORMAT_MAJOR {
            return Err(StoreError::UnsupportedVersion {
                major,
                minor,
                supported: FORMAT_MAJOR,
            });
        }
    }
    let fixed: [u8; HEADER_LEN] = head
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| truncated("header", HEADER_LEN as u64, have))?;
    let h = Header::read(&fixed).unwrap_or_default();
    let (header_len, file_len) = (u64::from(h.header_len), h.file_len);
    if header_len < HEADER_LEN as u64 || !is_aligned(header_len) {
        return Err(header_err(format!(
            "header_len {header_len} (must be >= {HEADER_LEN} and a multiple of {ALIGN})"
        )));
    }
    if file_len > have {
        return Err(truncated("store", file_len, have));
    }
    if header_len > file_len {
        return Err(header_err(format!(
            "header_len {header_len} exceeds file_len {file_len}"
        )));
    }
    if h.reserved != 0 {
        return Err(header_err("reserved field is not zero"));
    }
    Ok((fixed, h))
}

/// A copy of the index, checked against its digest.
fn read_index(src: &dyn Source, h: &Header) -> Result<Box<[u8]>> {
    let (offset, len) = (h.index_offset, h.index_len);
    if !is_aligned(offset) || offset < u64::from(h.header_len) {
        return Err(header_err(format!("bad index offset {offset}")));
    }
    let range = range_within(offset, len, h.file_len).ok_or_else(|| {
        header_err(format!(
            "index {offset}+{len} exceeds file_len {}",
            h.file_len
        ))
    })?;
    let index: Box<[u8]> = src
        .get(range)
        .ok_or_else(|| header_err("index out of bounds"))?
        .into();
    if *blake3::hash(&index).as_bytes() != h.index_digest {
        return Err(StoreError::IndexDigestMismatch);
    }
    Ok(index)
}

/// The dictionary (between the header and the index), checked against its digest, and
/// where it ends; None if the store has none.
fn read_dictionary(src: &dyn Source, h: &Header) -> Result<Option<(u64, Box<[u8]>)>> {
    let (offset, len) = (h.dict_offset, h.dict_len);
    if len == 0 {
        if offset != 0 || h.dict_digest != [0; 32] {
            return Err(header_err(
                "dictionary offset/digest set without a dictionary",
            ));
        }
        return Ok(None);
    }
    if !is_aligned(offset) || offset < u64::from(h.header_len) {
        return Err(header_err(format!("bad dictionary offset {offset}")));
    }
    let r = range_within(offset, len, h.index_offset).ok_or_else(|| {
        header_err(format!(
            "dictionary {offset}+{len} overlaps the index at {}",
            h.index_offset
        ))
    })?;
    let d: Box<[u8]> = src
        .get(r.clone())
        .ok_or_else(|| header_err("dictionary out of bounds"))?
        .into();
    if *blake3::hash(&d).as_bytes() != h.dict_digest {
        return Err(StoreError::DictionaryDigestMismatch);
    }
    Ok(Some((r.end as u64, d)))
}

/// Where the index's tables are. Every count is bounded because the tables must fit
/// exactly in `index_len`, which is bounded by the slice.
struct Tables {
    counts: IndexHeader,
    blobs_at: usize,
    modules_at: usize,
    entries_at: usize,
    pool_at: usize,
}

impl Tables {
    fn parse(index: &[u8], index_len: u64) -> Result<Tables> {
        let c = IndexHeader::read(index).ok_or_else(|| index_err("short index header"))?;
        if c.reserved != 0 {
            return Err(index_err("reserved field is not zero"));
        }
        let table = |count: u32, rec: usize| u64::from(count).checked_mul(rec as u64);
        let sizes = [
            Some(INDEX_HEADER_LEN as u64),
            table(c.blob_count, BLOB_RECORD_LEN),
            table(c.module_count, MODULE_RECORD_LEN),
            table(c.entry_count, ENTRY_RECORD_LEN),
            Some(c.pool_len),
        ];
        let expected = sizes.iter().try_fold(0u64, |acc, s| acc.checked_add((*s)?));
        if expected != Some(index_len) {
            return Err(index_err(format!(
                "index_len {index_len} does not match {} modules, {} entries, {} blobs and a \
                 {}-byte string pool",
                c.module_count, c.entry_count, c.blob_count, c.pool_len
            )));
        }
        // All table offsets below are < index_len, which fits in usize (it is a slice range).
        let blobs_at = INDEX_HEADER_LEN;
        let modules_at = blobs_at + c.blob_count as usize * BLOB_RECORD_LEN;
        let entries_at = modules_at + c.module_count as usize * MODULE_RECORD_LEN;
        let pool_at = entries_at + c.entry_count as usize * ENTRY_RECORD_LEN;
        Ok(Tables {
            counts: c,
            blobs_at,
            modules_at,
            entries_at,
            pool_at,
        })
    }

    /// A reference into the string pool, as a range of the index copy.
    fn pool_ref(&self, off: u32, len: u32, limit: usize, what: &str) -> Result<Range<usize>> {
        if len as usize > limit {
            return Err(index_err(format!("{what} is {len} bytes (limit {limit})")));
        }
        let r = range_within(u64::from(off), u64::from(len), self.counts.pool_len)
            .ok_or_else(|| index_err(format!("{what} {off}+{len} outside the string pool")))?;
        Ok(self.pool_at + r.start..self.pool_at + r.end)
    }

    /// Blobs: in storage order, aligned, non-overlapping, between `data_start` and the
    /// index; the blobs of one solid group share its frame and follow one another in it.
    #[inline(never)]
    fn blobs(
        &self,
        index: &[u8],
        data_start: u64,
        h: &Header,
        has_dict: bool,
    ) -> Result<Vec<BlobInfo>> {
        let index_offset = h.index_offset;
        let mut blobs = Vec::with_capacity(self.counts.blob_count as usize);
        let mut prev_end = data_start;
        for i in 0..self.counts.blob_count {
            let rec = index
                .get(self.blobs_at + i as usize * BLOB_RECORD_LEN..)
                .and_then(BlobRecord::read)
                .ok_or_else(|| index_err("blob table out of bounds"))?;
            let (offset, stored_len, raw_len) = (rec.offset, rec.stored_len, rec.raw_len);
            let codec = Codec::from_u8(rec.codec).ok_or(StoreError::UnsupportedCodec {
                blob: i,
                codec: rec.codec,
            })?;
            if rec.reserved != [0; 3] {
                return Err(index_err(format!("blob {i}: reserved bytes are not zero")));
            }
            let skip = u64::from(rec.skip);
            let solid = codec == Codec::ZstdSolid;
            if solid && h.minor < 1 {
                // Solid groups came with 1.1: a 1.0 store cannot hold one.
                return Err(StoreError::UnsupportedCodec {
                    blob: i,
                    codec: rec.codec,
                });
            }
            if !solid && skip != 0 {
                return Err(index_err("a blob outside a solid group has a skip"));
            }
            // The next blob of a solid group: the same frame, a later stretch of it.
            let next_in_group = blobs.last().filter(|p: &&BlobInfo| {
                solid && p.codec == codec && p.offset == offset && p.stored_len == stored_len
            });
            match next_in_group {
                Some(p) if skip < p.skip.saturating_add(p.raw_len) => {
                    return Err(index_err("a blob's stretch of its solid group is bad"));
                }
                Some(_) => {}
                None => {
                    if !is_aligned(offset) {
                        return Err(index_err(format!(
                            "blob {i}: offset {offset} is not aligned"
                        )));
                    }
                    let end = offset.checked_add(stored_len);
                    if offset < prev_end || end.filter(|&e| e <= index_offset).is_none() {
                        return Err(StoreError::BlobOutOfBounds {
                            blob: i,
                            offset,
                            len: stored_len,
                            start: prev_end,
                            end: index_offset,
                        });
                    }
                    prev_end = end.unwrap_or(index_offset);
                }
            }
            // A solid blob's stretch ends within what its frame can decode to.
            let group_len = skip.saturating_add(raw_len);
            check_codec(i, codec, stored_len, group_len, has_dict)?;
            blobs.push(BlobInfo {
                offset,
                stored_len,
                raw_len,
                codec,
                skip,
                #[cfg(feature = "std")]
                group_len,
                digest: rec.digest,
                refs: 0,
                first_ref: u32::MAX,
            });
        }
        // Every member of a group records the group's decoded length: the end of its last
        // (one pass from the back; the members' ends only grow).
        #[cfg(feature = "std")]
        let mut group = (u64::MAX, 0u64);
        #[cfg(feature = "std")]
        for b in blobs
            .iter_mut()
            .rev()
            .filter(|b| b.codec == Codec::ZstdSolid)
        {
            if b.offset != group.0 {
                group = (b.offset, b.group_len);
            }
            b.group_len = group.1;
        }
        Ok(blobs)
    }

    /// Modules: names in the pool, entries contiguous and in order.
    // Inlined: the runtime that every packed output links is 138 bytes smaller (its size
    // budget is a test).
    #[inline(always)]
    fn modules(&self, index: &[u8]) -> Result<Vec<ModInfo>> {
        let entry_count = self.counts.entry_count;
        let mut modules = Vec::with_capacity(self.counts.module_count as usize);
        let mut next_entry = 0u32;
        for j in 0..self.counts.module_count {
            let rec = index
                .get(self.modules_at + j as usize * MODULE_RECORD_LEN..)
                .and_then(ModuleRecord::read)
                .ok_or_else(|| index_err("module table out of bounds"))?;
            let (first, count) = (rec.first, rec.count);
            let name = self.pool_ref(rec.name_off, rec.name_len, MAX_NAME_LEN, "module name")?;
            let name_bytes = index.get(name.clone()).unwrap_or_default();
            if core::str::from_utf8(name_bytes).is_err() {
                return Err(index_err(format!("module {j}: name is not UTF-8")));
            }
            if first != next_entry {
                return Err(index_err(format!(
                    "module {j}: first entry {first}, expected {next_entry}"
                )));
            }
            next_entry = first
                .checked_add(count)
                .filter(|&n| n <= entry_count)
                .ok_or_else(|| {
                    index_err(format!("module {j}: {count} entries from {first} overflow"))
                })?;
            modules.push(ModInfo { name, first, count });
        }
        if next_entry != entry_count {
            return Err(index_err(format!(
                "modules cover {next_entry} of {entry_count} entries"
            )));
        }
        Ok(modules)
    }

    /// Entries, module by module; counts each blob's references.
    fn entries(
        &self,
        index: &[u8],
        modules: &[ModInfo],
        blobs: &mut [BlobInfo],
    ) -> Result<Vec<EntInfo>> {
        let mut entries = Vec::with_capacity(self.counts.entry_count as usize);
        for (j, m) in modules.iter().enumerate() {
            for k in 0..m.count {
                let e = m.first as usize + k as usize;
                let rec = index
                    .get(self.entries_at + e * ENTRY_RECORD_LEN..)
                    .and_then(EntryRecord::read)
                    .ok_or_else(|| index_err("entry table out of bounds"))?;
                let (tag, value, blob) = (rec.tag, rec.value, rec.blob);
                let kind = kind_from_wire(tag, value)
                    .ok_or_else(|| index_err(format!("entry {e}: bad kind {tag}/{value}")))?;
                let variant = variant_from_wire(rec.variant)
                    .ok_or_else(|| index_err(format!("entry {e}: bad variant {}", rec.variant)))?;
                if rec.reserved != 0 {
                    return Err(index_err(format!("entry {e}: reserved field is not zero")));
                }
                let attrs =
                    self.pool_ref(rec.attrs_off, rec.attrs_len, MAX_ATTRS_LEN, "entry attrs")?;
                let b = blobs.get_mut(blob as usize).ok_or_else(|| {
                    index_err(format!(
                        "entry {e}: blob {blob} of {}",
                        self.counts.blob_count
                    ))
                })?;
                b.refs = b.refs.saturating_add(1);
                if b.first_ref == u32::MAX {
                    b.first_ref = e as u32;
                }
                entries.push(EntInfo {
                    kind,
                    variant,
                    arch: rec.arch,
                    blob,
                    attrs,
                    module: j as u32,
                    index_in_module: k,
                });
            }
        }
        Ok(entries)
    }
}

/// A blob's lengths must fit its codec.
fn check_codec(i: u32, codec: Codec, stored_len: u64, raw_len: u64, has_dict: bool) -> Result<()> {
    match codec {
        Codec::Raw if stored_len != raw_len => Err(index_err(format!(
            "blob {i}: raw blob with stored_len {stored_len} != raw_len {raw_len}"
        ))),
        Codec::Zstd | Codec::ZstdDict | Codec::ZstdSolid
            if stored_len
                .checked_mul(MAX_ZSTD_RATIO)
                .filter(|&max| raw_len <= max)
                .is_none() =>
        {
            Err(index_err(format!(
                "blob {i}: raw_len {raw_len} is implausible for {stored_len} stored bytes"
            )))
        }
        Codec::ZstdDict if !has_dict => Err(index_err(format!(
            "blob {i}: uses the dictionary codec but the store has no dictionary"
        ))),
        _ => Ok(()),
    }
}

/// Module indices sorted by name; names must be unique so `module_by_name` is well defined.
fn sorted_names(index: &[u8], modules: &[ModInfo]) -> Result<Vec<u32>> {
    let name_of = |m: u32| {
        modules
            .get(m as usize)
            .and_then(|i| index.get(i.name.clone()))
            .unwrap_or_default()
    };
    let mut by_name: Vec<u32> = (0..modules.len() as u32).collect();
    // The index breaks ties, so any sort gives one order.
    heapsort(&mut by_name, |a, b| {
        name_of(a).cmp(name_of(b)).then(a.cmp(&b)).is_lt()
    });
    if let Some(w) = by_name.windows(2).find(|w| name_of(w[0]) == name_of(w[1])) {
        let name = String::from_utf8_lossy(name_of(w[0])).into_owned();
        return Err(index_err(format!("duplicate module name \"{name}\"")));
    }
    Ok(by_name)
}
