//! fatpack host runtime (`libfatpack_rt.a`).
//!
//! `fatpack ld` links this archive into every packed executable or shared library with
//! `--wrap=SYM` for each of [`WRAPPED_SYMBOLS`]. The nvcc-generated registration code then
//! talks to this runtime instead of cudart: a fatbin wrapper whose data is a fatpack stub is
//! recorded (fake handle, nothing opened), and on first use of one of its kernels or
//! variables the runtime reads the store, picks one entry per device capability
//! ([`select`]), builds a small fatbin ([`fatbin`]) and registers it with the real cudart.
//! See docs/RUNTIME.md.
//!
//! The rlib exposes only pure logic and constants; the interposed C ABI lives in a private
//! module and is only reachable through the `__wrap_*` symbols.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod elf;
pub mod fatbin;
pub mod select;
pub mod stub;

mod rt;

mod abi;
pub use abi::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_symbols_are_unique() {
        let mut v = WRAPPED_SYMBOLS.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), WRAPPED_SYMBOLS.len());
        assert_eq!(link_args(true).len(), WRAPPED_SYMBOLS.len() + 1);
        assert_eq!(link_args(false).len(), WRAPPED_SYMBOLS.len());
    }
}
