//! The final link: `fatpack ld`, the glue object, and work on the linked output.

/// The contract with the runtime (names, `--wrap` list), shared with it as one source file.
#[path = "../../runtime/src/abi.rs"]
pub mod abi;
pub mod args;
pub mod glue;
pub mod output;
pub mod pack;
pub mod real_ld;
pub mod search;
