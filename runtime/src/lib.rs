//! fatpack host runtime (`libfatpack_rt.a`).
//!
//! `fatpack ld` links this archive into every packed executable or shared library with
//! `--wrap=SYM` for each of `fatpack_format::link::WRAPPED_SYMBOLS`. The nvcc-generated
//! registration code then
//! talks to this runtime instead of cudart: a fatbin wrapper whose data is a fatpack stub is
//! recorded (fake handle, nothing opened), and on first use of one of its kernels or
//! variables the runtime reads the store, picks one entry per device capability
//! (fatpack-format's `select`), builds a small fatbin and registers it with the real cudart.
//! See docs/RUNTIME.md.
//!
//! The crate is a staticlib only: its C ABI is reachable through the `__wrap_*` symbols,
//! and everything it shares with the CLI (stub, fatbin layout, selection, link contract)
//! is fatpack-format's.

mod rt;
