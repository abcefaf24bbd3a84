//! fatpack: capability-aware fat-binary packager and linker wrapper for CUDA.
//!
//! Data flow, one module each: [`inputs`] finds device code in files → [`fatbin`] models it
//! (with [`cubin`] and [`ptx`] reading the payloads) → the store (`cubin-store` crate) →
//! rewritten objects → final link → runtime. [`inspect`] reports on any of them.

pub use fatpack_format as format;
/// GPU arch names and targets: fatpack-format's, shared with the runtime and the store.
pub use fatpack_format::arch;
pub mod commit;
pub mod cubin;
pub mod elf;
pub mod environment;
pub mod error;
pub mod extract;
pub mod fatbin;
pub mod inputs;
pub mod inspect;
pub mod ld;
pub mod link;
pub mod package;
pub mod packed;
pub mod parallel;
pub(crate) mod progress;
pub mod prune;
pub mod ptx;
pub mod repack;
pub mod rewrite;
pub mod run;
pub mod selection;
pub mod size;
pub mod split;
pub mod store;
pub mod transform;
