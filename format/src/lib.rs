//! What the `fatpack` CLI and the runtime it links into packed outputs must agree on, defined
//! once: the fatbin container layout ([`fatbin`]), the stub that replaces a container in a
//! rewritten object ([`stub`]), GPU arch names and their parsing ([`arch`]), which entry a
//! GPU runs ([`select`]), and the link contract: wrapped symbols, section, symbol and
//! environment names ([`link`]); and the small ELF reader with which the runtime finds the
//! store section in its own file ([`elf`]).
//!
//! No I/O and no unsafe code: both sides read these definitions over bytes they hold.

#![forbid(unsafe_code)]
// No std: the runtime that every packed output links is built without it (its size is what
// each output pays); the CLI links these definitions into an ordinary std program.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

/// What every module needs from `alloc`.
mod prelude {
    pub use alloc::borrow::ToOwned;
    pub use alloc::format;
    pub use alloc::string::{String, ToString};
    pub use alloc::vec;
    pub use alloc::vec::Vec;
}

pub mod wire;

pub mod arch;
pub mod elf;
pub mod fatbin;
pub mod link;
pub mod select;
pub mod split;
pub mod stub;
