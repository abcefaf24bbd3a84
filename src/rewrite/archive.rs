//! Writing a GNU `ar` archive with a symbol index, deterministically (zero dates and ids), for
//! the rewritten copy of an input archive. No crate writes the GNU index with 64-bit
//! offsets, and the format is small.

use std::borrow::Cow;
use std::io::{self, Write};

use object::{Object, ObjectSymbol};

use crate::elf::sections::{Part, Parts};

/// One member to write: its bytes borrowed from the input where they do not change.
pub struct Member<'a> {
    /// The name as the input archive has it: bytes, which need not be UTF-8.
    pub name: Vec<u8>,
    /// Its bytes, which the symbol index is read from. For a member written as `pieces`:
    /// the input member it was made from, which defines the same symbols.
    pub data: Cow<'a, [u8]>,
    /// What is written instead of `data`, when given: a rewritten object whose kept
    /// ranges are copied from a file (a rewritten member keeps most of its input as it is).
    pub pieces: Option<FromFile<'a>>,
}

impl Member<'_> {
    /// How many bytes are written for it.
    fn len(&self) -> usize {
        self.pieces
            .as_ref()
            .map_or(self.data.len(), |p| p.parts.len)
    }
}

/// Bytes written as `parts`, whose input ranges are those of the object at `base` in
/// `file`.
pub struct FromFile<'a> {
    pub parts: Parts,
    pub file: &'a std::fs::File,
    pub base: u64,
}

impl FromFile<'_> {
    /// Writes the parts in order.
    pub fn write(&self, sink: &mut impl Sink) -> io::Result<()> {
        for p in &self.parts.parts {
            match p {
                Part::Input(r) => sink.copy_from(self.file, self.base + r.start as u64, r.len())?,
                Part::Bytes(b) => sink.write_all(b)?,
                Part::Zeros(n) => sink.write_all(&vec![0u8; *n])?,
            }
        }
        Ok(())
    }
}

/// Where an archive is written: any writer, which can also append a range of a file.
pub trait Sink: Write {
    /// Appends `len` bytes of `file` from `offset`: read into a buffer of this thread's and
    /// written, a MiB at a time. Not through a mapping of the input (after its pages were let
    /// go, each write faulted them back one by one: most of a large link's time), and not
    /// with `copy_file_range`, which was faster on the dev machine's ext4 but made both the
    /// rewrite and the real link that read its output about a second slower on the H200
    /// machine (BENCHMARKS.md).
    fn copy_from(&mut self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            let want = len.min(1 << 20);
            if buf.len() < want {
                buf.resize(want, 0);
            }
            let (mut at, mut left) = (offset, len);
            while left > 0 {
                let n = left.min(buf.len());
                file.read_exact_at(&mut buf[..n], at)?;
                self.write_all(&buf[..n])?;
                at += n as u64;
                left -= n;
            }
            Ok(())
        })
    }
}

impl Sink for Vec<u8> {}

impl Sink for io::BufWriter<std::fs::File> {}

/// [`defined_globals`] of every member, in order, on every CPU (static cuBLAS has thousands
/// of members, and the index must be written before any of them); `done(i)` after each.
fn index_symbols(members: &[Member], done: &(impl Fn(usize) + Sync)) -> Vec<Vec<Vec<u8>>> {
    let indexed: Vec<(usize, &Member)> = members.iter().enumerate().collect();
    crate::parallel::map_ordered(&indexed, |&(i, m)| {
        let names = defined_globals(&m.data);
        done(i);
        names
    })
}

/// Global symbols an archive member defines: what the linker's archive index lists.
fn defined_globals(data: &[u8]) -> Vec<Vec<u8>> {
    let Ok(file) = object::File::parse(data) else {
        return Vec::new();
    };
    file.symbols()
        .filter(|s| s.is_global() && s.is_definition() && !s.is_undefined())
        .filter_map(|s| s.name_bytes().ok().map(<[u8]>::to_vec))
        .filter(|n| !n.is_empty())
        .collect()
}

/// A member header: 60 bytes, or an error if the name or size does not fit its field.
fn header(out: &mut Vec<u8>, name: &[u8], size: usize) -> io::Result<()> {
    // Index members carry mode 0 in GNU ar output.
    let mode = if matches!(name, b"/" | b"//" | b"/SYM64/") {
        0
    } else {
        644
    };
    let rest = format!("{:<12}{:<6}{:<6}{mode:<8}{size:<10}`\n", 0, 0, 0);
    if name.len() > 16 || rest.len() != 44 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "archive member {} ({size} bytes) does not fit an ar header",
                String::from_utf8_lossy(name)
            ),
        ));
    }
    out.extend_from_slice(name);
    out.resize(out.len() + 16 - name.len(), b' ');
    out.extend_from_slice(rest.as_bytes());
    Ok(())
}

/// Encode an archive of `members`, with a GNU symbol index (64-bit when offsets need it).
pub fn write_archive(members: &[Member]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_archive_to(members, &mut out, |_| {})?;
    Ok(out)
}

/// What goes before the members (magic, symbol index, long names) and where each member's
/// header starts: the whole archive's layout, decided before any member is written.
struct Layout {
    prefix: Vec<u8>,
    header_names: Vec<Vec<u8>>,
    offsets: Vec<u64>,
    total: u64,
}

impl Layout {
    /// Reads every member's symbols for the index (calling `done(i)` for each, from several
    /// threads) and lays the archive out.
    fn new(members: &[Member], done: &(impl Fn(usize) + Sync)) -> io::Result<Layout> {
        // Long names table: names over 15 bytes (or with '/') are referenced as "/offset".
        let mut longnames = Vec::new();
        let mut header_names = Vec::with_capacity(members.len());
        for m in members {
            let base = m.name.rsplit(|&b| b == b'/').next().unwrap_or(&m.name);
            // A newline ends a long name and NUL cannot be in a file name: neither reads back.
            if base.contains(&b'\n') || base.contains(&0) || base.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "archive member name {:?} cannot be written in an ar archive",
                        String::from_utf8_lossy(&m.name)
                    ),
                ));
            }
            if base.len() <= 15 {
                header_names.push([base, b"/"].concat());
            } else {
                header_names.push(format!("/{}", longnames.len()).into_bytes());
                longnames.extend_from_slice(base);
                longnames.extend_from_slice(b"/\n");
            }
        }
        // GNU ar pads the long-name table to an even size inside the member (readelf, unlike
        // ld, finds no member header after an odd-sized one).
        if longnames.len() & 1 == 1 {
            longnames.push(b'\n');
        }
        let symbols = index_symbols(members, done);
        let nsyms: usize = symbols.iter().map(Vec::len).sum();
        let names_len: usize = symbols.iter().flatten().map(|n| n.len() + 1).sum();
        let layout = |word: usize| {
            // Padded inside the member as well, as GNU ar's index is.
            let index_size = padded(word + nsyms * word + names_len);
            let mut off = 8 + 60 + padded(index_size);
            if !longnames.is_empty() {
                off += 60 + padded(longnames.len());
            }
            let mut offsets = Vec::with_capacity(members.len());
            for m in members {
                offsets.push(off as u64);
                off += 60 + padded(m.len());
            }
            (index_size, offsets, off as u64)
        };
        let (mut index_size, mut offsets, total) = layout(4);
        let wide = total > u32::MAX as u64;
        if wide {
            (index_size, offsets, _) = layout(8);
        }
        let mut out: Vec<u8> = Vec::with_capacity(index_size + longnames.len() + 256);
        out.extend_from_slice(b"!<arch>\n");
        header(&mut out, if wide { b"/SYM64/" } else { b"/" }, index_size)?;
        let put = |out: &mut Vec<u8>, v: u64| {
            if wide {
                out.extend_from_slice(&v.to_be_bytes());
            } else {
                out.extend_from_slice(&(v as u32).to_be_bytes());
            }
        };
        put(&mut out, nsyms as u64);
        for (syms, &off) in symbols.iter().zip(&offsets) {
            for _ in syms {
                put(&mut out, off);
            }
        }
        for n in symbols.iter().flatten() {
            out.extend_from_slice(n);
            out.push(0);
        }
        out.resize(8 + 60 + index_size, 0);
        if !longnames.is_empty() {
            header(&mut out, b"//", longnames.len())?;
            out.extend_from_slice(&longnames);
        }
        Ok(Layout {
            prefix: out,
            header_names,
            offsets,
            total,
        })
    }

    /// Member `i`: its header, its bytes and the padding to an even offset.
    fn write_member(&self, members: &[Member], i: usize, sink: &mut impl Sink) -> io::Result<()> {
        let m = &members[i];
        let len = m.len();
        let mut h = Vec::with_capacity(60);
        header(&mut h, &self.header_names[i], len)?;
        sink.write_all(&h)?;
        match &m.pieces {
            None => sink.write_all(&m.data)?,
            Some(p) => p.write(sink)?,
        }
        if len & 1 == 1 {
            sink.write_all(b"\n")?;
        }
        Ok(())
    }
}

/// Members are padded to an even size.
fn padded(n: usize) -> usize {
    n + (n & 1)
}

/// [`write_archive`], streamed to `out`: the index first, then each member as it is, so a
/// large archive is never held in memory a second time. `done(i)` is called when member `i`'s
/// bytes have been read for the index (from several threads, in any order) and again when
/// they have been written (in order), so a caller whose members borrow a mapped input can let
/// those pages go (static cuBLAS: 831 MB that would otherwise all be resident by the end).
pub fn write_archive_to(
    members: &[Member],
    sink: &mut impl Sink,
    done: impl Fn(usize) + Sync,
) -> io::Result<()> {
    let layout = Layout::new(members, &done)?;
    sink.write_all(&layout.prefix)?;
    let mut written = layout.prefix.len() as u64;
    for (i, &off) in layout.offsets.iter().enumerate() {
        debug_assert_eq!(written, off);
        layout.write_member(members, i, sink)?;
        written += 60 + padded(members[i].len()) as u64;
        done(i);
    }
    debug_assert_eq!(written, layout.total);
    Ok(())
}

/// Bytes of members one thread writes in one go when an archive is written in parallel: a
/// few runs per thread even out members of very different sizes.
const RUN_BYTES: u64 = 32 << 20;

/// [`write_archive_to`] into `file` (from its start), the members written on several threads,
/// each run of members at the offset the layout gives it: the same bytes, whatever the thread
/// count. A rewritten static archive is most of a packed link's own time when written by one
/// thread (static cuBLAS: 950 MB; BENCHMARKS.md, "Where a packed link's time goes"). `done(i)`
/// as for [`write_archive_to`], except that members are reported written in any order.
pub fn write_archive_file(
    members: &[Member],
    file: &std::fs::File,
    done: impl Fn(usize) + Sync,
) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let layout = Layout::new(members, &done)?;
    file.set_len(layout.total)?;
    file.write_all_at(&layout.prefix, 0)?;
    // Runs of whole members, in order, of about RUN_BYTES each.
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    for i in 0..members.len() {
        let end = layout.offsets.get(i + 1).copied().unwrap_or(layout.total);
        if end - layout.offsets[start] >= RUN_BYTES || i + 1 == members.len() {
            runs.push(start..i + 1);
            start = i + 1;
        }
    }
    let results = crate::parallel::map_ordered(&runs, |run| -> io::Result<()> {
        let mut at = At::new(file, layout.offsets[run.start]);
        for i in run.clone() {
            layout.write_member(members, i, &mut at)?;
            // Its input is copied (into the buffer or the file): its pages may go.
            done(i);
        }
        at.flush()
    });
    results.into_iter().collect()
}

/// A writer at a position of a file (`pwrite`), buffered: one run of members.
struct At<'f> {
    file: &'f std::fs::File,
    pos: u64,
    buf: Vec<u8>,
}

impl<'f> At<'f> {
    const BUF: usize = 1 << 20;

    fn new(file: &'f std::fs::File, pos: u64) -> Self {
        At {
            file,
            pos,
            buf: Vec::with_capacity(Self::BUF),
        }
    }
}

impl Write for At<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.buf.len() + b.len() > Self::BUF {
            self.flush()?;
        }
        if b.len() >= Self::BUF {
            use std::os::unix::fs::FileExt;
            self.file.write_all_at(b, self.pos)?;
            self.pos += b.len() as u64;
        } else {
            self.buf.extend_from_slice(b);
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(&self.buf, self.pos)?;
        self.pos += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

impl Sink for At<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member written as pieces (ranges of a file, made bytes, padding) gives the same
    /// archive as the member's bytes, into memory and into a file.
    #[test]
    fn pieces_write_the_same_bytes_as_the_member() {
        use std::io::Write as _;
        let mut src = tempfile::tempfile().unwrap();
        let input: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        src.write_all(&input).unwrap();
        let want: Vec<u8> = [
            &input[5..1005],
            b"new",
            &[0, 0, 0][..],
            &input[200_000..299_999],
        ]
        .concat();
        let pieces = || FromFile {
            parts: Parts {
                parts: vec![
                    Part::Input(5..1005),
                    Part::Bytes(b"new".to_vec()),
                    Part::Zeros(3),
                    Part::Input(200_000..299_999),
                ],
                len: want.len(),
            },
            file: &src,
            base: 0,
        };
        let as_bytes = write_archive(&[Member {
            name: b"m.o".to_vec(),
            data: Cow::Borrowed(&want[..]),
            pieces: None,
        }])
        .unwrap();
        let in_memory = write_archive(&[Member {
            name: b"m.o".to_vec(),
            data: Cow::Borrowed(&want[..]),
            pieces: Some(pieces()),
        }])
        .unwrap();
        assert_eq!(in_memory, as_bytes);
        let out = tempfile::NamedTempFile::new().unwrap();
        let mut w = io::BufWriter::new(out.reopen().unwrap());
        let members = [Member {
            name: b"m.o".to_vec(),
            data: Cow::Borrowed(&want[..]),
            pieces: Some(pieces()),
        }];
        write_archive_to(&members, &mut w, |_| {}).unwrap();
        w.flush().unwrap();
        assert_eq!(std::fs::read(out.path()).unwrap(), as_bytes);
    }

    /// Written on several threads at their offsets, members of every size (several runs,
    /// odd lengths, pieces from a file) give the bytes of the one-thread writer.
    #[test]
    fn members_written_in_parallel_give_the_same_archive() {
        use std::io::Write as _;
        let mut src = tempfile::tempfile().unwrap();
        let input: Vec<u8> = (0..3_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
        src.write_all(&input).unwrap();
        let sizes = [1usize, 40 << 20, 7, 2_999_999, 0, 33 << 20, 5];
        let datas: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|k| (k * 31 + i) as u8).collect())
            .collect();
        let members = || -> Vec<Member> {
            let mut v: Vec<Member> = datas
                .iter()
                .enumerate()
                .map(|(i, d)| Member {
                    name: format!("member_with_a_long_name_{i}.o").into_bytes(),
                    data: Cow::Borrowed(&d[..]),
                    pieces: None,
                })
                .collect();
            v.push(Member {
                name: b"p.o".to_vec(),
                data: Cow::Borrowed(&input[..]),
                pieces: Some(FromFile {
                    parts: Parts {
                        parts: vec![Part::Input(0..input.len())],
                        len: input.len(),
                    },
                    file: &src,
                    base: 0,
                }),
            });
            v
        };
        let want = write_archive(&members()).unwrap();
        let out = tempfile::NamedTempFile::new().unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        write_archive_file(&members(), out.as_file(), |i| seen.lock().unwrap().push(i)).unwrap();
        assert!(std::fs::read(out.path()).unwrap() == want, "bytes differ");
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        let n = sizes.len() + 1;
        let twice: Vec<usize> = (0..n).flat_map(|i| [i, i]).collect();
        assert_eq!(seen, twice);
    }

    /// The caller lets a member's input pages go on each call, so every member must be
    /// reported once after the index pass (in any order: it runs on several threads) and
    /// once after it is written (in order), and the bytes must not depend on the hook.
    #[test]
    fn done_follows_each_member_through_both_passes() {
        let members: Vec<Member> = ["a.o", "a_rather_long_member_name.o", "odd.o"]
            .iter()
            .enumerate()
            .map(|(i, n)| Member {
                name: n.as_bytes().to_vec(),
                data: Cow::Owned(vec![b'x'; 10 + i]),
                pieces: None,
            })
            .collect();
        let calls = std::sync::Mutex::new(Vec::new());
        let mut streamed = Vec::new();
        write_archive_to(&members, &mut streamed, |i| calls.lock().unwrap().push(i)).unwrap();
        // The index pass reads members on several threads (in any order); the write pass
        // reports them in order.
        let calls = calls.into_inner().unwrap();
        let (read, written) = calls.split_at(3);
        let mut read = read.to_vec();
        read.sort();
        assert_eq!((read.as_slice(), written), (&[0, 1, 2][..], &[0, 1, 2][..]));
        assert_eq!(streamed, write_archive(&members).unwrap());
        assert!(streamed.starts_with(b"!<arch>\n"));
    }

    /// Member names are bytes: a Latin-1 name keeps its bytes; a name no archive can hold
    /// (NUL, newline: found by the `archive_names` fuzz target) is an error, never an
    /// archive that reads back with other names.
    #[test]
    fn names_are_bytes_and_unwritable_names_are_errors() {
        let member = |name: &[u8]| Member {
            name: name.to_vec(),
            data: Cow::Owned(vec![b'x'; 3]),
            pieces: None,
        };
        let ok = write_archive(&[member(b"k\xb3.o"), member(b"a_long_name_\xff\xfe.o")]).unwrap();
        let ar = object::read::archive::ArchiveFile::parse(&*ok).unwrap();
        let names: Vec<Vec<u8>> = ar.members().map(|m| m.unwrap().name().to_vec()).collect();
        assert_eq!(
            names,
            [b"k\xb3.o".to_vec(), b"a_long_name_\xff\xfe.o".to_vec()]
        );
        for bad in [
            &b"a\0b.o"[..],
            b"two\nlines.o",
            b"dir/",
            b"\0\0\x07\0\0\0\x36\0\0\0\x60\0\0\0\0\x70",
        ] {
            assert!(write_archive(&[member(bad)]).is_err(), "{bad:?}");
        }
    }

    /// The index of a large archive is read on several threads, in member order.
    #[test]
    fn index_symbols_on_threads_match_one_at_a_time() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvcc13");
        let objs: Vec<Vec<u8>> = ["main.o", "kernels.o", "other.o"]
            .iter()
            .map(|n| std::fs::read(dir.join(n)).unwrap())
            .collect();
        let members: Vec<Member> = (0..500)
            .map(|i| Member {
                name: format!("m{i}.o").into_bytes(),
                data: Cow::Borrowed(&objs[i % 3][..]),
                pieces: None,
            })
            .collect();
        let one_by_one: Vec<_> = members.iter().map(|m| defined_globals(&m.data)).collect();
        assert!(one_by_one.iter().all(|s| !s.is_empty()));
        let seen = std::sync::Mutex::new(Vec::new());
        assert_eq!(
            index_symbols(&members, &|i| seen.lock().unwrap().push(i)),
            one_by_one
        );
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..members.len()).collect::<Vec<_>>());
    }
}
