//! Stores written to files and read back mapped.
mod common;

use std::fs;
use std::io::{self, Seek, SeekFrom, Write};

use common::*;
use cubin_store::*;

fn write_spec<W: Write + Seek>(w: &mut StoreWriter<W>, spec: &Spec) {
    for (name, entries) in spec {
        let m = w.add_module(name).unwrap();
        for (meta, raw) in entries {
            w.add_entry(m, meta.clone(), raw).unwrap();
        }
    }
}

#[test]
fn a_store_written_to_a_file_maps_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.fatpack");
    let spec = sample_spec();
    let mut w =
        StoreWriter::new(fs::File::create(&path).unwrap(), WriteOptions::default()).unwrap();
    write_spec(&mut w, &spec);
    let (_file, summary) = w.finish().unwrap();

    let mapped = MappedStore::open(&path).unwrap();
    assert_eq!(mapped.len(), summary.file_len);
    let store = mapped.store();
    assert_eq!(store.digest(), summary.digest);
    check_matches(&store, &spec);

    // Same bytes as an in-memory write.
    assert_eq!(
        fs::read(&path).unwrap(),
        build_with(&spec, WriteOptions::default()).0
    );
}

/// A writer that fails after `budget` bytes, to exercise the poisoned path.
struct Failing {
    inner: io::Cursor<Vec<u8>>,
    budget: usize,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() > self.budget {
            return Err(io::Error::other("disk full"));
        }
        self.budget -= buf.len();
        self.inner.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for Failing {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

#[test]
fn io_error_poisons_writer() {
    let mut w = StoreWriter::new(
        Failing {
            inner: io::Cursor::new(Vec::new()),
            budget: 300,
        },
        WriteOptions::default(),
    )
    .unwrap();
    let m = w.add_module("m").unwrap();
    let meta = EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain);
    let err = w
        .add_entry(m, meta.clone(), &fake_cubin(1, 100_000))
        .unwrap_err();
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
    assert!(matches!(
        w.add_entry(m, meta, b"x"),
        Err(StoreError::Poisoned)
    ));
    assert!(matches!(w.finish(), Err(StoreError::Poisoned)));
}

#[test]
fn mapped_range_inside_a_larger_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.elf");
    let spec = sample_spec();
    let mut f = fs::File::create(&path).unwrap();
    f.write_all(&vec![0xEE; 4097]).unwrap(); // unaligned, past a page boundary
    let start = f.stream_position().unwrap();
    let mut w = StoreWriter::new(&mut f, WriteOptions::default()).unwrap();
    write_spec(&mut w, &spec);
    let (_, summary) = w.finish().unwrap();
    f.write_all(&[0u8; 100]).unwrap();
    drop(f);

    let m = MappedStore::open_range(&path, start, summary.file_len).unwrap();
    assert_eq!(m.offset(), start);
    check_matches(&m.store(), &spec);
    // store() is cheap and repeatable; views from two calls share the parse.
    let (s1, s2) = (m.store(), m.store());
    let e = s1.module(0).unwrap().entry(0).unwrap();
    s2.read_entry(&e).unwrap();
    // A range with trailing padding is fine too.
    let m2 = MappedStore::open_range(&path, start, summary.file_len + 100).unwrap();
    assert_eq!(m2.len(), summary.file_len);
    assert_eq!(m2.store().digest(), summary.digest);

    // Whole file is not a store; ranges beyond EOF are refused before mapping.
    assert!(matches!(
        MappedStore::open(&path),
        Err(StoreError::BadMagic { .. })
    ));
    assert!(matches!(
        MappedStore::open_range(&path, start, summary.file_len + 101),
        Err(StoreError::Truncated {
            what: "file range",
            ..
        })
    ));
    assert!(matches!(
        MappedStore::open_range(&path, u64::MAX, 10),
        Err(StoreError::Truncated { .. })
    ));
    assert!(matches!(
        MappedStore::open_range(&path, start, 100),
        Err(StoreError::Truncated { what: "header", .. })
    ));
    assert!(matches!(
        MappedStore::open_range(&path, start, 0),
        Err(StoreError::Truncated { .. })
    ));
}

#[test]
fn mapped_small_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    fs::write(&empty, b"").unwrap();
    assert!(matches!(
        MappedStore::open(&empty),
        Err(StoreError::Truncated { have: 0, .. })
    ));
    let small = dir.path().join("small");
    fs::write(&small, b"hello, world").unwrap();
    assert!(matches!(
        MappedStore::open(&small),
        Err(StoreError::BadMagic { .. })
    ));
    assert!(matches!(
        MappedStore::open(dir.path().join("missing")),
        Err(StoreError::Io(_))
    ));
}

#[test]
fn mapped_store_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MappedStore>();
    assert_send_sync::<Store<'static>>();
}

#[test]
fn concurrent_reads() {
    let spec = sample_spec();
    let (bytes, _) = build_with(
        &spec,
        WriteOptions {
            level: 3,
            dictionary: Some(b".target sm_ MOV R1".repeat(50)),
            ..Default::default()
        },
    );
    let store = Store::parse(&bytes).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..20 {
                    store.verify().unwrap();
                }
            });
        }
    });
}
