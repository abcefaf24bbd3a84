//! Every way a store can be damaged yields the right error, never a panic.
mod common;

use common::*;
use cubin_store::*;

// Header field offsets from FORMAT.md.
const H_MAJOR: usize = 0x08;
const H_MINOR: usize = 0x0A;
const H_INDEX_OFFSET: usize = 0x18;
const H_INDEX_LEN: usize = 0x20;

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn index_range(b: &[u8]) -> std::ops::Range<usize> {
    let o = u64_at(b, H_INDEX_OFFSET) as usize;
    o..o + u64_at(b, H_INDEX_LEN) as usize
}

/// Parses and, if that works, reads everything; returns the first error.
fn full_read(bytes: &[u8]) -> Result<(), StoreError> {
    let store = Store::parse(bytes)?;
    for m in store.modules() {
        let _ = m.name();
        for e in m.entries() {
            let _ = (e.meta(), e.arch_name(), e.attrs(), e.blob());
            store.read_entry(&e)?;
        }
    }
    let _ = store.stats();
    store.verify()
}

#[test]
fn every_prefix_is_truncated() {
    let bytes = build(&sample_spec());
    for len in 0..bytes.len() {
        match Store::parse(&bytes[..len]) {
            Err(StoreError::Truncated { need, have, .. }) => {
                assert_eq!(have, len as u64);
                assert!(need > have);
            }
            other => panic!("prefix {len}: {other:?}"),
        }
    }
    Store::parse(&bytes).unwrap();
}

#[test]
fn bad_magic() {
    let mut bytes = build(&sample_spec());
    bytes[0] = b'X';
    assert!(matches!(
        Store::parse(&bytes),
        Err(StoreError::BadMagic { .. })
    ));
    // Also recognised on inputs too short for a header.
    assert!(matches!(
        Store::parse(b"\x7fELF\x02\x01\x01\x00\x00"),
        Err(StoreError::BadMagic { .. })
    ));
    let msg = Store::parse(&bytes).unwrap_err().to_string();
    assert!(msg.contains("not a fatpack store"), "{msg}");
}

#[test]
fn future_major_version_rejected_minor_accepted() {
    let mut bytes = build(&sample_spec());
    bytes[H_MAJOR] = 2;
    let err = Store::parse(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::UnsupportedVersion {
                major: 2,
                minor: 0,
                supported: 1
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("2.0"), "{err}");
    // Even on a truncated prefix the version is reported first.
    assert!(matches!(
        Store::parse(&bytes[..16]),
        Err(StoreError::UnsupportedVersion { .. })
    ));
    bytes[H_MAJOR] = 0;
    assert!(matches!(
        Store::parse(&bytes),
        Err(StoreError::UnsupportedVersion { major: 0, .. })
    ));

    let mut bytes = build(&sample_spec());
    bytes[H_MINOR] = 7;
    let store = Store::parse(&bytes).unwrap();
    assert_eq!(store.version(), (1, 7));
    store.verify().unwrap();
}

#[test]
fn flipped_index_byte_is_digest_mismatch() {
    let bytes = build(&sample_spec());
    for i in index_range(&bytes) {
        let mut b = bytes.clone();
        b[i] ^= 0x20;
        assert!(
            matches!(Store::parse(&b), Err(StoreError::IndexDigestMismatch)),
            "byte {i}: {:?}",
            Store::parse(&b).err()
        );
    }
}

#[test]
fn flipped_blob_byte_is_caught_on_read() {
    let spec = sample_spec();
    for dictionary in [None, Some(b"MOV R1 \0\0\0\x01\x02 .target sm_".repeat(30))] {
        let (bytes, _) = build_with(
            &spec,
            WriteOptions {
                level: 3,
                dictionary,
                ..Default::default()
            },
        );
        let store = Store::parse(&bytes).unwrap();
        let ranges: Vec<_> = store
            .blobs()
            .map(|b| {
                (
                    b.id,
                    b.codec,
                    b.offset as usize..(b.offset + b.stored_len) as usize,
                )
            })
            .collect();
        drop(store);
        let mut harmless = Vec::new();
        let mut total = 0;
        for (id, codec, r) in ranges {
            let original = Store::parse(&bytes).unwrap().read_blob(id).unwrap();
            for i in r.clone() {
                total += 1;
                let mut b = bytes.clone();
                b[i] ^= 0x01;
                // The index is intact, so parse succeeds and the damage shows on read.
                let store = Store::parse(&b).unwrap();
                let err = match store.read_blob(id) {
                    Err(e) => e,
                    Ok(v) => {
                        // zstd has a few don't-care bits (e.g. the window descriptor); the
                        // digest check guarantees the bytes returned are still the right ones.
                        assert!(v == original, "blob {id} byte {i}: wrong bytes accepted");
                        harmless.push((id, i - r.start));
                        continue;
                    }
                };
                assert!(
                    matches!(
                        err,
                        StoreError::BlobDigestMismatch { .. }
                            | StoreError::CorruptFrame { .. }
                            | StoreError::BlobLengthMismatch { .. }
                    ),
                    "blob {id} ({codec}) byte {i}: {err:?}"
                );
                if codec == Codec::Raw {
                    assert!(matches!(err, StoreError::BlobDigestMismatch { .. }));
                }
                assert!(store.verify().is_err());
                // Other blobs stay readable.
                for other in store.blobs().filter(|o| o.id != id) {
                    store.read_blob(other.id).unwrap();
                }
            }
        }
        eprintln!("harmless flips (blob, offset in blob): {harmless:?} of {total}");
        assert!(
            harmless.len() * 100 < total,
            "{} of {total}",
            harmless.len()
        );
    }
}

#[test]
fn blob_errors_name_module_and_arch() {
    let spec = sample_spec();
    let bytes = build(&spec);
    let store = Store::parse(&bytes).unwrap();
    let e = store.module(0).unwrap().entry(1).unwrap();
    let at = e.blob().offset as usize + e.blob().stored_len as usize - 1;
    drop(store);
    let mut b = bytes.clone();
    b[at] ^= 0xff;
    let store = Store::parse(&b).unwrap();
    let e = store.module(0).unwrap().entry(1).unwrap();
    let msg = store.read_entry(&e).unwrap_err().to_string();
    assert!(
        msg.contains("libfoo.so/kernels.o") && msg.contains("sm_90a"),
        "{msg}"
    );
}

#[test]
fn flipped_dictionary_byte() {
    let dict = b"MOV R1 \0\0\0\x01\x02 .target sm_".repeat(30);
    let (bytes, _) = build_with(
        &sample_spec(),
        WriteOptions {
            level: 3,
            dictionary: Some(dict.clone()),
            ..Default::default()
        },
    );
    let off = u64_at(&bytes, 0x28) as usize;
    assert_eq!(u64_at(&bytes, 0x30) as usize, dict.len());
    for i in [off, off + dict.len() / 2, off + dict.len() - 1] {
        let mut b = bytes.clone();
        b[i] ^= 0x80;
        assert!(matches!(
            Store::parse(&b),
            Err(StoreError::DictionaryDigestMismatch)
        ));
    }
}

#[test]
fn every_header_byte_flip_is_an_error_or_harmless() {
    let bytes = build(&sample_spec());
    for i in 0..HEADER_LEN {
        for x in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= x;
            match full_read(&b) {
                // Minor version changes are compatible by definition.
                Ok(()) => assert!(
                    (H_MINOR..H_MINOR + 2).contains(&i),
                    "byte {i} ^ {x:#x} accepted"
                ),
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        }
    }
}

#[test]
fn garbage_and_overflowing_headers() {
    let valid = build(&sample_spec());
    let mut hdr = valid[..HEADER_LEN].to_vec();
    // Huge file_len / index offsets must not overflow or allocate.
    for (off, v) in [
        (0x10, u64::MAX),
        (0x18, u64::MAX - 3),
        (0x20, u64::MAX),
        (0x28, u64::MAX),
        (0x30, u64::MAX),
    ] {
        let mut b = valid.clone();
        b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        assert!(full_read(&b).is_err());
    }
    hdr[0x0C..0x10].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Store::parse(&hdr).is_err());
    assert!(Store::parse(&[]).is_err());
    assert!(Store::parse(&[0u8; 4096]).is_err());
}

/// Index mutations that keep the digest valid, to reach the index validator.
#[test]
fn resealed_index_mutations_never_panic() {
    let spec = sample_spec();
    let bytes = build(&spec);
    let r = index_range(&bytes);
    let mut rejected = 0;
    for i in r.clone() {
        for x in [0x01u8, 0x10, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= x;
            cubin_store::testing::reseal(&mut b);
            if full_read(&b).is_err() {
                rejected += 1;
            }
        }
    }
    // Most index bytes matter (arch/attrs/name bytes are free-form and may be accepted).
    assert!(rejected > r.len(), "{rejected} of {}", 4 * r.len());
}

#[test]
fn hostile_counts_do_not_allocate() {
    // A hand-made index claiming 4G blobs must be rejected by the size equation.
    let bytes = build(&Vec::new());
    let r = index_range(&bytes);
    for field in [0usize, 4, 8] {
        let mut b = bytes.clone();
        b[r.start + field..r.start + field + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        cubin_store::testing::reseal(&mut b);
        assert!(matches!(
            Store::parse(&b),
            Err(StoreError::MalformedIndex(_))
        ));
    }
    let mut b = bytes.clone();
    b[r.start + 16..r.start + 24].copy_from_slice(&u64::MAX.to_le_bytes());
    cubin_store::testing::reseal(&mut b);
    assert!(matches!(
        Store::parse(&b),
        Err(StoreError::MalformedIndex(_))
    ));
}

#[test]
fn hostile_raw_len_is_rejected() {
    let spec: Spec = vec![(
        "m".into(),
        vec![(
            meta(EntryKind::Sass, 90, ArchVariant::Plain, b""),
            fake_cubin(1, 4000),
        )],
    )];
    let bytes = build(&spec);
    let r = index_range(&bytes);
    let raw_len_at = r.start + 24 + 16;
    for v in [u64::MAX, 1 << 40] {
        let mut b = bytes.clone();
        b[raw_len_at..raw_len_at + 8].copy_from_slice(&v.to_le_bytes());
        cubin_store::testing::reseal(&mut b);
        assert!(
            matches!(Store::parse(&b), Err(StoreError::MalformedIndex(_))),
            "{v}"
        );
    }
    // A plausible but wrong raw_len parses and is caught against the frame header.
    let mut b = bytes.clone();
    b[raw_len_at..raw_len_at + 8].copy_from_slice(&4001u64.to_le_bytes());
    cubin_store::testing::reseal(&mut b);
    let store = Store::parse(&b).unwrap();
    assert!(matches!(
        store.read_blob(0),
        Err(StoreError::CorruptFrame { .. })
    ));
    // Unknown codec.
    let mut b = bytes.clone();
    b[r.start + 24 + 24] = 9;
    cubin_store::testing::reseal(&mut b);
    assert!(matches!(
        Store::parse(&b),
        Err(StoreError::UnsupportedCodec { blob: 0, codec: 9 })
    ));
}
