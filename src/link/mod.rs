//! The final link: `fatpack ld`, the glue object, and work on the linked output.

/// The contract with the runtime (names, `--wrap` list): fatpack-format's, shared with it.
pub use fatpack_format::link as abi;
pub mod glue;
pub mod pack;
pub mod runtime;
