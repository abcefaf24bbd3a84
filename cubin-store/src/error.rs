//! The one error type of the crate.

use crate::prelude::*;

/// Everything that can go wrong while writing or reading a store.
///
/// Reader errors name the part of the store that is wrong so that a user can tell a truncated
/// copy from a corrupted one from a store written by a newer fatpack.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[cfg(feature = "std")]
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    #[error(
        "not a fatpack store: bad magic {} (expected \"FPSTORE\\0\")",
        Hex(found)
    )]
    BadMagic { found: [u8; 8] },

    #[error(
        "unsupported store format version {major}.{minor} (this reader supports {supported}.x)"
    )]
    UnsupportedVersion {
        major: u16,
        minor: u16,
        supported: u16,
    },

    #[error("store truncated: {what} needs {need} bytes, only {have} available")]
    Truncated {
        what: &'static str,
        need: u64,
        have: u64,
    },

    #[error("malformed store header: {0}")]
    MalformedHeader(String),

    #[error("store index digest mismatch (index corrupted)")]
    IndexDigestMismatch,

    #[error("store dictionary digest mismatch (dictionary corrupted)")]
    DictionaryDigestMismatch,

    #[error("malformed store index: {0}")]
    MalformedIndex(String),

    #[error("blob {blob} out of bounds: {offset}+{len} not inside {start}..{end}")]
    BlobOutOfBounds {
        blob: u32,
        offset: u64,
        len: u64,
        start: u64,
        end: u64,
    },

    #[error("blob {blob} uses unsupported codec {codec}")]
    UnsupportedCodec { blob: u32, codec: u8 },

    #[error("content digest mismatch for {module} {arch} (blob corrupted)")]
    BlobDigestMismatch { module: String, arch: String },

    #[error("length mismatch for {module} {arch}: index says {expected} bytes, blob has {found}")]
    BlobLengthMismatch {
        module: String,
        arch: String,
        expected: u64,
        found: u64,
    },

    #[error("corrupt zstd frame for {module} {arch}: {message}")]
    CorruptFrame {
        module: String,
        arch: String,
        message: String,
    },

    #[error("store dictionary unusable: {0}")]
    BadDictionary(String),

    #[error("entry does not belong to this store")]
    ForeignEntry,

    #[error("duplicate module name \"{0}\"")]
    DuplicateModule(String),

    #[error("module id {0} does not belong to this writer")]
    InvalidModuleId(u32),

    #[error("{what} too large: {len} bytes (limit {limit})")]
    TooLarge {
        what: &'static str,
        len: u64,
        limit: u64,
    },

    #[error("invalid zstd level {level} (valid: {min}..={max})")]
    InvalidLevel { level: i32, min: i32, max: i32 },

    #[error("zstd compression failed: {0}")]
    Compression(String),

    #[error("dictionary training failed: {0}")]
    DictionaryTraining(String),

    #[error("cannot allocate {need} bytes for an entry")]
    OutOfMemory { need: u64 },

    #[error("store writer unusable after an earlier I/O error")]
    Poisoned,
}

pub type Result<T, E = StoreError> = core::result::Result<T, E>;

/// Bytes as `[46, 50, ..]` in hex, without `Debug` formatting (the runtime, which links this
/// reader into every packed output, carries no `Debug` machinery).
pub(crate) struct Hex<'a>(pub &'a [u8]);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("[")?;
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{b:02x}")?;
        }
        f.write_str("]")
    }
}
