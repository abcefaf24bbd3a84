//! Rewritten objects and archives: the stubs are where the wrappers point, everything else is
//! unchanged, and the real linker links them.

use std::process::Command;

use crate::common::*;
use fatpack::format::stub;
use fatpack::inputs;
use fatpack::rewrite::{archive, rewrite_object};
use object::{Object, ObjectSection, ObjectSymbol};

fn rewrite(name: &str) -> (Vec<u8>, Vec<String>) {
    let path = fixture(name);
    let data = std::fs::read(&path).unwrap();
    let scanned = inputs::scan(&path).unwrap();
    let (out, ex) = rewrite_object(name, &data, &scanned.sections, &mut |o, i| {
        format!("{o}#{i}")
    })
    .unwrap();
    (out, ex.into_iter().map(|e| e.module).collect())
}

#[test]
fn rewritten_object_keeps_every_other_section_and_symbol() {
    for name in [
        "kernels.o",
        "kernels_rdc.o",
        "kernels_af.o",
        "other.o",
        "main.o",
    ] {
        let orig = std::fs::read(fixture(name)).unwrap();
        let (new, modules) = rewrite(name);
        assert_eq!(modules, vec![format!("{name}#0")]);
        let a = object::File::parse(&*orig).unwrap();
        let b = object::File::parse(&*new).unwrap();
        let secs = |f: &object::File| -> Vec<(String, u64)> {
            f.sections()
                .map(|s| (s.name().unwrap().to_string(), s.size()))
                .collect()
        };
        let (sa, sb) = (secs(&a), secs(&b));
        assert_eq!(sa.len(), sb.len(), "{name}");
        for ((na, za), (nb, zb)) in sa.iter().zip(&sb) {
            assert_eq!(na, nb);
            if inputs::DEVICE_SECTIONS.contains(&na.as_str()) {
                assert!(zb < za, "{name}: {na} did not shrink");
                let stub = b.section_by_name(nb).unwrap();
                let stubs = stub::parse_all(stub.data().unwrap()).unwrap();
                assert_eq!(stubs.len(), 1);
                assert_eq!(stubs[0].module, modules[0]);
            } else {
                assert_eq!(za, zb, "{name}: {na} changed size");
                let (x, y) = (
                    a.section_by_name(na).unwrap(),
                    b.section_by_name(nb).unwrap(),
                );
                assert_eq!(x.data().unwrap(), y.data().unwrap(), "{name}: {na} changed");
            }
        }
        let syms = |f: &object::File| -> Vec<String> {
            f.symbols().map(|s| s.name().unwrap().to_string()).collect()
        };
        assert_eq!(syms(&a), syms(&b), "{name}");
        // The wrapper's relocation still targets offset 0 of the (now stub) section.
        let seg = b.section_by_name(".nvFatBinSegment").unwrap();
        let rels: Vec<_> = seg.relocations().collect();
        assert_eq!(rels.len(), 1);
        assert_eq!(rels[0].1.addend(), 0);
    }
}

#[test]
fn rewritten_objects_and_archive_link_with_the_real_linker() {
    let dir = tempfile::tempdir().unwrap();
    let mut members = Vec::new();
    for name in ["kernels.o", "other.o"] {
        let (bytes, _) = rewrite(name);
        members.push(archive::Member {
            name: name.as_bytes().to_vec(),
            data: bytes.into(),
            pieces: None,
        });
    }
    let lib = dir.path().join("libpacked.a");
    std::fs::write(&lib, archive::write_archive(&members).unwrap()).unwrap();
    let (main, _) = rewrite("main.o");
    let main_o = dir.path().join("main.o");
    std::fs::write(&main_o, main).unwrap();
    // The archive index must list what each member defines, as GNU ar's does.
    let nm = Command::new("nm").arg("-s").arg(&lib).output().unwrap();
    let text = String::from_utf8_lossy(&nm.stdout);
    assert!(text.contains("launch_fill in kernels.o"), "{text}");
    assert!(text.contains("launch_reduce in other.o"), "{text}");
    // Link against a stand-in for cudart: the registration entry points as no-ops, so the
    // result runs here without CUDA.
    let stubs_c = dir.path().join("cudart_stub.cc");
    std::fs::write(
        &stubs_c,
        "extern \"C\" {\nvoid** __cudaRegisterFatBinary(void* w){ return (void**)w; }\n\
         void __cudaRegisterFatBinaryEnd(void** h){}\nvoid __cudaUnregisterFatBinary(void** h){}\n\
         void __cudaRegisterFunction(){}\nvoid __cudaRegisterVar(){}\nint __cudaPopCallConfiguration(){return 0;}\n\
         unsigned __cudaPushCallConfiguration(){return 0;}\nint __cudaLaunchKernel(){return 0;}\nint __cudaGetKernel(){return 0;}\n\
         int __cudaInitModule(){return 0;}\nint cudaLaunchKernel(){return 0;}\n}\n",
    )
    .unwrap();
    let exe = dir.path().join("exe");
    let st = Command::new("g++")
        .arg("-o")
        .arg(&exe)
        .arg(&main_o)
        .arg(&lib)
        .arg(&stubs_c)
        .status()
        .unwrap();
    assert!(st.success());
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fixture main ok\n");
    // The linked .nv_fatbin holds exactly the three stubs, and no fatbin.
    let data = std::fs::read(&exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let sec = f.section_by_name(".nv_fatbin").unwrap();
    let stubs = stub::parse_all(sec.data().unwrap()).unwrap();
    let mut names: Vec<_> = stubs.into_iter().map(|s| s.module).collect();
    names.sort();
    assert_eq!(names, ["kernels.o#0", "main.o#0", "other.o#0"]);
}

#[test]
fn a_section_with_two_containers_is_remapped() {
    // `ld -r` of two nvcc objects concatenates their fatbins into one section, with each
    // wrapper's relocation pointing at its own container.
    let dir = tempfile::tempdir().unwrap();
    let combined = dir.path().join("combined.o");
    let st = Command::new("ld")
        .arg("-r")
        .arg("-o")
        .arg(&combined)
        .arg(fixture("kernels.o"))
        .arg(fixture("other.o"))
        .status()
        .unwrap();
    assert!(st.success());
    let data = std::fs::read(&combined).unwrap();
    let scanned = inputs::scan(&combined).unwrap();
    assert_eq!(scanned.sections[0].containers.len(), 2);
    let (out, ex) = rewrite_object("combined.o", &data, &scanned.sections, &mut |o, i| {
        format!("{o}#{i}")
    })
    .unwrap();
    assert_eq!(ex.len(), 2);
    let f = object::File::parse(&*out).unwrap();
    let seg = f.section_by_name(".nvFatBinSegment").unwrap();
    let fat = f.section_by_name(".nv_fatbin").unwrap();
    let stub_bytes = fat.data().unwrap();
    let mut targets = Vec::new();
    for (_, rel) in seg.relocations() {
        let object::RelocationTarget::Symbol(si) = rel.target() else {
            panic!()
        };
        let sym = f.symbol_by_index(si).unwrap();
        targets.push(sym.address() as i64 + rel.addend());
    }
    targets.sort();
    let (s0, len0) = stub::parse(stub_bytes).unwrap();
    assert_eq!(targets, vec![0, len0 as i64]);
    assert_eq!(s0.module, "combined.o#0");
    assert_eq!(
        stub::parse(&stub_bytes[len0..]).unwrap().0.module,
        "combined.o#1"
    );
}

/// A section claiming an absurd alignment (0x40000000000008, seen in the wild; plain ld links
/// it) must not make rewriting or pruning allocate by it: the rewritten object keeps every
/// section, and ld links both the original and the rewritten one.
#[test]
fn a_huge_section_alignment_is_not_an_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let mut data = std::fs::read(fixture("kernels.o")).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let text = f.section_by_name(".text").unwrap().index().0;
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    drop(f);
    let at = shoff + text * 64 + 48;
    data[at..at + 8].copy_from_slice(&0x0040_0000_0000_0008u64.to_le_bytes());
    let odd = dir.path().join("odd.o");
    std::fs::write(&odd, &data).unwrap();
    let scanned = inputs::scan(&odd).unwrap();
    let (out, ex) = rewrite_object("odd.o", &data, &scanned.sections, &mut |o, i| {
        format!("{o}#{i}")
    })
    .unwrap();
    assert_eq!(ex.len(), 1);
    let b = object::File::parse(&*out).unwrap();
    assert_eq!(
        b.section_by_name(".text").unwrap().align(),
        0x0040_0000_0000_0008
    );
    let rewritten = dir.path().join("rewritten.o");
    std::fs::write(&rewritten, &out).unwrap();
    for o in [&odd, &rewritten] {
        let (code, _, err) = run(Command::new("ld")
            .args(["-r", "-o"])
            .arg(dir.path().join("r.o"))
            .arg(o));
        assert_eq!(code, 0, "{}: {err}", o.display());
    }
    // prune reads and rewrites the same object.
    let pruned = dir.path().join("pruned.o");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--keep", "sm_90"])
        .arg(&odd)
        .arg("-o")
        .arg(&pruned));
    assert_eq!(code, 0, "{err}");
}

/// Found by the fuzzer: an object whose header says "no section headers here, the count is
/// in section 0" with a section 0 that counts none was rewritten into a file no ELF reader
/// accepts. An object without sections is written with no section header table.
#[test]
fn an_object_without_sections_rewrites_to_a_readable_object() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/regressions/rewrite-no-sections.o");
    let data = std::fs::read(&path).unwrap();
    let scanned = inputs::scan_bytes(&path, &data).unwrap();
    let (out, _) = rewrite_object("x.o", &data, &scanned.sections, &mut |o, i| {
        format!("{o}#{i}")
    })
    .unwrap();
    object::File::parse(&*out).expect("the rewritten object reads");
}
