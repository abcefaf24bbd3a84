//! bzip2 on every core, one stream in and one stream out, for conda's `.tar.bz2`.
//!
//! libbzip2 is single-threaded, and a `.tar.bz2` prune decodes its input, encodes its output
//! and decodes that again to check it: on nvidia-curand's library (2 cores) 11.8 s against
//! the wheel's 2.45 s, all of it in bzip2. A bzip2 stream is a header (`BZh1`-`BZh9`), blocks
//! that each stand alone (each starts with a 48-bit magic number at any bit offset, carries
//! its own CRC, and undoes its own run-length coding) and an end marker with a CRC combined
//! from the blocks'. So:
//!
//! - [`Writer`] cuts its input where one block ends (it counts libbzip2's first run-length
//!   stage, which is what fills a block), compresses the pieces on every core, each as a
//!   one-block stream, and splices their blocks, bit by bit, into one stream. The cut depends
//!   on the data alone, so the bytes are the same for any number of threads; what any bzip2
//!   reader reads is one ordinary stream (as lbzip2 writes, unlike pbzip2's several).
//! - [`Reader`] finds the blocks of a stream by their magic numbers, decodes them on every
//!   core, each wrapped as a one-block stream, and checks the stream's combined CRC. A magic
//!   number can occur by chance inside a block (about once in 2^48 bit positions): the piece
//!   cut there fails to decode, and is decoded again joined to the next, as lbzip2 does.
//!   Several streams one after another (pbzip2's output) are read as their concatenation,
//!   as conda's own readers do; anything else after a stream is refused.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::mpsc::{Receiver, SyncSender};
use std::thread::JoinHandle;

const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
const END_MAGIC: u64 = 0x1772_4538_5090;
const MAGIC_BITS: u64 = 48;
/// A block's magic, then its CRC.
const BLOCK_HEAD_BITS: u64 = MAGIC_BITS + 32;
/// The largest block a stream of level 9 can hold, coded (900,000 symbols of at most 20
/// bits, their tables and headers): a longer piece is damage, not a block.
const MAX_BLOCK_BYTES: u64 = 900_000 * 20 / 8 + 64 * 1024;
/// The most input one piece takes (a block of long runs holds up to 46 MB): what the
/// pieces in flight hold stays a few MB each.
const MAX_PIECE: usize = 8 << 20;
/// The most a block can decode to (900,000 run-length symbols of up to 255 bytes per 5).
const MAX_BLOCK_OUTPUT: u64 = 900_000 / 5 * 255 + 5;

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

fn damaged(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// The `n` bits (at most 57) of `src` from bit `at`, most significant first, as bzip2
/// packs them. Bits past the end read as zero.
fn bits_at(src: &[u8], at: u64, n: u32) -> u64 {
    let first = (at / 8) as usize;
    let mut window = [0u8; 8];
    let have = src.len().saturating_sub(first).min(8);
    window[..have].copy_from_slice(&src[first..first + have]);
    let v = u64::from_be_bytes(window);
    (v << (at % 8)) >> (64 - n)
}

/// Bits written most significant first, whole bytes taken as they fill.
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    /// Bits used in the last byte of `bytes` (0: every byte is whole).
    partial: u32,
}

impl Bits {
    fn push(&mut self, value: u64, n: u32) {
        for i in (0..n).rev() {
            let bit = ((value >> i) & 1) as u8;
            if self.partial == 0 {
                self.bytes.push(0);
            }
            let last = self.bytes.last_mut().expect("a byte was pushed");
            *last |= bit << (7 - self.partial);
            self.partial = (self.partial + 1) % 8;
        }
    }

    /// Appends bits `from..to` of `src`.
    fn extend(&mut self, src: &[u8], from: u64, to: u64) {
        let mut at = from;
        // To a byte boundary of the destination, bit by bit; then a byte at a time.
        while at < to && self.partial != 0 {
            self.push(bits_at(src, at, 1), 1);
            at += 1;
        }
        let whole = (to - at) / 8;
        let shift = (at % 8) as u32;
        let base = (at / 8) as usize;
        if shift == 0 {
            self.bytes
                .extend_from_slice(&src[base..base + whole as usize]);
        } else {
            self.bytes.reserve(whole as usize);
            for i in 0..whole as usize {
                let hi = src[base + i] << shift;
                let lo = src.get(base + i + 1).map_or(0, |b| b >> (8 - shift));
                self.bytes.push(hi | lo);
            }
        }
        at += whole * 8;
        if at < to {
            self.push(bits_at(src, at, (to - at) as u32), (to - at) as u32);
        }
    }

    /// The whole bytes written so far, taken out.
    fn take_whole(&mut self) -> Vec<u8> {
        let keep = usize::from(self.partial != 0);
        let tail = self.bytes.split_off(self.bytes.len() - keep);
        std::mem::replace(&mut self.bytes, tail)
    }

    /// Pads to a byte with zero bits and gives every byte.
    fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// The stream CRC after one more block.
fn combine(stream: u32, block: u32) -> u32 {
    stream.rotate_left(1) ^ block
}

/// How much of a block libbzip2's first stage (runs of 4 to 255 equal bytes become 4 bytes
/// and a count) makes of the bytes seen so far, to cut the input where a block is full.
#[derive(Default)]
struct RunLength {
    done: u64,
    byte: u8,
    run: u32,
}

impl RunLength {
    fn cost(run: u32) -> u64 {
        if run >= 4 {
            5
        } else {
            u64::from(run)
        }
    }

    fn len(&self) -> u64 {
        self.done + Self::cost(self.run)
    }

    /// The length with `b` added, and the state that gives it.
    fn with(&self, b: u8) -> RunLength {
        if self.run > 0 && b == self.byte && self.run < 255 {
            RunLength {
                run: self.run + 1,
                ..*self
            }
        } else {
            RunLength {
                done: self.len(),
                byte: b,
                run: 1,
            }
        }
    }
}

/// One piece compressed as a one-block stream: the block's bits and CRC.
struct Block {
    stream: Vec<u8>,
    end: u64,
    crc: u32,
}

/// Compresses `piece` alone and finds its one block.
fn compress_piece(piece: &[u8], level: u32) -> io::Result<Block> {
    let mut enc = bzip2::write::BzEncoder::new(
        Vec::with_capacity(piece.len() / 2 + 1024),
        bzip2::Compression::new(level),
    );
    enc.write_all(piece)?;
    let stream = enc.finish()?;
    let not_one_block = || io::Error::other("a bzip2 piece did not compress to one block");
    if stream.len() < 14 || bits_at(&stream, 32, 48) != BLOCK_MAGIC {
        return Err(not_one_block());
    }
    let crc = bits_at(&stream, 80, 32) as u32;
    let total = stream.len() as u64 * 8;
    // The end marker, the stream CRC (which for one block is the block's) and up to 7 zero
    // bits of padding close the stream.
    let end = (0..8)
        .map(|pad| total - pad - 80)
        .find(|&end| {
            bits_at(&stream, end, 48) == END_MAGIC
                && bits_at(&stream, end + 48, 32) == u64::from(crc)
                && bits_at(&stream, end + 80, (total - end - 80) as u32 + 1) >> 1 == 0
        })
        .ok_or_else(not_one_block)?;
    Ok(Block { stream, end, crc })
}

/// A bzip2 writer whose pieces compress on every core, writing one stream.
pub(super) struct Writer<W: Write> {
    to: W,
    level: u32,
    /// The most a piece may give libbzip2's block: one less than libbzip2's block limit,
    /// so that a piece never spills into a second block.
    limit: u64,
    piece: Vec<u8>,
    run: RunLength,
    jobs: VecDeque<JoinHandle<io::Result<Block>>>,
    out: Bits,
    crc: u32,
}

impl<W: Write> Writer<W> {
    pub(super) fn new(to: W, level: u32) -> Writer<W> {
        let level = level.clamp(1, 9);
        let mut out = Bits::default();
        out.push(u64::from(u32::from_be_bytes(*b"BZh0") + level), 32);
        Writer {
            to,
            level,
            limit: 100_000 * u64::from(level) - 19 - 1,
            piece: Vec::new(),
            run: RunLength::default(),
            jobs: VecDeque::new(),
            out,
            crc: 0,
        }
    }

    fn dispatch(&mut self) -> io::Result<()> {
        if self.piece.is_empty() {
            return Ok(());
        }
        if self.jobs.len() >= threads() {
            self.splice_one()?;
        }
        let piece = std::mem::take(&mut self.piece);
        let level = self.level;
        self.jobs
            .push_back(std::thread::spawn(move || compress_piece(&piece, level)));
        self.run = RunLength::default();
        Ok(())
    }

    /// Splices the oldest piece's block into the stream.
    fn splice_one(&mut self) -> io::Result<()> {
        let Some(job) = self.jobs.pop_front() else {
            return Ok(());
        };
        let block = job
            .join()
            .map_err(|_| io::Error::other("a bzip2 worker panicked"))??;
        self.out.extend(&block.stream, 32, block.end);
        self.crc = combine(self.crc, block.crc);
        self.to.write_all(&self.out.take_whole())
    }

    /// Ends the stream and gives the writer back.
    pub(super) fn finish(mut self) -> io::Result<W> {
        self.dispatch()?;
        while !self.jobs.is_empty() {
            self.splice_one()?;
        }
        let mut out = std::mem::take(&mut self.out);
        out.push(END_MAGIC, 48);
        out.push(u64::from(self.crc), 32);
        self.to.write_all(&out.finish())?;
        Ok(self.to)
    }
}

impl<W: Write> Write for Writer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut i = 0;
        while i < buf.len() {
            let mut j = i;
            let room = MAX_PIECE - self.piece.len();
            while j < buf.len() && j - i < room {
                let next = self.run.with(buf[j]);
                if next.len() > self.limit {
                    break;
                }
                self.run = next;
                j += 1;
            }
            self.piece.extend_from_slice(&buf[i..j]);
            if j < buf.len() {
                self.dispatch()?;
            }
            i = j;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where the next magic number (a block's or the end's) of `buf` starts at or after bit
/// `from`, and whether it is the end's; `None` if there is none whose 48 bits `buf` holds.
fn next_magic(buf: &[u8], from: u64) -> Option<(u64, bool)> {
    let mut i = (from / 8) as usize;
    while i + 8 <= buf.len() {
        let w = u64::from_be_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        for s in 0..8u64 {
            let at = i as u64 * 8 + s;
            if at < from {
                continue;
            }
            let v = (w >> (16 - s)) & ((1 << 48) - 1);
            if v == BLOCK_MAGIC || v == END_MAGIC {
                return Some((at, v == END_MAGIC));
            }
        }
        i += 1;
    }
    // The last bytes: a magic may end exactly at the buffer's end.
    let total = buf.len() as u64 * 8;
    let mut at = from.max(i as u64 * 8);
    while at + MAGIC_BITS <= total {
        let v = bits_at(buf, at, 48);
        if v == BLOCK_MAGIC || v == END_MAGIC {
            return Some((at, v == END_MAGIC));
        }
        at += 1;
    }
    None
}

/// What a worker sends, in order: the block's bytes in chunks of [`CHUNK`] (at most
/// [`WAITING`] of them held until read, so that a block in flight holds a few MB whatever it
/// decodes to: one of zeros decodes to 46 MB), then `End`; or `Bad` where it does not decode.
/// A block cut short (at a magic number that chance put inside it) is `Bad` before any bytes:
/// bzip2 decodes all of a block's codes before it writes a byte.
enum Sent {
    Bytes(Vec<u8>),
    End,
    Bad,
}

const CHUNK: usize = 1 << 20;
const WAITING: usize = 2;

/// Decodes bits `from..to` of `src` (one block, wrapped as a stream of `level`), sending its
/// bytes to `tx`; stops early once the reader has gone.
fn decode_piece(src: &[u8], from: u64, to: u64, level: u8, tx: &SyncSender<Sent>) {
    let mut s = Bits::default();
    s.push(u64::from(u32::from_be_bytes([b'B', b'Z', b'h', level])), 32);
    s.extend(src, from, to);
    s.push(END_MAGIC, 48);
    s.push(bits_at(src, from + MAGIC_BITS, 32), 32);
    let stream = s.finish();
    let mut dec = bzip2::read::BzDecoder::new(stream.as_slice());
    let mut total = 0u64;
    loop {
        let mut chunk = vec![0; CHUNK];
        let mut n = 0;
        while n < CHUNK {
            match dec.read(&mut chunk[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(_) => {
                    let _ = tx.send(Sent::Bad);
                    return;
                }
            }
        }
        total += n as u64;
        if total > MAX_BLOCK_OUTPUT {
            let _ = tx.send(Sent::Bad);
            return;
        }
        if n == 0 {
            let _ = tx.send(Sent::End);
            return;
        }
        chunk.truncate(n);
        if tx.send(Sent::Bytes(chunk)).is_err() {
            return;
        }
    }
}

/// A block handed to a worker: bits `from..to` of the input (absolute bit offsets), its CRC,
/// and for the last block of a stream the stream's CRC from the end marker.
struct Piece {
    from: u64,
    to: u64,
    crc: u32,
    end: Option<(u64, u32)>,
    rx: Receiver<Sent>,
    /// Some of its bytes have been given out: it can no longer be taken back.
    given: bool,
}

/// Where the reader is in its input.
#[derive(Clone, Copy)]
enum Cursor {
    /// A stream header is due at this byte-aligned bit (or the input's end, after a stream).
    Header(u64),
    /// A block starts at `start`; the next magic is searched for from `looked` on.
    Blocks {
        start: u64,
        looked: u64,
    },
    /// The stream's last block is in flight; whether the end marker after it is one is known
    /// once it decodes.
    AwaitEnd,
    Done,
}

/// A bzip2 reader that decodes the blocks of its streams on every core.
pub(super) struct Reader<R: Read> {
    from: R,
    eof: bool,
    /// Compressed bytes from absolute bit `base` (a multiple of 8) on.
    buf: Vec<u8>,
    base: u64,
    cursor: Cursor,
    /// The current stream's level digit and its CRC over the blocks given out.
    level: u8,
    crc: u32,
    streams: u64,
    pieces: VecDeque<Piece>,
    out: Vec<u8>,
    at: usize,
    /// Test only: false magic numbers to find, and how many pieces were decoded again.
    #[cfg(test)]
    decoys: Vec<(u64, bool)>,
    #[cfg(test)]
    retried: u32,
}

impl<R: Read> Reader<R> {
    pub(super) fn new(from: R) -> Reader<R> {
        Reader {
            from,
            eof: false,
            buf: Vec::new(),
            base: 0,
            cursor: Cursor::Header(0),
            level: b'9',
            crc: 0,
            streams: 0,
            pieces: VecDeque::new(),
            out: Vec::new(),
            at: 0,
            #[cfg(test)]
            decoys: Vec::new(),
            #[cfg(test)]
            retried: 0,
        }
    }

    /// Reads more compressed bytes; false at the end of the input.
    fn fill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let had = self.buf.len();
        self.buf.resize(had + (1 << 20), 0);
        let n = loop {
            match self.from.read(&mut self.buf[had..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf.truncate(had);
                    return Err(e);
                }
            }
        };
        self.buf.truncate(had + n);
        self.eof = n == 0;
        Ok(n > 0)
    }

    /// Reads until bit `bit` is held or the input ends; whether it is held.
    fn hold(&mut self, bit: u64) -> io::Result<bool> {
        while self.end_bit() < bit {
            if !self.fill()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn end_bit(&self) -> u64 {
        self.base + self.buf.len() as u64 * 8
    }

    /// The `n` bits at absolute bit `at` (which the buffer holds).
    fn bits(&self, at: u64, n: u32) -> u64 {
        bits_at(&self.buf, at - self.base, n)
    }

    /// Drops the bytes no piece in flight and no later piece needs.
    fn trim(&mut self) {
        let keep = match (self.pieces.front(), self.cursor) {
            (Some(p), _) => p.from,
            (None, Cursor::Blocks { start, .. }) => start,
            (None, Cursor::Header(at)) => at,
            (None, Cursor::Done | Cursor::AwaitEnd) => self.end_bit(),
        };
        let drop = ((keep - self.base) / 8) as usize;
        if drop >= 1 << 20 || drop == self.buf.len() {
            self.buf.drain(..drop);
            self.base += drop as u64 * 8;
        }
    }

    /// Reads the stream header at `at`, or sees the input end there after a stream.
    fn begin_stream(&mut self, at: u64) -> io::Result<()> {
        self.hold(at + 32 + BLOCK_HEAD_BITS)?;
        if self.end_bit() == at && self.streams > 0 {
            self.cursor = Cursor::Done;
            return Ok(());
        }
        let head = (self.end_bit() >= at + 32).then(|| (self.bits(at, 32) as u32).to_be_bytes());
        let Some([b'B', b'Z', b'h', level @ b'1'..=b'9']) = head else {
            return Err(damaged(match self.streams {
                0 => "its bzip2 data does not start with a bzip2 header",
                _ => "bytes that are not a bzip2 stream follow its bzip2 stream",
            }));
        };
        if self.end_bit() < at + 32 + BLOCK_HEAD_BITS {
            return Err(damaged("its bzip2 stream ends after its header"));
        }
        self.level = level;
        self.streams += 1;
        self.crc = 0;
        let first = at + 32;
        match self.bits(first, 48) {
            BLOCK_MAGIC => {
                self.cursor = Cursor::Blocks {
                    start: first,
                    looked: first + 1,
                }
            }
            // An empty stream.
            END_MAGIC if self.bits(first + MAGIC_BITS, 32) == 0 => {
                self.cursor = Cursor::Header((first + BLOCK_HEAD_BITS).next_multiple_of(8))
            }
            _ => return Err(damaged("its bzip2 stream has no block after its header")),
        }
        Ok(())
    }

    /// Hands blocks to workers until as many are in flight as there are cores, or until the
    /// stream's last block is.
    fn dispatch(&mut self) -> io::Result<()> {
        loop {
            let (start, looked) = match self.cursor {
                Cursor::Done | Cursor::AwaitEnd => return Ok(()),
                Cursor::Header(at) => {
                    self.begin_stream(at)?;
                    continue;
                }
                Cursor::Blocks { start, looked } => (start, looked),
            };
            if self.pieces.len() > threads() {
                return Ok(());
            }
            let Some((at, is_end)) = self.next_boundary(looked) else {
                if self.end_bit() - start > MAX_BLOCK_BYTES * 8 {
                    return Err(damaged(
                        "its bzip2 data is damaged (a block longer than bzip2 writes)",
                    ));
                }
                let looked = looked.max(self.end_bit().saturating_sub(MAGIC_BITS - 1));
                self.cursor = Cursor::Blocks { start, looked };
                if !self.fill()? {
                    return Err(damaged(
                        "its bzip2 data is damaged or cut short (no end marker)",
                    ));
                }
                continue;
            };
            if at - start > MAX_BLOCK_BYTES * 8 {
                return Err(damaged(
                    "its bzip2 data is damaged (a block longer than bzip2 writes)",
                ));
            }
            let end = if is_end {
                if !self.hold(at + BLOCK_HEAD_BITS)? {
                    return Err(damaged("its bzip2 stream ends inside its end marker"));
                }
                Some((at, self.bits(at + MAGIC_BITS, 32) as u32))
            } else {
                None
            };
            self.spawn(start, at, end);
            self.cursor = match end {
                Some(_) => Cursor::AwaitEnd,
                None => Cursor::Blocks {
                    start: at,
                    looked: at + 1,
                },
            };
        }
    }

    /// The next magic number at or after bit `looked`: where, and whether it is the end's.
    fn next_boundary(&self, looked: u64) -> Option<(u64, bool)> {
        let found =
            next_magic(&self.buf, looked - self.base).map(|(at, end)| (self.base + at, end));
        #[cfg(test)]
        {
            // Decoys: magic numbers that chance put inside blocks.
            let decoy = self
                .decoys
                .iter()
                .find(|d| d.0 >= looked && d.0 < self.end_bit());
            if let Some(&d) = decoy {
                if found.is_none_or(|f| d.0 < f.0) {
                    return Some(d);
                }
            }
        }
        found
    }

    fn spawn(&mut self, from: u64, to: u64, end: Option<(u64, u32)>) {
        let lo = ((from - self.base) / 8) as usize;
        let hi = (to - self.base).div_ceil(8) as usize;
        let bytes = self.buf[lo..hi].to_vec();
        let shift = from % 8;
        let level = self.level;
        let crc = self.bits(from + MAGIC_BITS, 32) as u32;
        let (tx, rx) = std::sync::mpsc::sync_channel(WAITING);
        std::thread::spawn(move || decode_piece(&bytes, shift, shift + to - from, level, &tx));
        self.pieces.push_back(Piece {
            from,
            to,
            crc,
            end,
            rx,
            given: false,
        });
    }

    /// The next decoded bytes, in order, into `out`; false at the end of the input.
    fn next_chunk(&mut self) -> io::Result<bool> {
        loop {
            self.dispatch()?;
            let Some(p) = self.pieces.front_mut() else {
                match self.cursor {
                    Cursor::Done => return Ok(false),
                    _ => continue,
                }
            };
            match p.rx.recv() {
                Ok(Sent::Bytes(chunk)) => {
                    p.given = true;
                    self.out = chunk;
                    self.at = 0;
                    return Ok(true);
                }
                Ok(Sent::End) => {
                    let p = self.pieces.pop_front().expect("the front piece");
                    self.crc = combine(self.crc, p.crc);
                    if let Some((at, stored)) = p.end {
                        if stored != self.crc {
                            return Err(damaged("its bzip2 stream's CRC does not match its data"));
                        }
                        self.cursor = Cursor::Header((at + BLOCK_HEAD_BITS).next_multiple_of(8));
                    }
                    self.trim();
                }
                Ok(Sent::Bad) if !p.given => {
                    // Cut short at a magic number inside the block (or damaged): the pieces
                    // after it are dropped, and it is tried again up to the next magic.
                    #[cfg(test)]
                    {
                        self.retried += 1;
                    }
                    let (from, to) = (p.from, p.to);
                    self.pieces.clear();
                    self.cursor = Cursor::Blocks {
                        start: from,
                        looked: to + 1,
                    };
                }
                Ok(Sent::Bad) => return Err(damaged("its bzip2 data is damaged (a block's CRC)")),
                Err(_) => return Err(io::Error::other("a bzip2 worker stopped")),
            }
        }
    }
}

impl<R: Read> Read for Reader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.out.len() {
            if !self.next_chunk()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.out.len() - self.at);
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs, text-like repeats and noise, in pieces of several blocks.
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 4 {
                0 => out.extend(std::iter::repeat_n(
                    (x >> 8) as u8,
                    (x >> 16) as usize % 600,
                )),
                1 => out.extend_from_slice(b"__cudaRegisterFatBinary sm_90 sm_100 "),
                _ => out.extend((0..(x >> 20) as usize % 300).map(|i| (x >> (i % 56)) as u8)),
            }
        }
        out.truncate(len);
        out
    }

    fn ours(data: &[u8], level: u32) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), level);
        for part in data.chunks(70_001) {
            w.write_all(part).unwrap();
        }
        w.finish().unwrap()
    }

    fn reference(data: &[u8]) -> Vec<u8> {
        let mut w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(9));
        w.write_all(data).unwrap();
        w.finish().unwrap()
    }

    fn read_ours(stream: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Reader::new(stream).read_to_end(&mut out)?;
        Ok(out)
    }

    fn read_reference(stream: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut r = bzip2::read::BzDecoder::new(stream);
        r.read_to_end(&mut out).unwrap();
        // One stream: nothing is left after it.
        assert_eq!(r.total_in(), stream.len() as u64);
        out
    }

    #[test]
    fn one_stream_written_on_every_core_reads_back_with_libbzip2_and_with_ours() {
        for (len, level) in [(0, 9), (1, 9), (5, 1), (3 << 20, 9), (2_500_000, 1)] {
            let data = sample(len, len as u64 + 7);
            let packed = ours(&data, level);
            assert!(read_reference(&packed) == data, "{len} {level}");
            assert!(read_ours(&packed).unwrap() == data, "{len} {level}");
            assert_eq!(&packed[..4], format!("BZh{level}").as_bytes());
        }
        // Long runs: a block holds far more than 900 kB of them.
        let runs = vec![0u8; 60 << 20];
        let packed = ours(&runs, 9);
        assert!(read_reference(&packed) == runs);
        assert!(read_ours(&packed).unwrap() == runs);
        // A piece is cut just before a block is full, so it compresses about as well as
        // libbzip2 alone.
        let data = sample(4 << 20, 3);
        let (a, b) = (ours(&data, 9).len() as f64, reference(&data).len() as f64);
        assert!(a / b < 1.01, "{a} against {b}");
    }

    #[test]
    fn pieces_are_cut_where_libbzip2_fills_a_block() {
        // Runs of exactly four (five bytes each after the first stage) and single bytes:
        // a piece may not spill into a second block.
        let mut data = Vec::new();
        for i in 0..700_000u32 {
            data.extend(std::iter::repeat_n(i as u8, 1 + (i % 4) as usize));
        }
        let packed = ours(&data, 1);
        assert!(read_reference(&packed) == data);
        assert!(read_ours(&packed).unwrap() == data);
    }

    #[test]
    fn the_reader_reads_libbzip2_streams_and_their_concatenation() {
        let a = sample(2 << 20, 11);
        let b = sample(1 << 20, 12);
        assert!(read_ours(&reference(&a)).unwrap() == a);
        let mut two = reference(&a);
        two.extend(reference(&b));
        two.extend(reference(&[]));
        let mut both = a.clone();
        both.extend(&b);
        assert!(read_ours(&two).unwrap() == both);
    }

    #[test]
    fn damage_and_trailing_bytes_are_refused() {
        let data = sample(2 << 20, 5);
        let good = ours(&data, 9);
        let mut trailing = good.clone();
        trailing.extend_from_slice(b"PK\x03\x04 appended");
        let mut flipped = good.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x10;
        let mut end_crc = good.clone();
        let last = end_crc.len() - 2;
        end_crc[last] ^= 1;
        for (what, bad) in [
            ("trailing", trailing),
            ("flipped", flipped),
            ("cut", good[..good.len() - 100].to_vec()),
            ("cut in header", good[..3].to_vec()),
            ("end crc", end_crc),
            ("empty", Vec::new()),
            ("not bzip2", b"BZh9 not really".to_vec()),
        ] {
            let e = read_ours(&bad).expect_err(what);
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{what}: {e}");
        }
    }

    #[test]
    fn a_magic_number_inside_a_block_is_read_past() {
        let data = sample(3 << 20, 9);
        let packed = ours(&data, 9);
        let total = packed.len() as u64 * 8;
        for decoys in [
            vec![(1000, false)],
            vec![
                (1000, false),
                (2000, true),
                (total / 2, false),
                (total - 200, true),
            ],
            vec![(total - 90, false)],
        ] {
            let mut r = Reader::new(packed.as_slice());
            r.decoys = decoys.clone();
            let mut out = Vec::new();
            r.read_to_end(&mut out).unwrap();
            assert!(out == data, "{decoys:?}");
            assert!(
                r.retried as usize >= decoys.len(),
                "{decoys:?}: {}",
                r.retried
            );
        }
    }

    #[test]
    fn the_bytes_do_not_depend_on_how_they_are_written() {
        let data = sample(3 << 20, 21);
        let mut w = Writer::new(Vec::new(), 9);
        w.write_all(&data).unwrap();
        let whole = w.finish().unwrap();
        let mut w = Writer::new(Vec::new(), 9);
        for b in data.chunks(1).take(1000) {
            w.write_all(b).unwrap();
        }
        w.write_all(&data[1000..]).unwrap();
        assert!(w.finish().unwrap() == whole);
        assert!(ours(&data, 9) == whole);
    }
}
