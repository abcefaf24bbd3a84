//! Decompression of the entry payloads nvcc compresses (`-Xfatbin=-compress-all`,
//! `--compress-mode=...`).

use std::borrow::Cow;

use super::flags;
use super::Entry;

/// Refuse to inflate past this: a corrupt size field must not make us allocate terabytes.
const MAX_UNCOMPRESSED: u64 = 1 << 34;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn from_flags(f: u64) -> Self {
        if f & flags::COMPRESSED_ZSTD != 0 {
            Compression::Zstd
        } else if f & flags::COMPRESSED_LZ4 != 0 {
            Compression::Lz4
        } else {
            Compression::None
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DecompressError {
    #[error("{arch} entry: compressed size {compressed} exceeds its payload of {stored} bytes")]
    CompressedTooLong {
        arch: String,
        compressed: u32,
        stored: usize,
    },
    #[error("{arch} entry: declared uncompressed size {0} is implausible", .size)]
    SizeTooLarge { arch: String, size: u64 },
    #[error("{arch} entry: corrupt {codec} data: {message}")]
    Corrupt {
        arch: String,
        codec: &'static str,
        message: String,
    },
    #[error("{arch} entry: decompressed to {got} bytes, header says {want}")]
    SizeMismatch { arch: String, got: usize, want: u64 },
}

pub(super) fn decompress(e: &Entry) -> Result<Cow<'_, [u8]>, DecompressError> {
    let codec = e.compression();
    if codec == Compression::None {
        return Ok(Cow::Borrowed(&e.stored));
    }
    let arch = e.arch_name();
    let data = e.stored.get(..e.header.compressed_len as usize).ok_or(
        DecompressError::CompressedTooLong {
            arch: arch.clone(),
            compressed: e.header.compressed_len,
            stored: e.stored.len(),
        },
    )?;
    let want = e.header.uncompressed_len;
    // No codec inflates a byte into more than this (LZ4's bound is 255:1; zstd's frames of
    // real cubins stay far below 1000:1): a larger claim is corruption, refused before any
    // allocation.
    let max_ratio: u64 = match codec {
        Compression::Lz4 => 255,
        _ => 1 << 16,
    };
    if want > MAX_UNCOMPRESSED || want > (data.len() as u64 + 64).saturating_mul(max_ratio) {
        return Err(DecompressError::SizeTooLarge { arch, size: want });
    }
    let corrupt = |message: String| DecompressError::Corrupt {
        arch: arch.clone(),
        codec: codec.name(),
        message,
    };
    let out = match codec {
        Compression::Zstd => {
            use std::io::Read;
            // Bounded read: a frame that inflates past the declared size is an error, not
            // an allocation of whatever the frame claims.
            // The frame says how large it is; a frame and a header that disagree are corrupt.
            if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(data) {
                if n != want {
                    return Err(DecompressError::SizeMismatch {
                        arch,
                        got: usize::try_from(n).unwrap_or(usize::MAX),
                        want,
                    });
                }
            }
            let dec = zstd::stream::read::Decoder::new(data).map_err(|e| corrupt(e.to_string()))?;
            // Grown as the data arrives, so a lie costs nothing up front.
            let mut out = Vec::with_capacity(want.min(1 << 26) as usize);
            dec.take(want + 1)
                .read_to_end(&mut out)
                .map_err(|e| corrupt(e.to_string()))?;
            out
        }
        Compression::Lz4 => {
            lz4_flex::block::decompress(data, want as usize).map_err(|e| corrupt(e.to_string()))?
        }
        Compression::None => unreachable!("handled above"),
    };
    if out.len() as u64 != want {
        return Err(DecompressError::SizeMismatch {
            arch,
            got: out.len(),
            want,
        });
    }
    Ok(Cow::Owned(out))
}
