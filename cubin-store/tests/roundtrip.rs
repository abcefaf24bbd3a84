mod common;

use std::io::{Cursor, Seek, SeekFrom, Write};

use common::*;
use cubin_store::*;

#[test]
fn round_trip_all_entries() {
    let spec = sample_spec();
    for level in [1, 3, 19] {
        let (bytes, summary) = build_with(
            &spec,
            WriteOptions {
                level,
                dictionary: None,
                ..Default::default()
            },
        );
        let store = Store::parse(&bytes).unwrap();
        check_matches(&store, &spec);
        assert_eq!(store.digest(), summary.digest);
        assert_eq!(summary.file_len, bytes.len() as u64);
        assert_eq!(store.version(), (FORMAT_MAJOR, 0));
        assert!(store.dictionary().is_none());
    }
}

#[test]
fn summary_matches_stats() {
    let spec = sample_spec();
    let (bytes, s) = build_with(&spec, WriteOptions::default());
    let store = Store::parse(&bytes).unwrap();
    let st = store.stats();
    assert_eq!(
        (s.modules, s.entries, s.blobs),
        (st.modules, st.entries, st.blobs)
    );
    assert_eq!((s.modules, s.entries, s.blobs), (3, 6, 5));
    assert_eq!(s.raw_bytes, st.raw_bytes);
    assert_eq!(s.unique_raw_bytes, st.unique_raw_bytes);
    assert_eq!(s.stored_bytes, st.stored_bytes);
    assert_eq!(s.file_len, st.file_len);
    assert_eq!(st.shared_blobs, 1);
    let raw: u64 = spec
        .iter()
        .flat_map(|m| &m.1)
        .map(|e| e.1.len() as u64)
        .sum();
    assert_eq!(s.raw_bytes, raw);
    assert_eq!(s.unique_raw_bytes, raw - 3000);
    assert!(s.stored_bytes < s.unique_raw_bytes);
}

#[test]
fn with_dictionary() {
    let spec = sample_spec();
    let samples: Vec<Vec<u8>> = (0..64)
        .map(|i| fake_cubin(100 + i, 2000 + 37 * i as usize))
        .collect();
    let refs: Vec<&[u8]> = samples.iter().map(|s| s.as_slice()).collect();
    let dict = train_dictionary(&refs, 4096).unwrap();
    assert!(!dict.is_empty() && dict.len() <= 4096);
    // Training is deterministic, so stores using it are reproducible.
    assert_eq!(dict, train_dictionary(&refs, 4096).unwrap());
    let (bytes, _) = build_with(
        &spec,
        WriteOptions {
            level: 19,
            dictionary: Some(dict.clone()),
            ..Default::default()
        },
    );
    let store = Store::parse(&bytes).unwrap();
    assert_eq!(store.dictionary(), Some(dict.as_slice()));
    check_matches(&store, &spec);
    assert!(store.blobs().any(|b| b.codec == Codec::ZstdDict));
    assert!(store.blobs().all(|b| b.codec != Codec::Zstd));
}

#[test]
fn train_dictionary_errors_on_too_few_samples() {
    let err = train_dictionary(&[b"abc"], 1024).unwrap_err();
    assert!(matches!(err, StoreError::DictionaryTraining(_)), "{err}");
}

#[test]
fn dedup_stores_once() {
    let raw = fake_cubin(42, 10_000);
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let a = w.add_module("a").unwrap();
    let b = w.add_module("b").unwrap();
    let r1 = w
        .add_entry(
            a,
            EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain),
            &raw,
        )
        .unwrap();
    let r2 = w
        .add_entry(
            b,
            EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain),
            &raw,
        )
        .unwrap();
    let r3 = w
        .add_entry(
            a,
            EntryMeta::new(EntryKind::Sass, 80, ArchVariant::Plain),
            &raw,
        )
        .unwrap();
    assert!(!r1.deduplicated && r2.deduplicated && r3.deduplicated);
    assert_eq!((r1.blob, r2.blob, r3.blob), (0, 0, 0));
    assert_eq!((r1.index, r2.index, r3.index), (0, 0, 1));
    let (cur, s) = w.finish().unwrap();
    assert_eq!((s.blobs, s.entries), (1, 3));
    assert_eq!(s.raw_bytes, 3 * raw.len() as u64);
    assert_eq!(s.unique_raw_bytes, raw.len() as u64);
    let bytes = cur.into_inner();
    let store = Store::parse(&bytes).unwrap();
    for e in store.entries() {
        assert_eq!(e.blob_id(), 0);
        assert_eq!(e.ref_count(), 3);
        assert!(e.is_shared());
        assert_eq!(e.read().unwrap(), raw);
    }
    // Only one copy of the compressed bytes is in the file.
    assert!(bytes.len() < raw.len() + 1024);
}

#[test]
fn deterministic_output() {
    let spec = sample_spec();
    for dictionary in [
        None,
        Some(b"MOV R1 \0\0\0\x01\x02 .version .target sm_".repeat(20)),
    ] {
        let opts = WriteOptions {
            level: 9,
            dictionary,
            ..Default::default()
        };
        let (a, sa) = build_with(&spec, opts.clone());
        let (b, sb) = build_with(&spec, opts.clone());
        assert_eq!(a, b);
        assert_eq!(sa, sb);
        // A different insertion order is a different store.
        let mut rev = spec.clone();
        rev.reverse();
        let (c, sc) = build_with(&rev, opts);
        assert_ne!(a, c);
        assert_ne!(sa.digest, sc.digest);
    }
}

#[test]
fn incompressible_and_empty_blobs_are_stored_raw() {
    let noise = noise(4096);
    let spec: Spec = vec![(
        "m".into(),
        vec![
            (
                meta(EntryKind::Sass, 90, ArchVariant::Plain, b""),
                noise.clone(),
            ),
            (
                meta(EntryKind::Sass, 80, ArchVariant::Plain, b""),
                Vec::new(),
            ),
        ],
    )];
    let bytes = build(&spec);
    let store = Store::parse(&bytes).unwrap();
    let blobs: Vec<_> = store.blobs().collect();
    assert_eq!(blobs[0].codec, Codec::Raw);
    assert_eq!(blobs[0].stored_len, 4096);
    assert_eq!(blobs[1].codec, Codec::Raw);
    assert_eq!(blobs[1].stored_len, 0);
    for b in &blobs {
        assert_eq!(b.offset % ALIGN, 0);
    }
    check_matches(&store, &spec);
}

#[test]
fn huge_ratio_blob_round_trips() {
    // 16 MiB of zeros compresses ~30000:1; must stay readable under the reader's ratio limit.
    let zeros = vec![0u8; 16 << 20];
    let spec: Spec = vec![(
        "z".into(),
        vec![(meta(EntryKind::Sass, 90, ArchVariant::Plain, b""), zeros)],
    )];
    let (bytes, s) = build_with(
        &spec,
        WriteOptions {
            level: 19,
            dictionary: None,
            ..Default::default()
        },
    );
    let store = Store::parse(&bytes).unwrap();
    let b = store.blob(0).unwrap();
    assert_eq!(b.codec, Codec::Zstd);
    assert!(
        b.raw_len / b.stored_len > 1000,
        "ratio {}",
        b.raw_len / b.stored_len
    );
    assert!(s.stored_bytes < 4096);
    store.verify().unwrap();
}

#[test]
fn store_at_nonzero_stream_offset_and_trailing_bytes() {
    let spec = sample_spec();
    let mut cur = Cursor::new(Vec::new());
    cur.write_all(b"some ELF bytes before the section").unwrap();
    let start = cur.stream_position().unwrap() as usize;
    let w = {
        let mut w = StoreWriter::new(&mut cur, WriteOptions::default()).unwrap();
        for (name, entries) in &spec {
            let m = w.add_module(name).unwrap();
            for (meta, raw) in entries {
                w.add_entry(m, meta.clone(), raw).unwrap();
            }
        }
        w.finish().unwrap().1
    };
    // The writer leaves the stream at the end of the store.
    assert_eq!(cur.stream_position().unwrap(), (start as u64) + w.file_len);
    cur.seek(SeekFrom::End(0)).unwrap();
    cur.write_all(&[0u8; 13]).unwrap(); // section padding
    let bytes = cur.into_inner();
    let store = Store::parse(&bytes[start..]).unwrap();
    assert_eq!(store.as_bytes().len() as u64, w.file_len);
    assert_eq!(store.digest(), w.digest);
    check_matches(&store, &spec);
}

#[test]
fn writer_rejects_bad_input() {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let m = w.add_module("a").unwrap();
    assert!(matches!(w.add_module("a"), Err(StoreError::DuplicateModule(n)) if n == "a"));
    let big = EntryMeta {
        attrs: vec![0; MAX_ATTRS_LEN + 1],
        ..EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain)
    };
    assert!(matches!(
        w.add_entry(m, big, b"x"),
        Err(StoreError::TooLarge { .. })
    ));
    let ok = EntryMeta {
        attrs: vec![0; MAX_ATTRS_LEN],
        ..EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain)
    };
    w.add_entry(m, ok, b"x").unwrap();
    let name = "n".repeat(MAX_NAME_LEN + 1);
    assert!(matches!(
        w.add_module(&name),
        Err(StoreError::TooLarge { .. })
    ));

    let mut other = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    other.add_module("x").unwrap();
    let foreign = other.add_module("y").unwrap();
    assert!(matches!(
        w.add_entry(
            foreign,
            EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain),
            b"x"
        ),
        Err(StoreError::InvalidModuleId(1))
    ));
    let bytes = w.finish().unwrap().0.into_inner();
    let store = Store::parse(&bytes).unwrap();
    assert_eq!(
        store.module(0).unwrap().entry(0).unwrap().attrs().len(),
        MAX_ATTRS_LEN
    );

    assert!(matches!(
        StoreWriter::new(
            Cursor::new(Vec::new()),
            WriteOptions {
                level: 99,
                dictionary: None,
                ..Default::default()
            }
        ),
        Err(StoreError::InvalidLevel { level: 99, .. })
    ));
}

#[test]
fn empty_store() {
    let (bytes, s) = build_with(&Vec::new(), WriteOptions::default());
    assert_eq!((s.modules, s.entries, s.blobs), (0, 0, 0));
    let store = Store::parse(&bytes).unwrap();
    assert_eq!(store.modules().count(), 0);
    assert!(store.module_by_name("").is_none());
    store.verify().unwrap();
}

#[test]
fn lookups() {
    let spec = sample_spec();
    let bytes = build(&spec);
    let store = Store::parse(&bytes).unwrap();
    assert!(store.module_by_name("nope").is_none());
    assert!(store.module(3).is_none());
    let m = store.module_by_name("libfoo.so/kernels.o").unwrap();
    let e = m.find(EntryKind::Sass, 90, ArchVariant::Specific).unwrap();
    assert_eq!(e.arch_name(), "sm_90a");
    assert_eq!(e.index_in_module(), 1);
    assert!(m.find(EntryKind::Sass, 90, ArchVariant::Plain).is_none());
    assert!(m.entry(4).is_none());
    let p = m.find(EntryKind::Ptx, 90, ArchVariant::Plain).unwrap();
    assert_eq!(p.arch_name(), "compute_90");

    // An entry from another store is refused rather than misread.
    let other_bytes = build(&spec);
    let other = Store::parse(&other_bytes).unwrap();
    let foreign = other.module(0).unwrap().entry(0).unwrap();
    assert!(matches!(
        store.read_entry(&foreign),
        Err(StoreError::ForeignEntry)
    ));
}

#[test]
fn many_modules_lookup_by_name() {
    let spec: Spec = (0..300)
        .map(|i| {
            (
                format!("mod{:04}", (i * 7919) % 1000),
                vec![(
                    meta(EntryKind::Sass, 90, ArchVariant::Plain, b""),
                    fake_cubin(i, 64),
                )],
            )
        })
        .collect();
    let bytes = build(&spec);
    let store = Store::parse(&bytes).unwrap();
    for (i, (name, _)) in spec.iter().enumerate() {
        assert_eq!(store.module_by_name(name).unwrap().index(), i);
    }
}

fn build_batched(spec: &Spec, opts: WriteOptions, threads: usize, prefill: bool) -> Vec<u8> {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).unwrap();
    let ids: Vec<ModuleId> = spec.iter().map(|(n, _)| w.add_module(n).unwrap()).collect();
    let mut batch = Vec::new();
    for (m, (_, entries)) in ids.iter().zip(spec) {
        for (meta, raw) in entries {
            batch.push(NewEntry {
                module: *m,
                meta: meta.clone(),
                raw,
                frame: None,
            });
        }
    }
    if prefill {
        // Half sequentially first, so the batch also dedups against stored blobs.
        let rest = batch.split_off(batch.len() / 2);
        for e in batch {
            w.add_entry(e.module, e.meta, e.raw).unwrap();
        }
        batch = rest;
    }
    let n = batch.len();
    let refs = w.add_entries(batch, threads).unwrap();
    assert_eq!(refs.len(), n);
    w.finish().unwrap().0.into_inner()
}

fn build_sequential_module_order(spec: &Spec, opts: WriteOptions) -> Vec<u8> {
    // Same call order as build_batched: all modules first, then entries.
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).unwrap();
    let ids: Vec<ModuleId> = spec.iter().map(|(n, _)| w.add_module(n).unwrap()).collect();
    for (m, (_, entries)) in ids.iter().zip(spec) {
        for (meta, raw) in entries {
            w.add_entry(*m, meta.clone(), raw).unwrap();
        }
    }
    w.finish().unwrap().0.into_inner()
}

#[test]
fn add_entries_matches_sequential() {
    let mut spec = sample_spec();
    // More entries, including in-batch duplicates and incompressible data.
    spec[1].1 = (0..20)
        .map(|i| {
            (
                meta(EntryKind::Sass, 50 + i, ArchVariant::Plain, b""),
                fake_cubin(i % 6, 2000 + 100 * i as usize),
            )
        })
        .collect();
    spec[1].1.push((
        meta(EntryKind::Sass, 99, ArchVariant::Plain, b""),
        (0..999u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
            .collect(),
    ));
    for dictionary in [None, Some(b".target sm_ MOV R1 \0\0\x01".repeat(40))] {
        let opts = WriteOptions {
            level: 5,
            dictionary,
            ..Default::default()
        };
        let want = build_sequential_module_order(&spec, opts.clone());
        for threads in [0, 1, 2, 3, 8] {
            for prefill in [false, true] {
                assert_eq!(
                    build_batched(&spec, opts.clone(), threads, prefill),
                    want,
                    "threads {threads} prefill {prefill}"
                );
            }
        }
        check_matches(&Store::parse(&want).unwrap(), &spec);
    }
}

#[test]
fn add_entries_validates_before_writing() {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let m = w.add_module("m").unwrap();
    let good = NewEntry {
        module: m,
        meta: EntryMeta::new(EntryKind::Sass, 90, ArchVariant::Plain),
        raw: b"abc",
        frame: None,
    };
    let bad = NewEntry {
        module: ModuleId::clone(&m),
        meta: EntryMeta {
            attrs: vec![0; MAX_ATTRS_LEN + 1],
            ..good.meta.clone()
        },
        raw: b"def",
        frame: None,
    };
    assert!(matches!(
        w.add_entries(vec![good.clone(), bad], 2),
        Err(StoreError::TooLarge { .. })
    ));
    assert!(w.add_entries(Vec::new(), 4).unwrap().is_empty());
    let refs = w.add_entries(vec![good.clone(), good], 2).unwrap();
    assert!(!refs[0].deduplicated && refs[1].deduplicated);
    let (_, s) = w.finish().unwrap();
    assert_eq!((s.entries, s.blobs), (2, 1));
}

/// Levels 1-12 look 2^24 bytes back (a cubin repeats itself megabytes apart), where zstd's
/// own level 9 looks 2^22 (level 3 2^21): a block of noise repeated 6 MiB later is stored
/// once. The other levels write zstd's own frames.
#[test]
fn the_cubin_tuning_reaches_repeats_megabytes_apart() {
    let noise = noise(6 << 20);
    let zstd_own = |level: i32, data: &[u8]| {
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        c.include_checksum(false).unwrap();
        c.include_contentsize(true).unwrap();
        c.compress(data).unwrap()
    };
    let ours = |level: i32, data: &[u8]| {
        let frame = BlobCompressor::new(level).unwrap().compress(data).unwrap();
        let frame = frame.expect("compressible");
        assert!(zstd::bulk::decompress(&frame, data.len()).unwrap() == data);
        frame
    };
    let far = [noise.as_slice(), noise.as_slice()].concat();
    for level in [1, 3, 4, 5, 9, 12] {
        let frame = ours(level, &far);
        assert!(
            frame.len() < far.len() * 6 / 10,
            "level {level}: {}",
            frame.len()
        );
        assert!(
            zstd_own(level, &far).len() > far.len() * 9 / 10,
            "level {level}"
        );
    }
    // Repeats 256 KiB apart, within every level's window: the same frames as zstd's.
    let near = noise[..256 << 10].repeat(16);
    for level in [-1, 13, 19] {
        assert!(
            ours(level, &near) == zstd_own(level, &near),
            "level {level}"
        );
    }
}

/// `FrameUse::Smaller` stores the level's frame where it is smaller than the one an entry
/// brings and the entry's frame elsewhere (ties too); `FrameUse::Keep` stores every frame
/// as it is. Both read back to the same contents, on any thread count.
#[test]
fn frames_are_kept_or_kept_where_smaller() {
    // Compressible, but with enough variety that level 1 and level 19 differ.
    let text = |seed: u32| -> Vec<u8> {
        (0..200_000u32)
            .map(|i| {
                let w = (i / 7).wrapping_mul(seed) >> 13;
                b"MOV R1, R2; IADD3 R4; LDG.E R8; @P0 BRA; "[(w % 41) as usize]
            })
            .collect()
    };
    let (poor_raw, good_raw, same_raw) = (text(2654435761), text(40503), text(97));
    let frame = |level: i32, raw: &[u8]| zstd::bulk::compress(raw, level).unwrap();
    let (poor, good) = (frame(1, &poor_raw), frame(19, &good_raw));
    let same = BlobCompressor::new(9)
        .unwrap()
        .compress(&same_raw)
        .unwrap()
        .unwrap();
    let ours = |raw: &[u8]| {
        BlobCompressor::new(9)
            .unwrap()
            .compress(raw)
            .unwrap()
            .unwrap()
            .len()
    };
    assert!(ours(&poor_raw) < poor.len() && good.len() < ours(&good_raw));
    let entries: [(&[u8], &[u8]); 3] = [(&poor_raw, &poor), (&good_raw, &good), (&same_raw, &same)];
    for (frames, want) in [
        (FrameUse::Keep, [poor.len(), good.len(), same.len()]),
        (FrameUse::Smaller, [ours(&poor_raw), good.len(), same.len()]),
    ] {
        for threads in [1, 3] {
            let opts = WriteOptions {
                level: 9,
                dictionary: None,
                frames,
            };
            let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).unwrap();
            let m = w.add_module("m").unwrap();
            let batch = entries
                .iter()
                .enumerate()
                .map(|(i, &(raw, frame))| NewEntry {
                    module: m,
                    meta: EntryMeta::new(EntryKind::Sass, 80 + i as u32, ArchVariant::Plain),
                    raw,
                    frame: Some(frame),
                })
                .collect();
            w.add_entries(batch, threads).unwrap();
            let bytes = w.finish().unwrap().0.into_inner();
            let store = Store::parse(&bytes).unwrap();
            let got: Vec<usize> = store.blobs().map(|b| b.stored_len as usize).collect();
            assert_eq!(got, want, "{frames:?}, {threads} threads");
            let module = store.module_by_name("m").unwrap();
            for (e, (raw, _)) in module.entries().zip(entries) {
                assert!(store.read_entry(&e).unwrap() == raw);
            }
        }
    }
}
