//! `fatpack ld`: the driver ([`driver`], a list of steps over one [`session::Session`]), one
//! file per step or route, the runtime it adds ([`runtime`]) with the glue object ([`glue`]),
//! tail mode ([`tail`]) and the table of fatpack's own options ([`options`]).
//!
//! Where to change what (docs/DESIGN.md, "Where to change what"): a route is a file
//! `route_*.rs` and a case in [`route`]; a step is a method in its file, called from
//! [`steps::run`]; an option is a row of [`options::OPTIONS`].

/// The contract with the runtime (names, `--wrap` list): fatpack-format's, shared with it.
pub use fatpack_format::link as abi;
mod account;
mod archive_pull;
mod cleanup;
mod device_free;
mod dry_run;
mod error;
pub mod fork;
pub mod glue;
mod names;
mod old_output;
pub mod options;
mod output;
mod plan;
mod real_link;
mod route;
mod route_copy;
mod route_direct;
pub mod runtime;
mod scan;
mod script_copies;
mod session;
mod steps;
mod store_step;
mod stub_output;
mod tail;
mod worth_packing;

pub use error::LinkError;
pub use session::mark_process_start;
pub use steps::run;
pub use worth_packing::PACK_THRESHOLD;
