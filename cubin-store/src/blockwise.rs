//! One zstd frame decoded block by block, straight into the caller's buffer (zstd's
//! buffer-less API, `ZSTD_decompressContinue`): each block lands in its place with the output
//! before it as history, and the caller hears of every prefix that is final, so it can hash
//! while the rest decodes. zstd-safe does not wrap these calls, hence the FFI here, the one
//! place in this crate that needs `unsafe`.

#![allow(unsafe_code)]

use core::ptr::NonNull;

use zstd_safe::zstd_sys;

use crate::prelude::*;

pub(crate) enum Failure {
    /// The dictionary could not be loaded.
    Dictionary(String),
    /// The frame is damaged or does not fit the buffer.
    Frame(String),
}

/// A decompression context of our own, freed on drop.
struct DCtx(NonNull<zstd_sys::ZSTD_DCtx>);

impl Drop for DCtx {
    fn drop(&mut self) {
        // SAFETY: made by ZSTD_createDCtx, freed once.
        unsafe { zstd_sys::ZSTD_freeDCtx(self.0.as_ptr()) };
    }
}

/// What a frame compressed with the store's dictionary is decoded against.
#[derive(Clone, Copy)]
pub(crate) enum Dict<'a> {
    /// Digested once at parse: the CLI may read every entry of a store.
    #[cfg(feature = "std")]
    Digested(&'a Dictionary),
    /// The bytes, loaded for this one frame: the runtime's way. It reads each module once,
    /// and `ZSTD_createDDict`'s code would take 4 KB of the 150 KB it may add to an output.
    /// (Built with `std`, only the tests below use it.)
    #[cfg_attr(all(feature = "std", not(test)), allow(dead_code))]
    Bytes(&'a [u8]),
}

/// A store's dictionary digested once (a `ZSTD_DDict`), so reading many entries does not
/// load it every time.
#[cfg(feature = "std")]
pub(crate) struct Dictionary(NonNull<zstd_sys::ZSTD_DDict>);

// SAFETY: zstd never writes a DDict after creating it; any number of decoders may reference
// it at once from any thread.
#[cfg(feature = "std")]
unsafe impl Send for Dictionary {}
// SAFETY: as above.
#[cfg(feature = "std")]
unsafe impl Sync for Dictionary {}

#[cfg(feature = "std")]
impl Dictionary {
    /// `None` when zstd has no memory for it.
    pub(crate) fn new(bytes: &[u8]) -> Option<Self> {
        // SAFETY: reads `bytes` during the call only (the DDict keeps a copy).
        NonNull::new(unsafe { zstd_sys::ZSTD_createDDict(bytes.as_ptr().cast(), bytes.len()) })
            .map(Dictionary)
    }
}

#[cfg(feature = "std")]
impl Drop for Dictionary {
    fn drop(&mut self) {
        // SAFETY: made by ZSTD_createDDict, freed once.
        unsafe { zstd_sys::ZSTD_freeDDict(self.0.as_ptr()) };
    }
}

fn failed(code: usize) -> Option<String> {
    // SAFETY: a pure function of the code.
    (unsafe { zstd_sys::ZSTD_isError(code) } != 0)
        .then(|| zstd_safe::get_error_name(code).to_owned())
}

/// Decodes the single frame `src` (with `dict` as its dictionary, if any) into `out`, calling
/// `progress` with `out[..n]` each time `n` grows. Returns the bytes decoded; a frame that
/// would decode past `out` fails ("destination buffer too small"), as does one that ends
/// early or is followed by anything. (A solid group read blob by blob: [`Resumable`].)
///
/// The prefixes `progress` is given are never written again by this function, and it
/// touches `out` only through one pointer taken at the start: a caller may go on reading a
/// prefix (from another thread) after `progress` returns, for as long as it holds `out`.
pub(crate) fn decode_frame_into(
    src: &[u8],
    dict: Option<Dict<'_>>,
    out: &mut [u8],
    progress: &mut dyn FnMut(&[u8]),
) -> Result<usize, Failure> {
    // SAFETY: plain allocation; NULL (no memory) is handled.
    let dctx = NonNull::new(unsafe { zstd_sys::ZSTD_createDCtx() })
        .map(DCtx)
        .ok_or_else(|| Failure::Frame("out of memory for a decoder".into()))?;
    let d = dctx.0.as_ptr();
    let begun = match dict {
        // SAFETY: `d` and the DDict are live; the DDict outlives this decode.
        #[cfg(feature = "std")]
        Some(Dict::Digested(dict)) => unsafe {
            zstd_sys::ZSTD_decompressBegin_usingDDict(d, dict.0.as_ptr())
        },
        // SAFETY: `d` is live; zstd references the bytes, which outlive this decode.
        Some(Dict::Bytes(b)) => unsafe {
            zstd_sys::ZSTD_decompressBegin_usingDict(d, b.as_ptr().cast(), b.len())
        },
        // SAFETY: `d` is live.
        None => unsafe { zstd_sys::ZSTD_decompressBegin(d) },
    };
    if let Some(e) = failed(begun) {
        return Err(Failure::Dictionary(e));
    }
    let mut at = Position::default();
    // SAFETY: `d` is live and begun; `out` is `cap` writable, initialised bytes.
    unsafe {
        run(
            d,
            src,
            out.as_mut_ptr(),
            out.len(),
            &mut at,
            usize::MAX,
            progress,
        )
    }
}

/// How far a frame has been decoded: bytes of it read, bytes out.
#[derive(Default, Clone, Copy)]
struct Position {
    read: usize,
    done: usize,
}

/// Decodes `src` on from `at` with the begun decoder `d` into the buffer at `base` (`cap`
/// bytes, whose first `at.done` hold what the frame decoded so far: the history), until
/// `stop_at` bytes are out or the frame ends; `at` moves along. Returns the bytes out.
///
/// # Safety
/// `d` is a live decoder that has decoded `src[..at.read]` into `base[..at.done]`; `base`
/// points to `cap` writable bytes that nothing else accesses during the call, of which
/// `[..at.done]` are initialised.
#[allow(clippy::too_many_arguments)]
unsafe fn run(
    d: *mut zstd_sys::ZSTD_DCtx,
    src: &[u8],
    base: *mut u8,
    cap: usize,
    at: &mut Position,
    stop_at: usize,
    progress: &mut dyn FnMut(&[u8]),
) -> Result<usize, Failure> {
    while at.done < stop_at {
        // SAFETY: `d` is live.
        let need = unsafe { zstd_sys::ZSTD_nextSrcSizeToDecompress(d) };
        if need == 0 {
            if at.read != src.len() {
                return Err(Failure::Frame("bytes after the frame".into()));
            }
            break;
        }
        let input = at
            .read
            .checked_add(need)
            .and_then(|end| src.get(at.read..end))
            .ok_or_else(|| Failure::Frame("the frame ends early".into()))?;
        // SAFETY: `d` is live. zstd writes `base[done..]` (at most `cap - done` bytes) and
        // reads its history from `base[..done]`, all inside the buffer; the input is `need`
        // readable bytes.
        let n = unsafe {
            zstd_sys::ZSTD_decompressContinue(
                d,
                base.add(at.done).cast(),
                cap - at.done,
                input.as_ptr().cast(),
                input.len(),
            )
        };
        if let Some(e) = failed(n) {
            return Err(Failure::Frame(e));
        }
        at.read += need;
        if n > 0 {
            at.done = at
                .done
                .checked_add(n)
                .filter(|&d| d <= cap)
                .ok_or_else(|| Failure::Frame("decoded past the buffer".into()))?;
            // SAFETY: `base[..done]` is initialised (zstd wrote what the caller had not)
            // and final: zstd writes only from `done` on.
            progress(unsafe { core::slice::from_raw_parts(base, at.done) });
        }
    }
    Ok(at.done)
}

/// A solid group's frame decoded as far as the blobs read so far needed, kept with its
/// decoder, so that the next blob of the group continues where the last one stopped instead
/// of decoding the group from its start again (the runtime's; the CLI decodes groups whole).
/// Its buffer has room for the whole group; only what was decoded is ever touched.
#[cfg_attr(feature = "std", allow(dead_code))]
pub(crate) struct Resumable {
    dctx: DCtx,
    /// Capacity: the group's content size; length 0 (written through its pointer only).
    buf: Vec<u8>,
    at: Position,
    /// The group: its frame's offset in the store.
    pub(crate) key: u64,
}

// SAFETY: the decoder and the buffer are this value's alone (no dictionary is referenced);
// moving it to another thread moves them with it.
unsafe impl Send for Resumable {}

#[cfg_attr(feature = "std", allow(dead_code))]
impl Resumable {
    /// A decoder for the frame at `key` whose content is `content` bytes (no dictionary:
    /// solid groups have none). `None` without memory for it.
    pub(crate) fn new(key: u64, content: usize) -> Option<Self> {
        let mut buf = Vec::new();
        buf.try_reserve_exact(content).ok()?;
        // SAFETY: plain allocation; NULL (no memory) is handled.
        let dctx = DCtx(NonNull::new(unsafe { zstd_sys::ZSTD_createDCtx() })?);
        // SAFETY: `dctx` is live.
        if failed(unsafe { zstd_sys::ZSTD_decompressBegin(dctx.0.as_ptr()) }).is_some() {
            return None;
        }
        Some(Resumable {
            dctx,
            buf,
            at: Position::default(),
            key,
        })
    }

    /// Decodes on until `stop_at` bytes of the group are out (or it ends); returns how many
    /// are. Nothing is decoded twice.
    pub(crate) fn advance(&mut self, src: &[u8], stop_at: usize) -> Result<usize, Failure> {
        let cap = self.buf.capacity();
        // SAFETY: the decoder has decoded `src[..read]` into `buf[..done]` (this value's
        // earlier calls, on the same frame: the caller keys it by the frame's offset), and
        // the buffer's `cap` bytes are this value's.
        unsafe {
            run(
                self.dctx.0.as_ptr(),
                src,
                self.buf.as_mut_ptr(),
                cap,
                &mut self.at,
                stop_at,
                &mut |_| {},
            )
        }
    }

    /// What the group decoded to so far.
    pub(crate) fn decoded(&self) -> &[u8] {
        // SAFETY: the first `done` bytes of the buffer were written by the decoder.
        unsafe { core::slice::from_raw_parts(self.buf.as_ptr(), self.at.done) }
    }
}

/// One [`Resumable`] shared by the threads reading a store: the one that takes it uses it,
/// another reading at the same time decodes on its own (no waiting behind a decode).
#[cfg_attr(feature = "std", allow(dead_code))]
#[derive(Default)]
pub(crate) struct LastGroup {
    busy: core::sync::atomic::AtomicBool,
    kept: core::cell::UnsafeCell<Option<Resumable>>,
}

// SAFETY: `kept` is reached only by the thread that set `busy` (Acquire) until it clears it
// (Release): never by two threads at once. Resumable is Send.
unsafe impl Sync for LastGroup {}

#[cfg_attr(feature = "std", allow(dead_code))]
impl LastGroup {
    /// `f` with the kept group, or with an empty place of its own when another thread holds
    /// it (what `f` leaves there is then dropped).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut Option<Resumable>) -> R) -> R {
        use core::sync::atomic::Ordering;
        if self
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return f(&mut None);
        }
        // SAFETY: this thread set `busy`: no other reaches `kept` until it is cleared below
        // (the runtime aborts on panic, so `f` returns or nothing runs on).
        let r = f(unsafe { &mut *self.kept.get() });
        self.busy.store(false, Ordering::Release);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group read blob by blob, in any order: each stretch is what decoding the whole frame
    /// gives, nothing is decoded twice (the decoder only moves forward, a block at a time),
    /// and a damaged or truncated frame is an error, never wrong bytes.
    #[test]
    fn a_resumed_group_gives_the_bytes_of_a_whole_decode() {
        let raw: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 29) as u8 + (i / 40_000 % 7) as u8)
            .collect();
        let frame = zstd::bulk::compress(&raw, 3).unwrap();
        let mut g = Resumable::new(8, raw.len()).unwrap();
        let mut before = 0;
        for stop in [
            1, 200_000, 150_000, 1_000_000, 1_000_001, 3_000_000, 2_000_000,
        ] {
            let n = g
                .advance(&frame, stop)
                .unwrap_or_else(|_| panic!("stop {stop}"));
            assert!(n >= stop.min(raw.len()) && n >= before, "stop {stop}: {n}");
            assert!(
                n - before.max(stop) < 1 << 17 || n == before,
                "decoded past a block"
            );
            assert_eq!(g.decoded(), &raw[..n]);
            before = n;
        }
        assert_eq!(g.advance(&frame, usize::MAX).ok(), Some(raw.len()));

        let mut bad = frame.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x5a;
        let mut g = Resumable::new(8, raw.len()).unwrap();
        assert!(g.advance(&bad, usize::MAX).is_err() || g.decoded() != raw);
        let mut g = Resumable::new(8, raw.len()).unwrap();
        assert!(g.advance(&frame[..mid], usize::MAX).is_err());
        let mut long = frame.clone();
        long.push(0);
        let mut g = Resumable::new(8, raw.len()).unwrap();
        assert!(g.advance(&long, usize::MAX).is_err());
        // A frame that decodes to more than the group's size given.
        let mut g = Resumable::new(8, raw.len() - 1).unwrap();
        assert!(g.advance(&frame, usize::MAX).is_err());
    }

    /// A frame made with a dictionary decodes the same through the digested dictionary (the
    /// CLI's way) and through its bytes (the runtime's), and not without it.
    #[test]
    fn both_ways_to_give_the_dictionary_agree() {
        let dict_bytes: Vec<u8> = (0..4096u32)
            .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
            .collect();
        let raw: Vec<u8> = dict_bytes
            .iter()
            .rev()
            .chain(&dict_bytes[..5000])
            .copied()
            .collect();
        let mut c = zstd::bulk::Compressor::with_dictionary(9, &dict_bytes).unwrap();
        let frame = c.compress(&raw).unwrap();
        let digested = Dictionary::new(&dict_bytes).unwrap();
        for dict in [Dict::Digested(&digested), Dict::Bytes(&dict_bytes)] {
            let mut out = vec![0u8; raw.len()];
            let n = decode_frame_into(&frame, Some(dict), &mut out, &mut |_| {})
                .unwrap_or_else(|_| panic!("did not decode"));
            assert_eq!(n, raw.len());
            assert_eq!(out, raw);
        }
        let mut out = vec![0u8; raw.len()];
        assert!(decode_frame_into(&frame, None, &mut out, &mut |_| {}).is_err());
    }
}
