//! Writes a few small valid stores as a seed corpus for the `store_reader` fuzz target.
//!
//! `cargo run -p cubin-store --example fuzz_seeds -- fuzz/corpus/store_reader`

use std::io::Cursor;
use std::path::PathBuf;

use cubin_store::{ArchVariant, EntryKind, EntryMeta, StoreWriter, WriteOptions};

type Entry = (EntryMeta, Vec<u8>);

fn meta(kind: EntryKind, arch: u32, variant: ArchVariant, attrs: &[u8]) -> EntryMeta {
    EntryMeta {
        id: cubin_store::EntryId::new(kind, arch, variant),
        attrs: attrs.to_vec(),
    }
}

fn store(modules: &[(&str, Vec<Entry>)], opts: WriteOptions) -> Vec<u8> {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).expect("writer");
    for (name, entries) in modules {
        let m = w.add_module(name).expect("module");
        for (meta, raw) in entries {
            w.add_entry(m, meta.clone(), raw).expect("entry");
        }
    }
    w.finish().expect("finish").0.into_inner()
}

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/corpus/store_reader".into()),
    );
    std::fs::create_dir_all(&dir).expect("create corpus dir");
    let elfish = |n: usize| -> Vec<u8> {
        let mut v = b"\x7fELF\x02\x01\x01\x33".to_vec();
        v.extend((0..n).map(|i| [0u8, 0, 1, b'R', (i % 7) as u8][i % 5]));
        v
    };
    let ptx = b".version 8.5\n.target sm_90a\n.address_size 64\n".repeat(6);
    let noise: Vec<u8> = (0..200u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let plain = |level| WriteOptions {
        level,
        dictionary: None,
        ..Default::default()
    };
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("empty", store(&[], plain(3))),
        (
            "one_sass",
            store(
                &[(
                    "a.o",
                    vec![(
                        meta(EntryKind::Sass, 90, ArchVariant::Plain, b""),
                        elfish(400),
                    )],
                )],
                plain(3),
            ),
        ),
        (
            "mixed",
            store(
                &[
                    (
                        "k.o",
                        vec![
                            (
                                meta(EntryKind::Sass, 80, ArchVariant::Plain, b"h80"),
                                elfish(300),
                            ),
                            (
                                meta(EntryKind::Sass, 90, ArchVariant::Specific, b"h90a"),
                                elfish(350),
                            ),
                            (
                                meta(EntryKind::Ptx, 90, ArchVariant::Specific, &[]),
                                ptx.clone(),
                            ),
                            (
                                meta(EntryKind::Other(5), 100, ArchVariant::Family, &[9; 12]),
                                noise.clone(),
                            ),
                        ],
                    ),
                    ("empty.o", vec![]),
                    (
                        "dup.o",
                        vec![
                            (
                                meta(EntryKind::Sass, 80, ArchVariant::Plain, b""),
                                elfish(300),
                            ),
                            (
                                meta(EntryKind::Sass, 75, ArchVariant::Plain, b""),
                                Vec::new(),
                            ),
                        ],
                    ),
                ],
                plain(19),
            ),
        ),
        (
            "dict",
            store(
                &[(
                    "d.o",
                    vec![
                        (
                            meta(EntryKind::Sass, 90, ArchVariant::Plain, b""),
                            elfish(500),
                        ),
                        (
                            meta(EntryKind::Ptx, 90, ArchVariant::Plain, b""),
                            ptx.clone(),
                        ),
                    ],
                )],
                WriteOptions {
                    level: 9,
                    dictionary: Some(b".target sm_90 \x7fELF R\0\0\x01".repeat(8)),
                    ..Default::default()
                },
            ),
        ),
        (
            "raw_only",
            store(
                &[(
                    "r.o",
                    vec![(meta(EntryKind::Sass, 120, ArchVariant::Family, b"x"), noise)],
                )],
                plain(1),
            ),
        ),
    ];
    for (name, bytes) in seeds {
        let path = dir.join(format!("seed_{name}.fpstore"));
        std::fs::write(&path, &bytes).expect("write seed");
        println!("{} ({} bytes)", path.display(), bytes.len());
    }
}
