//! GNU ld itself, modelled: what an ld command line means ([`LinkLine`], read as ld reads
//! it: response files, option tables, getopt, the input state machine), where ld finds each
//! input (library search, sysroots, linker scripts, incompatible files skipped), and the
//! real linker binary (found on PATH, never fatpack itself; run; its `--verbose` defaults).
//!
//! `fatpack ld` (the driver in [`crate::link`]) reads a line with this model, swaps some
//! inputs, and renders the same line back for the real linker.

pub(crate) mod defaults;
mod files;
mod getopt;
mod line;
mod options;
mod parse;
pub mod real;
pub mod response;
mod script;
pub mod search;
mod target;

pub use defaults::{DefaultsCache, LinkerDefaults};
pub use files::{rewrite_script, LinkFile, UnquotablePath};
pub use line::*;
pub use response::{
    fold_into_response_file, quote_response_arg, split_response_text, write_response_file,
};
pub use script::parse_script;
pub use search::{resolve, resolve_with, SearchError, SearchPath};
pub use target::Target;
