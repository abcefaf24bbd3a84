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
    use core::sync::atomic::{AtomicUsize, Ordering};

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

        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            if l.size() >= HUGE && l.align() <= HUGE {
                let p = huge_pages(l.size());
                if !p.is_null() {
                    return p;
                }
            }
            // SAFETY: as alloc; the block is then zeroed whole.
            let p = unsafe { self.alloc(l) };
            if !p.is_null() {
                // SAFETY: p holds l.size() writable bytes.
                unsafe { core::ptr::write_bytes(p, 0, l.size()) };
            }
            p
        }

        unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
            if p as usize % HUGE == 0 {
                if let Some(len) = forget_huge(p) {
                    // SAFETY: huge_pages mapped exactly these pages for this block.
                    unsafe { libc::munmap(p.cast(), len) };
                    return;
                }
            }
            // SAFETY: p came from malloc or posix_memalign above.
            unsafe { libc::free(p.cast()) }
        }

        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            if l.align() <= 16 && p as usize % HUGE != 0 {
                // SAFETY: p came from malloc (not huge_pages, whose blocks start on a HUGE
                // boundary); realloc keeps malloc's alignment.
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

    /// Zeroed blocks of this size and more (a module's container, a solid group decoded up
    /// to a blob: filled once by the decoder) are pages of their own on a huge page boundary,
    /// marked for transparent huge pages: a 32 MiB buffer then faults in 16 times instead of
    /// 8,192, which took 40% of decoding into fresh memory (BENCHMARKS.md).
    const HUGE: usize = 2 << 20;
    const PAGE: usize = 4096;

    /// The live blocks of huge_pages: (start, mapped length); start 0 is a free slot. Only
    /// dealloc's pointer tells it what to free (the layout is not looked at: passing it would
    /// grow every drop in the runtime), so the blocks it mapped are the ones listed here. A
    /// few at a time are live (one per loading thread); with every slot taken, alloc_zeroed
    /// falls back on malloc.
    static LIVE: [(AtomicUsize, AtomicUsize); 16] =
        [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; 16];

    /// Takes `p` off the list: the length mapped for it, if huge_pages mapped it.
    fn forget_huge(p: *mut u8) -> Option<usize> {
        let (start, len) = LIVE
            .iter()
            .find(|(s, _)| s.load(Ordering::Acquire) == p as usize)?;
        let n = len.load(Ordering::Acquire);
        start.store(0, Ordering::Release);
        Some(n)
    }

    /// `len` zero bytes on a `HUGE` boundary, or null.
    fn huge_pages(len: usize) -> *mut u8 {
        let Some(map) = len.next_multiple_of(PAGE).checked_add(HUGE) else {
            return core::ptr::null_mut();
        };
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                map,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return core::ptr::null_mut();
        }
        let base = p as usize;
        let start = base.next_multiple_of(HUGE);
        let end = start + len.next_multiple_of(PAGE);
        let slot = LIVE.iter().find(|(s, _)| {
            s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        // SAFETY: the head before `start` and the tail after `end` lie in the mapping made
        // above and hold nothing; `[start, end)` stays mapped, or all of it goes where no
        // slot is free. A failed hint is harmless.
        unsafe {
            let Some((_, n)) = slot else {
                libc::munmap(p, map);
                return core::ptr::null_mut();
            };
            n.store(end - start, Ordering::Release);
            if start > base {
                libc::munmap(p, start - base);
            }
            if base + map > end {
                libc::munmap(end as *mut libc::c_void, base + map - end);
            }
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
        start as *mut u8
    }

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
