//! The compressors of the archives inside conda and Debian packages (`pkg-*.tar.zst`,
//! `.tar.bz2`, `data.tar.xz`, ...), read and written in one place for both formats.
//!
//! A rewritten archive keeps the input's codec (whatever reads the input reads the output)
//! at a level [`Effort`] picks. Writing is where a package prune spends its time: on
//! nvidia-curand's 51 MB pruned library (2 cores), zstd 19 takes 9.5 s and xz 6 13.8 s
//! against 2.6 s for the whole prune of the same wheel, for archives 1-3% smaller than zstd
//! 12's and xz 0's (BENCHMARKS.md, "Package writing at wheel speed"). So [`Effort::Fast`],
//! the default, writes at a level that keeps a package within about twice a wheel's time,
//! and [`Effort::Best`] at the packaging tools' own defaults (conda-build's zstd 19,
//! dpkg-deb's xz 6 and gzip 9) for an upload where every byte counts.
//!
//! zstd, xz and bzip2 compress on every core (zstd and xz in their multi-threaded modes,
//! bzip2 in [`super::parallel_bzip2`]), and bzip2 also decodes on every core. No output
//! depends on the number of threads (zstd's jobs and xz's blocks are cut at fixed sizes,
//! bzip2's where a block is full): the same input gives the same bytes on every machine.

use std::io::{Read, Write};

/// How hard a rewritten archive is compressed (`--compression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Effort {
    /// Within about twice a wheel's time: zstd 12, xz 0, gzip 6, bzip2 9.
    #[default]
    Fast,
    /// The packaging tools' defaults: zstd 19, xz 6, gzip 9, bzip2 9.
    Best,
}

impl Effort {
    /// The option's spelling.
    pub fn parse(text: &str) -> Option<Effort> {
        match text {
            "fast" => Some(Effort::Fast),
            "best" => Some(Effort::Best),
            _ => None,
        }
    }
}

/// How an archive inside a package is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codec {
    None,
    Gzip,
    Xz,
    Zstd,
    Bzip2,
}

impl Codec {
    /// A Debian member's codec from its name (`data.tar.xz` with `base` `data.tar`).
    pub(super) fn of_deb_member(name: &str, base: &str) -> Option<Codec> {
        match name.strip_prefix(base)? {
            "" => Some(Codec::None),
            ".gz" => Some(Codec::Gzip),
            ".xz" => Some(Codec::Xz),
            ".zst" => Some(Codec::Zstd),
            _ => None,
        }
    }

    /// The suffix a Debian member compressed so carries.
    pub(super) fn deb_suffix(self) -> &'static str {
        match self {
            Codec::None => "",
            Codec::Gzip => ".gz",
            Codec::Xz => ".xz",
            Codec::Zstd => ".zst",
            Codec::Bzip2 => ".bz2",
        }
    }

    pub(super) fn reader<'a>(self, r: impl Read + 'a) -> std::io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Codec::None => Box::new(r),
            Codec::Gzip => Box::new(flate2::read::GzDecoder::new(r)),
            Codec::Xz => Box::new(liblzma::read::XzDecoder::new(r)),
            Codec::Zstd => Box::new(zstd::stream::read::Decoder::new(r)?),
            Codec::Bzip2 => Box::new(super::parallel_bzip2::Reader::new(r)),
        })
    }

    /// The level `effort` gives this codec.
    pub(super) fn level(self, effort: Effort) -> u32 {
        match (self, effort) {
            (Codec::None, _) => 0,
            (Codec::Gzip, Effort::Fast) => 6,
            (Codec::Gzip, Effort::Best) => 9,
            (Codec::Xz, Effort::Fast) => 0,
            (Codec::Xz, Effort::Best) => 6,
            (Codec::Zstd, Effort::Fast) => 12,
            (Codec::Zstd, Effort::Best) => 19,
            (Codec::Bzip2, _) => 9,
        }
    }

    /// Compresses what `body` writes into `to`, and gives `to` back once the stream is
    /// finished.
    pub(super) fn encode<W: Write>(
        self,
        effort: Effort,
        to: W,
        body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<W> {
        let level = self.level(effort);
        match self {
            Codec::None => {
                let mut to = to;
                body(&mut to)?;
                Ok(to)
            }
            Codec::Gzip => {
                let mut w = flate2::write::GzEncoder::new(to, flate2::Compression::new(level));
                body(&mut w)?;
                w.finish()
            }
            Codec::Xz => {
                let stream = liblzma::stream::MtStreamBuilder::new()
                    .preset(level)
                    .threads(threads())
                    .check(liblzma::stream::Check::Crc64)
                    .encoder()
                    .map_err(std::io::Error::other)?;
                let mut w = liblzma::write::XzEncoder::new_stream(to, stream);
                body(&mut w)?;
                w.finish()
            }
            Codec::Zstd => {
                let mut w = zstd::stream::write::Encoder::new(to, level as i32)?;
                w.multithread(threads())?;
                body(&mut w)?;
                w.finish()
            }
            Codec::Bzip2 => {
                let mut w = super::parallel_bzip2::Writer::new(to, level);
                body(&mut w)?;
                w.finish()
            }
        }
    }
}

/// Worker threads for zstd and xz: every core (at least one, which is still the
/// multi-threaded format: the bytes are the same for any count).
fn threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(16) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data that compresses a little and spans several zstd jobs and xz blocks at level 0.
    fn sample() -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..6 << 20)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if i % 3 == 0 {
                    (i / 4096) as u8
                } else {
                    x as u8
                }
            })
            .collect()
    }

    fn encode_with(codec: Codec, effort: Effort, data: &[u8]) -> Vec<u8> {
        codec
            .encode(effort, Vec::new(), |w| w.write_all(data))
            .unwrap()
    }

    #[test]
    fn every_codec_reads_back_what_it_wrote() {
        let data = sample();
        for codec in [
            Codec::None,
            Codec::Gzip,
            Codec::Xz,
            Codec::Zstd,
            Codec::Bzip2,
        ] {
            for effort in [Effort::Fast, Effort::Best] {
                let packed = encode_with(codec, effort, &data[..1 << 20]);
                let mut back = Vec::new();
                codec
                    .reader(packed.as_slice())
                    .unwrap()
                    .read_to_end(&mut back)
                    .unwrap();
                assert!(back == data[..1 << 20], "{codec:?} {effort:?}");
            }
        }
    }

    /// The multi-threaded encoders' output is the same whatever the thread count, which is
    /// what lets the writer use every core and still write the same bytes everywhere.
    #[test]
    fn the_bytes_do_not_depend_on_the_thread_count() {
        let data = sample();
        let xz = |threads: u32| {
            let stream = liblzma::stream::MtStreamBuilder::new()
                .preset(Codec::Xz.level(Effort::Fast))
                .threads(threads)
                .check(liblzma::stream::Check::Crc64)
                .encoder()
                .unwrap();
            let mut w = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
            w.write_all(&data).unwrap();
            w.finish().unwrap()
        };
        assert!(xz(1) == xz(3));
        let zstd = |threads: u32| {
            let mut w = zstd::stream::write::Encoder::new(
                Vec::new(),
                Codec::Zstd.level(Effort::Fast) as i32,
            )
            .unwrap();
            w.multithread(threads).unwrap();
            w.write_all(&data).unwrap();
            w.finish().unwrap()
        };
        assert!(zstd(1) == zstd(3));
    }
}
