//! The fatbin model against real nvcc 13 output: every fixture kind, checked entry by entry
//! against cuobjdump, decompression against uncompressed builds, and exact round trips.

use std::process::Command;

use crate::common::*;
use fatpack::arch::Variant;
use fatpack::fatbin::{self, Compression, EntryKind, Fatbin};
use fatpack::inputs::{self, FileKind};

const ALL: &[&str] = &[
    "kernels.o",
    "kernels_none.o",
    "kernels_all.o",
    "kernels_size.o",
    "kernels_lz4.o",
    "kernels_rdc.o",
    "kernels_af.o",
    "other.o",
    "libfixture.a",
    "libfixture_thin.a",
    "libfixture.so",
    "fixture_exe",
    "kernels.fatbin",
];

fn containers(name: &str) -> Vec<Fatbin> {
    let s = inputs::scan(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    s.sections.into_iter().flat_map(|s| s.containers).collect()
}

/// Our names in cuobjdump's spelling: it drops the `f` of family variants.
fn our_list(fbs: &[Fatbin]) -> Vec<(String, String)> {
    fbs.iter()
        .flat_map(|f| &f.entries)
        .map(|e| {
            let kind = if e.kind() == EntryKind::Ptx {
                "PTX"
            } else {
                "ELF"
            };
            let a = e.arch();
            let suffix = if a.variant == Variant::Specific {
                "a"
            } else {
                ""
            };
            (kind.to_string(), format!("sm_{}{suffix}", a.number))
        })
        .collect()
}

#[test]
fn file_kinds_are_recognised() {
    let kind = |n| inputs::scan(&fixture(n)).unwrap().kind;
    assert_eq!(kind("kernels.o"), FileKind::Object);
    assert_eq!(kind("libfixture.a"), FileKind::Archive);
    assert_eq!(kind("libfixture_thin.a"), FileKind::ThinArchive);
    assert_eq!(kind("libfixture.so"), FileKind::SharedLibrary);
    assert_eq!(kind("fixture_exe"), FileKind::Executable);
    assert_eq!(kind("kernels.fatbin"), FileKind::Fatbin);
    assert_eq!(kind("kernels_sm86.cubin"), FileKind::Cubin);
}

#[test]
fn entries_match_cuobjdump_on_every_fixture() {
    let tool = cuda_tool("cuobjdump");
    for name in ALL {
        let theirs = cuobjdump_list(&tool, &fixture(name));
        let ours = our_list(&containers(name));
        assert!(!ours.is_empty(), "{name}: no entries found");
        assert_eq!(ours, theirs, "{name}: entries differ from cuobjdump");
    }
}

#[test]
fn expected_archs_and_variants() {
    let fbs = containers("kernels_af.o");
    let names: Vec<String> = fbs[0].entries.iter().map(|e| e.arch_name()).collect();
    assert_eq!(names, ["sm_90a", "compute_90a", "sm_100f", "sm_120"]);
    let fbs = containers("kernels.o");
    let names: Vec<String> = fbs[0].entries.iter().map(|e| e.arch_name()).collect();
    assert_eq!(names, ["sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]);
    // Two translation units per archive, each its own container.
    assert_eq!(containers("libfixture.a").len(), 2);
    assert_eq!(containers("libfixture_thin.a").len(), 2);
}

#[test]
fn compressed_payloads_decompress_to_the_uncompressed_build() {
    let plain = containers("kernels_none.o");
    let plain: Vec<_> = plain[0].entries.iter().collect();
    assert!(plain.iter().all(|e| e.compression() == Compression::None));
    for (name, codec) in [
        ("kernels_all.o", Compression::Zstd),
        ("kernels_size.o", Compression::Zstd),
    ] {
        let fbs = containers(name);
        assert_eq!(fbs[0].entries.len(), plain.len());
        for (c, p) in fbs[0].entries.iter().zip(&plain) {
            assert_eq!(c.compression(), codec, "{name} {}", c.arch_name());
            assert!(c.stored_len() < c.raw_len());
            let raw = c.payload().unwrap();
            let want = p.payload().unwrap();
            // Uncompressed PTX is NUL-padded to 8 bytes; the compressed one is exact.
            assert_eq!(&raw[..], &want[..raw.len()], "{name} {}", c.arch_name());
            assert!(want[raw.len()..].iter().all(|&b| b == 0));
        }
    }
    // LZ4 (`--compress-mode=speed`): sm_80 SASS must equal the uncompressed sm_80 cubin.
    let lz = containers("kernels_lz4.o");
    let sass = lz[0]
        .entries
        .iter()
        .find(|e| e.kind() == EntryKind::Sass)
        .unwrap();
    assert_eq!(sass.compression(), Compression::Lz4);
    let p80 = plain.iter().find(|e| e.arch_name() == "sm_80").unwrap();
    assert_eq!(&sass.payload().unwrap()[..], &p80.payload().unwrap()[..]);
}

#[test]
fn round_trip_reproduces_every_section_byte_for_byte() {
    for name in ALL {
        let path = fixture(name);
        let data = std::fs::read(&path).unwrap();
        if name.ends_with(".fatbin") {
            let fbs = fatbin::parse_all(&data).unwrap();
            let mut out = Vec::new();
            fbs.iter().for_each(|f| f.write_to(&mut out));
            assert_eq!(out, data, "{name}");
            continue;
        }
        let s = inputs::scan(&path).unwrap();
        assert!(!s.sections.is_empty(), "{name}");
        for sec in &s.sections {
            for fb in &sec.containers {
                let bytes = fb.to_bytes();
                let (again, used) = fatbin::parse_one(&bytes, 0).unwrap();
                assert_eq!(used, bytes.len());
                assert_eq!(&again, fb, "{name}: {}", sec.origin);
            }
        }
    }
}

#[test]
fn subset_fatbin_is_accepted_by_cuobjdump() {
    let tool = cuda_tool("cuobjdump");
    let dir = tempfile::tempdir().unwrap();
    for (name, keep) in [
        ("kernels_all.o", vec!["sm_80", "compute_90"]),
        ("kernels_none.o", vec!["sm_90"]),
        ("kernels_af.o", vec!["sm_90a", "sm_120"]),
    ] {
        let mut fb = containers(name).remove(0);
        fb.retain(|e| keep.contains(&e.arch_name().as_str()));
        assert_eq!(fb.entries.len(), keep.len());
        let out = dir.path().join(format!("{name}.fatbin"));
        std::fs::write(&out, fb.to_bytes()).unwrap();
        let listed = cuobjdump_list(&tool, &out);
        let want: Vec<(String, String)> = keep
            .iter()
            .map(|k| match k.strip_prefix("compute_") {
                Some(n) => ("PTX".to_string(), format!("sm_{n}")),
                None => ("ELF".to_string(), k.to_string()),
            })
            .collect();
        assert_eq!(listed, want, "{name}");
        // Decompressed re-encoding is accepted too, and cuobjdump extracts the same cubin.
        let mut plain = fb.clone();
        plain.entries = fb
            .entries
            .iter()
            .map(|e| e.to_uncompressed().unwrap())
            .collect();
        let out2 = dir.path().join(format!("{name}.plain.fatbin"));
        std::fs::write(&out2, plain.to_bytes()).unwrap();
        assert_eq!(cuobjdump_list(&tool, &out2), want, "{name} (decompressed)");
        let st = Command::new(&tool)
            .current_dir(dir.path())
            .args(["--extract-elf", "all"])
            .arg(&out2)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

#[test]
fn kernel_names_from_sass_and_ptx() {
    let fbs = containers("kernels_none.o");
    for e in &fbs[0].entries {
        let payload = e.payload().unwrap();
        let mut names = match e.kind() {
            EntryKind::Sass => fatpack::cubin::read(&payload).unwrap().kernels,
            EntryKind::Ptx => fatpack::ptx::kernels(&payload),
            _ => unreachable!(),
        };
        names.sort();
        assert_eq!(
            names,
            [
                "_ZN2ns4axpyIdEEvT_PKS1_PS1_i",
                "_ZN2ns4axpyIfEEvT_PKS1_PS1_i",
                "fill_iota"
            ],
            "{}",
            e.arch_name()
        );
    }
    let c = fatpack::cubin::read(&std::fs::read(fixture("kernels_sm86.cubin")).unwrap()).unwrap();
    assert_eq!(c.arch.sm_name(), "sm_86");
    assert!(!c.relocatable);
    let rdc = containers("kernels_rdc.o");
    let p = rdc[0].entries[0].payload().unwrap();
    assert!(fatpack::cubin::read(&p).unwrap().relocatable);
}
