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

//!
//! It is built without Rust's std (feature `std` off, which is how `fatpack`'s build script
//! builds the archive): std's panic and formatting machinery alone would add about 300 KB to
//! every packed output. `rt::sys` wraps the C library calls it needs; a panic prints one
//! line and aborts. Workspace builds (clippy, tests) keep the default `std` feature, with
//! the same code.

#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

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

mod rt;

#[cfg(not(feature = "std"))]
mod nostd {
    use core::alloc::{GlobalAlloc, Layout};

    /// The C library's allocator, which the host program uses too.
    struct Malloc;

    // SAFETY: malloc/posix_memalign/realloc/free honour the layouts passed (alignment up to
    // malloc's 16 bytes directly, larger through posix_memalign).
    unsafe impl GlobalAlloc for Malloc {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            if l.align() <= 16 {
                // SAFETY: plain allocation of l.size() bytes.
                return unsafe { libc::malloc(l.size()) }.cast();
            }
            let mut p = core::ptr::null_mut();
            // SAFETY: the alignment is a power of two and a multiple of the pointer size.
            match unsafe { libc::posix_memalign(&mut p, l.align(), l.size()) } {
                0 => p.cast(),
                _ => core::ptr::null_mut(),
            }
        }

        unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
            // SAFETY: p came from malloc or posix_memalign above.
            unsafe { libc::free(p.cast()) }
        }

        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            if l.align() <= 16 {
                // SAFETY: p came from malloc; realloc keeps malloc's alignment.
                return unsafe { libc::realloc(p.cast(), new) }.cast();
            }
            // SAFETY: the GlobalAlloc contract: a new block, copy, free the old one.
            unsafe {
                let n = self.alloc(Layout::from_size_align_unchecked(new, l.align()));
                if !n.is_null() {
                    core::ptr::copy_nonoverlapping(p, n, l.size().min(new));
                    self.dealloc(p, l);
                }
                n
            }
        }
    }

    #[global_allocator]
    static ALLOC: Malloc = Malloc;

    /// The precompiled `core` carries unwind tables that name the personality routine, so
    /// the linker wants the symbol; with `panic = "abort"` nothing ever unwinds through this
    /// code, so it is never called (and `fatpack`'s build hides it like every symbol but
    /// the `__wrap_*` entry points).
    #[no_mangle]
    extern "C" fn rust_eh_personality() {}

    /// A bug in the runtime: say where, then abort (as the std build's `panic = "abort"`).
    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        let line = alloc::format!("fatpack: internal error: {info}\n");
        crate::rt::sys::write_stderr(line.as_bytes());
        // SAFETY: abort never returns.
        unsafe { libc::abort() }
    }
}
