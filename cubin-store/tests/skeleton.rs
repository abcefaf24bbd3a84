//! Detached indexes: a store's header, dictionary and index without its blobs, the blobs
//! supplied from elsewhere, and the whole store assembled back.

mod common;

use common::*;
use cubin_store::*;

fn stores() -> Vec<Vec<u8>> {
    let spec = sample_spec();
    vec![
        build_with(&spec, WriteOptions::default()).0,
        build_with(
            &spec,
            WriteOptions {
                level: 3,
                dictionary: Some(b".target sm_ MOV R1".repeat(50)),
                ..Default::default()
            },
        )
        .0,
    ]
}

fn blob_bytes<'a>(store: &Store<'a>, id: u32) -> &'a [u8] {
    let b = store.blob(id).unwrap();
    &store.as_bytes()[b.offset as usize..(b.offset + b.stored_len) as usize]
}

#[test]
fn a_skeleton_describes_the_same_store_and_reads_blobs_given_to_it() {
    for bytes in stores() {
        let full = Store::parse(&bytes).unwrap();
        let skel_bytes = full.skeleton();
        assert!(skel_bytes.len() < bytes.len());
        let skel = Store::parse_skeleton(&skel_bytes).unwrap();
        assert!(skel.is_detached() && !full.is_detached());
        assert_eq!(skel.digest(), full.digest());
        assert_eq!(skel.stats(), full.stats());
        check_matches_detached(&skel, &full);
        // Without the blobs, plain reads fail cleanly.
        let e = skel.entries().next().unwrap();
        assert!(skel.read_entry(&e).is_err());
    }
}

fn check_matches_detached(skel: &Store<'_>, full: &Store<'_>) {
    for (a, b) in skel.entries().zip(full.entries()) {
        assert_eq!(
            (a.module_name(), a.arch_name(), a.attrs()),
            (b.module_name(), b.arch_name(), b.attrs())
        );
        let got = skel
            .read_entry_from(&a, blob_bytes(full, b.blob_id()))
            .unwrap();
        assert_eq!(got, full.read_entry(&b).unwrap());
    }
}

#[test]
fn assembling_gives_the_original_bytes() {
    for bytes in stores() {
        let full = Store::parse(&bytes).unwrap();
        let skel_bytes = full.skeleton();
        let skel = Store::parse_skeleton(&skel_bytes).unwrap();
        let mut out = Vec::new();
        let n = skel
            .assemble(&mut out, |id| Ok(blob_bytes(&full, id)))
            .unwrap();
        assert_eq!(n, bytes.len() as u64);
        assert_eq!(out, bytes);
    }
}

#[test]
fn wrong_blob_bytes_are_refused() {
    let bytes = &stores()[0];
    let full = Store::parse(bytes).unwrap();
    let skel_bytes = full.skeleton();
    let skel = Store::parse_skeleton(&skel_bytes).unwrap();
    let e = skel
        .entries()
        .find(|e| e.stored_len() > 8)
        .expect("a non-empty entry");
    let good = blob_bytes(&full, e.blob_id()).to_vec();
    // Same length, one byte changed: decoding or the blake3 check catches it.
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    assert!(skel.read_entry_from(&e, &bad).is_err());
    // Another length.
    assert!(skel.read_entry_from(&e, &good[1..]).is_err());
    // Assembling with a short blob is refused.
    let mut out = Vec::new();
    let err = skel
        .assemble(&mut out, |id| {
            let b = blob_bytes(&full, id);
            Ok(if id == e.blob_id() { &b[1..] } else { b })
        })
        .unwrap_err();
    assert!(err.to_string().contains("bytes given"), "{err}");
}

#[test]
fn damaged_skeletons_are_refused() {
    let bytes = &stores()[1];
    let full = Store::parse(bytes).unwrap();
    let skel = full.skeleton();
    // Every truncation and one extra byte.
    for n in [0, 7, 16, 100, skel.len() - 1] {
        assert!(Store::parse_skeleton(&skel[..n]).is_err(), "prefix of {n}");
    }
    let mut longer = skel.clone();
    longer.push(0);
    assert!(Store::parse_skeleton(&longer).is_err());
    // A whole store is not a skeleton, nor the other way round.
    let err = Store::parse_skeleton(bytes).unwrap_err();
    assert!(err.to_string().contains("detached"), "{err}");
    assert!(Store::parse(&skel).is_err());
    // A flipped bit anywhere in the header, dictionary or index is caught by a digest or a
    // bounds check.
    for at in (16..skel.len()).step_by(7) {
        let mut s = skel.clone();
        s[at] ^= 0x10;
        // The index and dictionary are covered by digests in the header, the header by
        // the store digest: a change either fails or yields another store.
        if let Ok(p) = Store::parse_skeleton(&s) {
            assert_ne!(p.digest(), full.digest(), "flip at {at}");
        }
    }
}
