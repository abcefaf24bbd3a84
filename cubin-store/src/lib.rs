//! The fatpack side archive ("store"): CUDA device code (cubins, PTX) split per architecture.
//!
//! A store is a fixed header, optional zstd dictionary, blobs and an index (see `FORMAT.md`
//! in this crate for the exact layout). Each blob is an independent zstd frame of one entry's
//! raw bytes, so one architecture can be read without touching the others; identical contents
//! are stored once (keyed by blake3). Every blob and the index carry a blake3 digest that the
//! reader checks.
//!
//! - Write with [`StoreWriter`] into any `Write + Seek` (streams blobs). Putting a file in place
//!   is the caller's business: fatpack commits every output through one mechanism, its
//!   `commit` module.
//! - Read with [`Store::parse`] over any byte slice, or [`MappedStore`] for a file or a byte
//!   range of one.

#![deny(unsafe_code)]
// The reader needs only `alloc`: without the `std` feature the runtime links it into every
// packed output without std's weight.
#![cfg_attr(not(feature = "std"), no_std)]
// The wire helpers the writer shares with the reader are unused in a reader-only build.
#![cfg_attr(not(feature = "std"), allow(dead_code))]

extern crate alloc;

mod blockwise;
mod error;
mod format;
#[cfg(feature = "std")]
mod mapped;
mod meta;
mod reader;
mod skeleton;
#[cfg(feature = "std")]
mod solid;
#[cfg(feature = "std")]
mod writer;

/// What every module needs from `alloc`.
#[allow(unused_imports)]
mod prelude {
    pub use alloc::borrow::ToOwned;
    pub use alloc::boxed::Box;
    pub use alloc::format;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec;
    pub use alloc::vec::Vec;
}

pub use error::{Result, StoreError};
pub use format::{
    ALIGN, FORMAT_MAJOR, FORMAT_MINOR, HEADER_LEN, MAGIC, MAX_ATTRS_LEN, MAX_NAME_LEN,
    MAX_ZSTD_RATIO,
};
#[cfg(feature = "std")]
pub use mapped::MappedStore;
pub use meta::{arch_name, parse_arch_name, ArchVariant, Codec, EntryId, EntryKind, EntryMeta};
pub use reader::{Blake3Sink, BlobView, EntryView, HashAtEnd, ModuleView, Store, StoreStats};
pub use skeleton::SKELETON_MAGIC;
#[cfg(feature = "std")]
pub use writer::{
    reusable_frame, train_dictionary, BlobCompressor, EntryRef, FrameUse, ModuleId, NewEntry,
    ReadyBlob, StoreSummary, StoreWriter, WriteOptions, DEFAULT_LEVEL, RELEASE_LEVEL,
};

/// Helpers for tests and fuzzers; not part of the stable API.
#[doc(hidden)]
pub mod testing {
    pub use crate::format::reseal;
}
