//! The runtime under real nvcc 13 host code: tests/fixtures/nvcc13/kernels_none.o (committed
//! fixture) with its `.nv_fatbin` container replaced by a stub, exactly what `fatpack ld`'s
//! rewrite does, launched through `<<<>>>` (__cudaPushCallConfiguration, __cudaGetKernel,
//! __cudaLaunchKernel) against the fake cudart.

use std::path::PathBuf;
use std::process::Command;

use crate::rt_harness::*;
use cubin_store::{ArchVariant, EntryKind, EntryMeta, StoreWriter, WriteOptions};
use fatpack::format::fatbin::KIND_PTX;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/nvcc13/kernels_none.o"
);
const MODULE: &str = "kernels_none.o#0";

struct Packed {
    exe: PathBuf,
    /// The original container's entries: (arch name, header, payload).
    entries: Vec<(String, Vec<u8>, Vec<u8>)>,
}

fn pack() -> Packed {
    pack_relabelled(None)
}

/// With `relabel = Some((a, b))`: the SASS entry stored as sm_`a` holds the cubin of sm_`b`.
fn pack_relabelled(relabel: Option<(u32, u32)>) -> Packed {
    let dir = scratch("nvcc");
    let obj = std::fs::read(FIXTURE).unwrap();
    let sec = find_section(&obj, ".nv_fatbin").unwrap();
    let (_, parsed) = parse_container(&obj[sec]).expect("one nvcc fatbin container");
    let mut entries = Vec::new();
    let mut w =
        StoreWriter::new(std::io::Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let m = w.add_module(MODULE).unwrap();
    for e in &parsed {
        assert_eq!(e.flags & 0xA000, 0, "fixture is --compress-mode=none");
        let kind = if e.kind == KIND_PTX {
            EntryKind::Ptx
        } else {
            EntryKind::Sass
        };
        let variant = if e.flags & ARCH_SPECIFIC != 0 {
            ArchVariant::Specific
        } else if e.flags & ARCH_FAMILY != 0 {
            ArchVariant::Family
        } else {
            ArchVariant::Plain
        };
        let mut meta = EntryMeta::new(kind, e.arch, variant);
        meta.attrs = e.header.to_vec();
        let payload = match relabel {
            Some((a, b)) if kind == EntryKind::Sass && e.arch == a => {
                parsed
                    .iter()
                    .find(|o| o.kind != KIND_PTX && o.arch == b)
                    .expect("the fixture has that cubin")
                    .payload
            }
            _ => e.payload,
        };
        w.add_entry(m, meta.clone(), payload).unwrap();
        entries.push((meta.arch_name(), e.header.to_vec(), e.payload.to_vec()));
    }
    let (cur, summary) = w.finish().unwrap();
    let store = dir.join("store.bin");
    std::fs::write(&store, cur.into_inner()).unwrap();

    // The rewrite: the container's bytes become a stub, the wrapper and its relocation stay.
    let stub = dir.join("stub.bin");
    std::fs::write(&stub, fatpack::format::stub::encode(MODULE, 0)).unwrap();
    let kobj = dir.join("kernels.o");
    sh(Command::new("objcopy")
        .arg(format!("--update-section=.nv_fatbin={}", stub.display()))
        .arg(FIXTURE)
        .arg(&kobj));
    let main = dir.join("main.c");
    std::fs::write(
        &main,
        "#include <stdio.h>\n#include <string.h>\nextern int launch_fill(int *p);\n\
         int main(int argc, char **argv) {\n\
           if (argc > 1 && !strcmp(argv[1], \"launch\")) printf(\"launch_fill=%d\\n\", launch_fill(0));\n\
           else printf(\"host ok\\n\");\n  return 0;\n}\n",
    )
    .unwrap();
    let mobj = dir.join("main.o");
    sh(Command::new("cc").arg("-c").arg(&main).arg("-o").arg(&mobj));
    let g = glue(&dir);
    let exe = dir.join("nv");
    link("c++", &[mobj, kobj, g], &exe, &[]);
    install_store(
        &exe,
        &std::fs::read(&store).unwrap(),
        StoreAt::Mapped,
        &summary.digest,
    );
    Packed { exe, entries }
}

#[test]
fn real_nvcc_object_launches_through_the_runtime() {
    let p = pack();
    let names: Vec<&str> = p.entries.iter().map(|e| e.0.as_str()).collect();
    assert!(
        names.contains(&"sm_86") && names.contains(&"compute_90"),
        "{names:?}"
    );

    let r = run(&p.exe, "host", None, &[]);
    r.assert_clean();
    assert_eq!(r.stdout.trim(), "host ok");
    assert_eq!(r.log, "");

    for (devs, want) in [
        ("86", "sm_86"),
        ("89", "sm_86"),
        ("90", "sm_90"),
        ("120", "compute_90"),
    ] {
        let r = run(&p.exe, "launch", Some(devs), &[("FATPACK_LOG", "info")]);
        r.assert_clean();
        assert_eq!(
            r.out("launch_fill").as_deref(),
            Some("0"),
            "{}\n{}",
            r.log,
            r.stderr
        );
        // nvcc's registrations, replayed under the real handle.
        assert!(r.log.contains("function 1 fill_iota"), "{}", r.log);
        assert!(
            r.log.contains("var 1 dev_scale size=4 constant=0"),
            "{}",
            r.log
        );
        assert!(
            r.log.contains("var 1 c_table size=16 constant=1"),
            "{}",
            r.log
        );
        assert!(r.log.contains("getkernel fill_iota"), "{}", r.log);
        assert!(
            r.log
                .contains("launchkernel fill_iota grid=1,1,1 block=32,1,1"),
            "{}",
            r.log
        );
        assert!(
            r.stderr.contains(&format!(
                "compute capability {}.{} (device 0): {want}",
                &devs[..devs.len() - 1],
                &devs[devs.len() - 1..]
            )),
            "{}",
            r.stderr
        );
        // Exactly the chosen entry, byte for byte as nvcc wrote it (it was uncompressed).
        let bytes = std::fs::read(r.dump.join("reg-1.bin")).unwrap();
        let (version, got) = parse_container(&bytes).unwrap();
        assert_eq!(version, 1);
        assert_eq!(got.len(), 1, "{}", r.log);
        let (_, header, payload) = p.entries.iter().find(|e| e.0 == want).unwrap();
        assert_eq!(got[0].header, &header[..]);
        assert_eq!(got[0].payload, &payload[..]);
    }

    let r = run(&p.exe, "launch", Some("70"), &[]);
    r.assert_clean();
    // nvcc's stub ignores __cudaGetKernel's result; the null kernel reaches cudart, which fails.
    assert!(r.log.contains("launchkernel null-handle"), "{}", r.log);
    assert!(r.stderr.contains("compute capability 7.0"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("available: sm_75, sm_80, sm_86, sm_90, compute_90"),
        "{}",
        r.stderr
    );
}

/// A cubin stored under another arch's label (a damaged or hand-made store): the runtime
/// reads the cubin's own ELF header and refuses it rather than hand sm_86 code to an sm_80.
#[test]
fn a_cubin_must_match_its_label() {
    let p = pack_relabelled(Some((80, 86)));
    let r = run(&p.exe, "launch", Some("80"), &[]);
    r.assert_clean();
    assert!(
        r.stderr
            .contains("the entry stored as sm_80 holds a cubin for sm_86"),
        "{}",
        r.stderr
    );
    assert!(!r.log.contains("register "), "{}", r.log);
    // The other entries of the module are unaffected.
    let r = run(&p.exe, "launch", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launch_fill").as_deref(), Some("0"), "{}", r.stderr);
}
