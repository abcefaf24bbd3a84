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

/// The most one zstd block decodes to (`ZSTD_BLOCKSIZE_MAX`).
pub(crate) const BLOCK_MAX: usize = 128 << 10;

fn failed(code: usize) -> Option<String> {
    // SAFETY: a pure function of the code.
    (unsafe { zstd_sys::ZSTD_isError(code) } != 0)
        .then(|| zstd_safe::get_error_name(code).to_owned())
}

/// Decodes the single frame `src` (with `dict` as its dictionary, if any) into `out`, calling
/// `progress` with `out[..n]` each time `n` grows. Returns the bytes decoded; a frame that
/// would decode past `out` fails ("destination buffer too small"), as does one that ends
/// early or is followed by anything. Decoding stops once `stop_at` bytes are out (a solid
/// group's prefix, up to the blob wanted; `usize::MAX` decodes the whole frame): `out` then
/// needs room for the block that crosses `stop_at` ([`BLOCK_MAX`] past it).
///
/// The prefixes `progress` is given are never written again by this function, and it
/// touches `out` only through one pointer taken at the start: a caller may go on reading a
/// prefix (from another thread) after `progress` returns, for as long as it holds `out`.
pub(crate) fn decode_frame_into(
    src: &[u8],
    dict: Option<Dict<'_>>,
    out: &mut [u8],
    stop_at: usize,
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
    let base = out.as_mut_ptr();
    let cap = out.len();
    let (mut read, mut done) = (0usize, 0usize);
    loop {
        // SAFETY: `d` is live.
        let need = unsafe { zstd_sys::ZSTD_nextSrcSizeToDecompress(d) };
        if need == 0 {
            break;
        }
        let input = read
            .checked_add(need)
            .and_then(|end| src.get(read..end))
            .ok_or_else(|| Failure::Frame("the frame ends early".into()))?;
        // SAFETY: `d` is live. zstd writes `out[done..]` (at most `cap - done` bytes) and
        // reads its history from `out[..done]`, all inside the buffer `base` points to; the
        // input is `need` readable bytes.
        let n = unsafe {
            zstd_sys::ZSTD_decompressContinue(
                d,
                base.add(done).cast(),
                cap - done,
                input.as_ptr().cast(),
                input.len(),
            )
        };
        if let Some(e) = failed(n) {
            return Err(Failure::Frame(e));
        }
        read += need;
        if n > 0 {
            done = done
                .checked_add(n)
                .filter(|&d| d <= cap)
                .ok_or_else(|| Failure::Frame("decoded past the buffer".into()))?;
            // SAFETY: `out[..done]` is initialised (it is the caller's slice) and final:
            // zstd writes only from `done` on.
            progress(unsafe { core::slice::from_raw_parts(base, done) });
            if done >= stop_at {
                return Ok(done);
            }
        }
    }
    if read != src.len() {
        return Err(Failure::Frame("bytes after the frame".into()));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let n = decode_frame_into(&frame, Some(dict), &mut out, usize::MAX, &mut |_| {})
                .unwrap_or_else(|_| panic!("did not decode"));
            assert_eq!(n, raw.len());
            assert_eq!(out, raw);
        }
        let mut out = vec![0u8; raw.len()];
        assert!(decode_frame_into(&frame, None, &mut out, usize::MAX, &mut |_| {}).is_err());
    }
}
