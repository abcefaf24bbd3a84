//! `fatpack ld`: the driver ([`pack`]), the inputs it rewrites, the runtime it adds
//! ([`runtime`]) with the glue object ([`glue`]), and tail mode.

/// The contract with the runtime (names, `--wrap` list): fatpack-format's, shared with it.
pub use fatpack_format::link as abi;
mod cleanup;
mod direct;
mod dry_run;
mod error;
pub mod glue;
mod inputs;
mod names;
mod old_output;
pub mod options;
pub mod pack;
pub mod runtime;

pub use error::LinkError;
mod tail;
