//! Solid groups (format 1.1): several blobs in one frame.
mod common;

use std::io::Cursor;

use common::*;
use cubin_store::*;

const H_MINOR: usize = 0x0A;
const H_INDEX_OFFSET: usize = 0x18;
const BLOB_TABLE: usize = 24;

/// Entries that share most of their bytes (variants of one kernel), as one library's cubins
/// for one GPU do: per-blob frames cannot see it, a solid group can.
fn variants(n: u32, len: usize) -> Vec<Vec<u8>> {
    let base = fake_cubin(7, len);
    (0..n)
        .map(|i| {
            let mut v = base.clone();
            let tweak = fake_cubin(100 + i, len / 16);
            let at = (i as usize * 977) % (len - tweak.len());
            v[at..at + tweak.len()].copy_from_slice(&tweak);
            v
        })
        .collect()
}

/// Modules m0..m{n}, each with a sm_80 and a sm_90 entry; the sm_80 entries in one group,
/// the sm_90 ones in another (module order), or each entry on its own.
fn write(raws: &[Vec<u8>], solid: bool, threads: usize) -> (Vec<u8>, StoreSummary) {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let half = raws.len() / 2;
    let ids: Vec<ModuleId> = (0..half)
        .map(|i| w.add_module(&format!("m{i}")).unwrap())
        .collect();
    let m80 = |_| meta(EntryKind::Sass, 80, ArchVariant::Plain, b"a80");
    let m90 = |_| meta(EntryKind::Sass, 90, ArchVariant::Plain, b"a90");
    if solid {
        let groups: Vec<Vec<&[u8]>> = vec![
            raws[..half].iter().map(|r| r.as_slice()).collect(),
            raws[half..].iter().map(|r| r.as_slice()).collect(),
        ];
        let blobs = w.add_groups(&groups, threads).unwrap();
        for (i, &m) in ids.iter().enumerate() {
            w.add_entry_for_blob(m, m80(i), blobs[0][i]).unwrap();
            w.add_entry_for_blob(m, m90(i), blobs[1][i]).unwrap();
        }
    } else {
        for (i, &m) in ids.iter().enumerate() {
            w.add_entry(m, m80(i), &raws[i]).unwrap();
            w.add_entry(m, m90(i), &raws[half + i]).unwrap();
        }
    }
    let (c, s) = w.finish().unwrap();
    (c.into_inner(), s)
}

fn sample() -> Vec<Vec<u8>> {
    let mut raws = variants(6, 200_000);
    raws.extend(variants(6, 150_000).into_iter().map(|mut v| {
        v[9] = 0x55;
        v
    }));
    raws
}

#[test]
fn groups_round_trip_and_pay() {
    let raws = sample();
    let (bytes, summary) = write(&raws, true, 0);
    let store = Store::parse(&bytes).unwrap();
    assert_eq!(store.version(), (1, 1));
    for (i, m) in store.modules().enumerate() {
        let e: Vec<_> = m.entries().collect();
        assert_eq!(store.read_entry(&e[0]).unwrap(), raws[i]);
        assert_eq!(store.read_entry(&e[1]).unwrap(), raws[6 + i]);
        assert_eq!(e[0].codec(), Codec::ZstdSolid);
    }
    store.verify().unwrap();
    let blobs: Vec<BlobView> = store.blobs().collect();
    assert_eq!(blobs.len(), 12);
    assert!(blobs[..6].iter().all(|b| b.offset == blobs[0].offset));
    assert_eq!(
        blobs[..6].iter().map(|b| b.skip).collect::<Vec<_>>(),
        (0..6).map(|i| i * 200_000).collect::<Vec<_>>()
    );
    // Each frame counted once.
    let frames = blobs[0].stored_len + blobs[6].stored_len;
    assert_eq!(store.stats().stored_bytes, frames);
    assert_eq!(summary.stored_bytes, frames);
    let (each, _) = write(&raws, false, 0);
    let per_blob = Store::parse(&each).unwrap().stats().stored_bytes;
    assert!(
        frames * 3 < per_blob,
        "groups {frames} vs one frame per blob {per_blob}"
    );
    // A store without groups is still written as 1.0.
    assert_eq!(Store::parse(&each).unwrap().version(), (1, 0));
}

#[test]
fn same_bytes_whatever_the_thread_count() {
    let raws = sample();
    let one = write(&raws, true, 1).0;
    for threads in [2, 4] {
        assert!(write(&raws, true, threads).0 == one);
    }
}

#[test]
fn blobs_already_stored_are_not_written_again() {
    let raws = sample();
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let m = w.add_module("m").unwrap();
    let single = w
        .add_entry(
            m,
            meta(EntryKind::Ptx, 90, ArchVariant::Plain, b""),
            &raws[1],
        )
        .unwrap();
    // raws[1] again, and raws[0] twice within the batch.
    let groups = vec![
        vec![raws[0].as_slice(), raws[1].as_slice(), raws[2].as_slice()],
        vec![raws[0].as_slice()],
    ];
    let ids = w.add_groups(&groups, 2).unwrap();
    assert_eq!(ids[0][1], single.blob);
    assert_eq!(ids[1][0], ids[0][0]);
    for &b in &ids[0] {
        w.add_entry_for_blob(m, meta(EntryKind::Sass, 90, ArchVariant::Plain, b""), b)
            .unwrap();
    }
    assert!(w
        .add_entry_for_blob(m, meta(EntryKind::Sass, 90, ArchVariant::Plain, b""), 99)
        .is_err());
    let bytes = w.finish().unwrap().0.into_inner();
    let store = Store::parse(&bytes).unwrap();
    assert_eq!(store.blob_count(), 3);
    let got: Vec<Vec<u8>> = store
        .entries()
        .map(|e| store.read_entry(&e).unwrap())
        .collect();
    assert_eq!(
        got,
        vec![
            raws[1].clone(),
            raws[0].clone(),
            raws[1].clone(),
            raws[2].clone()
        ]
    );
    // The group's new blobs were raws[0] and raws[2]: one frame over both.
    let b: Vec<BlobView> = store.blobs().collect();
    assert_eq!(
        (b[1].codec, b[2].codec),
        (Codec::ZstdSolid, Codec::ZstdSolid)
    );
    assert_eq!(
        (b[1].offset, b[2].skip),
        (b[2].offset, raws[0].len() as u64)
    );
}

#[test]
fn detached_index_and_assemble_give_the_store_back() {
    let raws = sample();
    let (bytes, _) = write(&raws, true, 0);
    let store = Store::parse(&bytes).unwrap();
    let skel = Store::parse_skeleton(&store.skeleton()).unwrap();
    assert_eq!(skel.digest(), store.digest());
    let frame = |id: u32| {
        let b = store.blob(id).unwrap();
        Ok(&bytes[b.offset as usize..(b.offset + b.stored_len) as usize])
    };
    for e in skel.entries() {
        let b = skel.blob(e.blob_id()).unwrap();
        let stored = &bytes[b.offset as usize..(b.offset + b.stored_len) as usize];
        assert_eq!(
            skel.read_entry_from(&e, stored).unwrap(),
            store
                .read_entry(
                    &store
                        .entries()
                        .nth(e.module_index() * 2 + e.index_in_module())
                        .unwrap()
                )
                .unwrap()
        );
    }
    let mut out = Vec::new();
    skel.assemble(&mut out, frame).unwrap();
    assert!(out == bytes);
}

/// The blob record `i`'s offset in `bytes`.
fn blob_rec(bytes: &[u8], i: usize) -> usize {
    let index = u64::from_le_bytes(
        bytes[H_INDEX_OFFSET..H_INDEX_OFFSET + 8]
            .try_into()
            .unwrap(),
    );
    index as usize + BLOB_TABLE + 64 * i
}

fn mutated(f: impl Fn(&mut Vec<u8>)) -> Result<(), StoreError> {
    let (mut bytes, _) = write(&sample(), true, 1);
    f(&mut bytes);
    cubin_store::testing::reseal(&mut bytes);
    let store = Store::parse(&bytes)?;
    store.verify()
}

#[test]
fn damaged_groups_are_errors() {
    let set_skip = |i: usize, v: u32| {
        move |b: &mut Vec<u8>| {
            let at = blob_rec(b, i) + 28;
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    };
    // Stretches that overlap or go backwards.
    for (i, v) in [(1, 10), (2, 0), (3, 250_000)] {
        let err = mutated(set_skip(i, v)).unwrap_err();
        assert!(
            matches!(err, StoreError::MalformedIndex(_)),
            "{i}/{v}: {err}"
        );
    }
    // A stretch past the frame's content: the frame no longer matches the index.
    let err = mutated(set_skip(5, 1_100_000)).unwrap_err();
    assert!(matches!(err, StoreError::CorruptFrame { .. }), "{err}");
    // A 1.0 store cannot hold a group.
    let err = mutated(|b| b[H_MINOR] = 0).unwrap_err();
    assert!(
        matches!(err, StoreError::UnsupportedCodec { codec: 3, .. }),
        "{err}"
    );
    // A group's blob that claims another codec (the first, then one after it).
    for blob in [0, 1] {
        let err = mutated(|b| {
            let at = blob_rec(b, blob) + 24;
            b[at] = 1;
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::MalformedIndex(_) | StoreError::BlobOutOfBounds { .. }
            ),
            "{blob}: {err}"
        );
    }
    // A damaged frame: caught when read, never a wrong blob.
    let (bytes, _) = write(&sample(), true, 1);
    let store = Store::parse(&bytes).unwrap();
    let b = store.blob(3).unwrap();
    for at in [
        b.offset + 6,
        b.offset + b.stored_len / 2,
        b.offset + b.stored_len - 1,
    ] {
        let mut bad = bytes.clone();
        bad[at as usize] ^= 0x5a;
        let s = Store::parse(&bad).unwrap();
        let e = s.entries().nth(6).unwrap();
        assert!(s.read_entry(&e).is_err(), "flip at {at}");
    }
}
