//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::io::Cursor;

use cubin_store::*;

/// One module's worth of test input: name and (meta, raw) entries.
pub type Spec = Vec<(String, Vec<(EntryMeta, Vec<u8>)>)>;

/// Pseudo-cubin bytes: compressible but distinct per seed.
pub fn fake_cubin(seed: u32, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(b"\x7fELF\x02\x01\x01\x33");
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // Mostly a small alphabet so zstd has something to do.
        let b = if x & 3 == 0 {
            (x >> 8) as u8
        } else {
            b"\0\0\0\x01\x02MOV R1;"[(x % 12) as usize]
        };
        out.push(b);
    }
    out.truncate(len);
    out
}

/// `len` bytes of xorshift noise (incompressible), the same for every call.
pub fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E3779B97F4A7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn meta(kind: EntryKind, arch: u32, variant: ArchVariant, attrs: &[u8]) -> EntryMeta {
    EntryMeta {
        id: cubin_store::EntryId::new(kind, arch, variant),
        attrs: attrs.to_vec(),
    }
}

/// A small but varied spec: 3 modules, SASS/PTX/Other, a shared blob, empty raw, attrs.
pub fn sample_spec() -> Spec {
    let shared = fake_cubin(7, 3000);
    vec![
        (
            "libfoo.so/kernels.o".to_string(),
            vec![
                (
                    meta(EntryKind::Sass, 80, ArchVariant::Plain, b"hdr80"),
                    fake_cubin(1, 5000),
                ),
                (
                    meta(EntryKind::Sass, 90, ArchVariant::Specific, b""),
                    fake_cubin(2, 7000),
                ),
                (
                    meta(EntryKind::Ptx, 90, ArchVariant::Plain, &[1, 2, 3]),
                    b".version 8.0\n.target sm_90\n".repeat(40),
                ),
                (
                    meta(EntryKind::Sass, 100, ArchVariant::Family, b"x"),
                    shared.clone(),
                ),
            ],
        ),
        ("empty-module".to_string(), vec![]),
        (
            "m3".to_string(),
            vec![
                (
                    meta(EntryKind::Other(9), 75, ArchVariant::Plain, &[0xff; 70]),
                    Vec::new(),
                ),
                (
                    meta(EntryKind::Sass, 100, ArchVariant::Family, b"y"),
                    shared,
                ),
            ],
        ),
    ]
}

pub fn build_with(spec: &Spec, opts: WriteOptions) -> (Vec<u8>, StoreSummary) {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).expect("new");
    for (name, entries) in spec {
        let m = w.add_module(name).expect("add_module");
        for (meta, raw) in entries {
            w.add_entry(m, meta.clone(), raw).expect("add_entry");
        }
    }
    let (cur, summary) = w.finish().expect("finish");
    (cur.into_inner(), summary)
}

pub fn build(spec: &Spec) -> Vec<u8> {
    build_with(
        spec,
        WriteOptions {
            level: 3,
            dictionary: None,
            ..Default::default()
        },
    )
    .0
}

/// Asserts that `store` holds exactly `spec`, reading every entry.
pub fn check_matches(store: &Store<'_>, spec: &Spec) {
    assert_eq!(store.module_count(), spec.len());
    assert_eq!(
        store.entry_count(),
        spec.iter().map(|m| m.1.len()).sum::<usize>()
    );
    for (i, (m, (name, entries))) in store.modules().zip(spec).enumerate() {
        assert_eq!(m.index(), i);
        assert_eq!(m.name(), name);
        assert_eq!(m.entry_count(), entries.len());
        assert_eq!(store.module_by_name(name).map(|v| v.index()), Some(i));
        for (j, (e, (meta, raw))) in m.entries().zip(entries).enumerate() {
            assert_eq!(e.index_in_module(), j);
            assert_eq!(e.module_name(), name);
            assert_eq!(&e.meta(), meta);
            assert_eq!(e.arch_name(), meta.arch_name());
            assert_eq!(e.raw_len(), raw.len() as u64);
            assert_eq!(e.digest(), *blake3::hash(raw).as_bytes());
            assert_eq!(&store.read_entry(&e).expect("read_entry"), raw);
            assert_eq!(&e.read().expect("read"), raw);
        }
    }
    store.verify().expect("verify");
}
