//! blake3 of a module's decoded code, computed beside its decoding. The runtime checks every
//! entry it hands cudart against the store's index; on the path to a program's first kernel,
//! hashing a cubin after decoding it added about a fifth to the decoding time (H200 host:
//! 431 KB decoded in 0.65-0.9 ms, hashed in 0.16-0.2 ms). cubin-store decodes a frame block
//! by block and tells the sink of each finished prefix ([`cubin_store::Blake3Sink`]); here a
//! second thread hashes those prefixes as they come, so the digest is ready about one block
//! after the last block is decoded. blake3's incremental hasher gives exactly
//! `blake3::hash` whatever the pieces.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

#[allow(unused_imports)]
use crate::prelude::*;

/// Below this, hashing after decoding costs less than starting a thread: a zstd block is
/// at most 128 KB, so a smaller entry is decoded in one piece anyway.
const MIN_OVERLAP: usize = 256 * 1024;

/// What the decoding thread and the hashing thread share. Boxed: its address is the
/// thread's argument.
struct Shared {
    /// The output buffer (set before the first `done` that is not zero is published).
    base: AtomicPtr<u8>,
    /// `base[..done]` is final (published with Release after the decoder wrote it).
    done: AtomicUsize,
    /// No more progress will come: decoding finished or failed.
    stop: AtomicBool,
    /// The hasher: the hashing thread's alone until it is joined.
    hasher: UnsafeCell<blake3::Hasher>,
}

extern "C" fn hash_behind(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is the `Shared` of an `Overlapped`, which joins this thread before it is
    // dropped. Both sides hold it shared (its atomics are for that); `hasher` is used only
    // here until the join.
    let s = unsafe { &*p.cast::<Shared>() };
    // SAFETY: as above: nobody else touches the hasher while this thread runs.
    let hasher = unsafe { &mut *s.hasher.get() };
    let mut hashed = 0usize;
    let mut idle = 0u32;
    loop {
        // Read `stop` first: once it is seen, `done` is final.
        let stop = s.stop.load(Ordering::Acquire);
        let done = s.done.load(Ordering::Acquire);
        if done > hashed {
            let base = s.base.load(Ordering::Acquire);
            // SAFETY: `base[..done]` is final and stays alive and unwritten until this
            // thread is joined (cubin_store::Blake3Sink's contract, which the decoder keeps).
            let piece = unsafe { core::slice::from_raw_parts(base.add(hashed), done - hashed) };
            hasher.update(piece);
            hashed = done;
            idle = 0;
        } else if stop {
            return core::ptr::null_mut();
        } else {
            // The next block is a fraction of a millisecond away: spin briefly, then yield.
            idle += 1;
            if idle < 64 {
                core::hint::spin_loop();
            } else {
                super::sys::yield_now();
            }
        }
    }
}

/// A [`cubin_store::Blake3Sink`] that hashes on a second thread while the caller decodes
/// (or, for a small entry or when no thread can be made, once at the end).
pub(crate) struct Overlapped {
    shared: Box<Shared>,
    thread: Option<super::sys::Thread>,
}

impl Overlapped {
    /// For an entry of `len` decoded bytes.
    pub(crate) fn new(len: usize) -> Self {
        let mut o = Overlapped {
            shared: Box::new(Shared {
                base: AtomicPtr::new(core::ptr::null_mut()),
                done: AtomicUsize::new(0),
                stop: AtomicBool::new(false),
                hasher: UnsafeCell::new(blake3::Hasher::new()),
            }),
            thread: None,
        };
        if len >= MIN_OVERLAP {
            let arg: *const Shared = &*o.shared;
            // SAFETY: the thread gets a pointer to the boxed `Shared`, which lives until the
            // thread is joined (in `finish` or `drop`).
            o.thread = unsafe { super::sys::Thread::spawn(hash_behind, arg.cast_mut().cast()) };
        }
        o
    }

    /// Tells the hashing thread that no more is coming and waits for it. Returns whether
    /// there was one (its hasher then holds everything published).
    fn join(&mut self) -> bool {
        let Some(thread) = self.thread.take() else {
            return false;
        };
        self.shared.stop.store(true, Ordering::Release);
        thread.join();
        true
    }
}

impl cubin_store::Blake3Sink for Overlapped {
    fn progress(&mut self, decoded: &[u8]) {
        if self.thread.is_some() {
            self.shared
                .base
                .store(decoded.as_ptr().cast_mut(), Ordering::Release);
            self.shared.done.store(decoded.len(), Ordering::Release);
        }
    }

    fn finish(mut self, out: &[u8]) -> [u8; 32] {
        if !self.join() {
            return *blake3::hash(out).as_bytes();
        }
        let hashed = self.shared.done.load(Ordering::Acquire);
        let hasher = self.shared.hasher.get_mut();
        // Whatever was never published (nothing, when the decoder reported its last block).
        if let Some(rest) = out.get(hashed..) {
            hasher.update(rest);
        }
        *hasher.finalize().as_bytes()
    }
}

impl Drop for Overlapped {
    fn drop(&mut self) {
        // A failed read: the thread must stop reading the buffer before it goes away.
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cubin_store::Blake3Sink;

    /// Publishes `data` in pieces of `step`, as the decoder would, and checks the digest.
    fn run(data: &[u8], step: usize) -> [u8; 32] {
        let mut s = Overlapped::new(data.len());
        let mut n = 0;
        while n < data.len() {
            n = (n + step).min(data.len());
            s.progress(&data[..n]);
        }
        s.finish(data)
    }

    #[test]
    fn equals_blake3_at_every_shape() {
        let data: alloc::vec::Vec<u8> = (0..3_500_000u32)
            .map(|i| i.wrapping_mul(2654435761) as u8)
            .collect();
        for n in [
            0,
            1,
            1024,
            MIN_OVERLAP - 1,
            MIN_OVERLAP,
            MIN_OVERLAP + 1,
            1 << 20,
            (1 << 20) + 1025,
            2_809_920,
            3_500_000,
        ] {
            for step in [1000, 131_072, 1 << 22] {
                assert_eq!(
                    run(&data[..n], step),
                    *blake3::hash(&data[..n]).as_bytes(),
                    "{n} in steps of {step}"
                );
            }
        }
    }

    #[test]
    fn a_sink_dropped_mid_way_stops_its_thread() {
        let data = alloc::vec![7u8; 1 << 20];
        let mut s = Overlapped::new(data.len());
        s.progress(&data[..1000]);
        drop(s);
    }

    #[test]
    fn progress_never_reported_is_hashed_at_the_end() {
        let data = alloc::vec![3u8; 1 << 20];
        let mut s = Overlapped::new(data.len());
        s.progress(&data[..300_000]);
        assert_eq!(s.finish(&data), *blake3::hash(&data).as_bytes());
    }
}
