//! `fatpack prune` on every kind of file (checked with cuobjdump) and tail mode's layout.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use object::{Object, ObjectSection, ObjectSegment};

/// `fatpack prune --for CAPS INPUT -o OUT`: exit code and stderr.
fn prune_for(input: &Path, out: &Path, caps: &str) -> (i32, String) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", caps])
        .arg(input)
        .arg("-o")
        .arg(out));
    (code, err)
}

fn prune(input: &Path, out: &Path, keep: &str) -> (i32, String) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--keep", keep])
        .arg(input)
        .arg("-o")
        .arg(out));
    (code, err)
}

#[test]
fn pruned_files_hold_exactly_the_kept_entries() {
    let tool = cuda_tool("cuobjdump");
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "kernels.o",
        "kernels_all.o",
        "kernels_rdc.o",
        "libfixture.a",
        "libfixture_thin.a",
        "libfixture.so",
        "fixture_exe",
        "kernels.fatbin",
    ] {
        let input = fixture(name);
        let before = std::fs::read(&input).unwrap();
        let out = dir.path().join(name);
        for (keep, want_elf, want_ptx) in [
            ("sm_80,compute_90", "sm_80", Some("sm_90")),
            ("86-real", "sm_86", None),
        ] {
            let (code, err) = prune(&input, &out, keep);
            assert_eq!(code, 0, "{name} {keep}: {err}");
            let listed = cuobjdump_list(&tool, &out);
            assert!(!listed.is_empty(), "{name}");
            for (kind, arch) in &listed {
                match kind.as_str() {
                    "ELF" => assert_eq!(arch, want_elf, "{name} {keep}: {listed:?}"),
                    _ => assert_eq!(Some(arch.as_str()), want_ptx, "{name} {keep}: {listed:?}"),
                }
            }
            assert!(listed.iter().any(|(k, _)| k == "ELF"));
            assert_eq!(
                listed.iter().any(|(k, _)| k == "PTX"),
                want_ptx.is_some(),
                "{name} {keep}"
            );
        }
        assert_eq!(
            std::fs::read(&input).unwrap(),
            before,
            "{name}: input modified"
        );
    }
    // A pruned object still links and its executable still runs.
    let cuda = cuda_lib();
    let objs: Vec<_> = ["main.o", "kernels.o", "other.o"]
        .iter()
        .map(|n| {
            let o = dir.path().join(format!("p-{n}"));
            assert_eq!(prune(&fixture(n), &o, "sm_80").0, 0);
            o
        })
        .collect();
    let exe = dir.path().join("app");
    let (code, _, err) = run(Command::new("g++")
        .arg("-o")
        .arg(&exe)
        .args(&objs)
        .arg(format!("-L{}", cuda.display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
}

#[test]
fn pruning_to_an_absent_arch_names_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.o");
    let (code, err) = prune(&fixture("kernels.o"), &out, "sm_70,sm_72");
    assert_ne!(code, 0);
    assert!(
        err.contains("sm_70") && err.contains("sm_75, sm_80, sm_86, sm_90, compute_90"),
        "{err}"
    );
    assert!(!out.exists());
    // A list meant for many files may name targets one of them lacks: kept what it has.
    let (code, err) = prune(&fixture("kernels.o"), &out, "sm_70,sm_80");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("has no sm_70"), "{err}");
    std::fs::remove_file(&out).unwrap();
    let (code, err) = prune(&fixture("kernels.o"), &fixture("kernels.o"), "sm_80");
    assert_ne!(code, 0, "pruned onto its own input");
    assert!(err.contains("must not be the input"), "{err}");
    let (code, err) = prune(&fixture("kernels.o"), &out, "sm_8x");
    assert_ne!(code, 0);
    assert!(err.contains("sm_8x"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn pruned_packed_program_keeps_running_with_a_smaller_store() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    for side in [false, true] {
        let exe = dir.path().join(format!("app{side}"));
        let extra: &[&str] = if side {
            &["-Wl,--fatpack-side-file"]
        } else {
            &[]
        };
        let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, extra);
        assert_eq!(code, 0, "{err}");
        let out = dir.path().join(format!("pruned{side}"));
        // main.o has only sm_80 and compute_80: --keep would leave its module empty.
        let (code, err) = prune(&exe, &out, "sm_90,compute_90");
        assert_ne!(code, 0);
        assert!(
            err.contains("module main.o#0") && err.contains("--allow-empty"),
            "{err}"
        );
        assert!(!out.exists());
        let (code, _, err) = run(Command::new(fatpack_bin())
            .args(["prune", "--keep", "sm_90,compute_90", "--allow-empty"])
            .arg(&exe)
            .arg("-o")
            .arg(&out));
        assert_eq!(code, 0, "{err}");
        let before = inspect_json(&exe);
        let after = inspect_json(&out);
        assert_eq!(after["packed"]["digest_matches"], true, "side={side}");
        let archs: Vec<String> = after["per_arch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["arch"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(archs, ["sm_90", "compute_90"], "side={side}");
        assert!(after["packed"]["store_size"].as_u64() < before["packed"]["store_size"].as_u64());
        if !side {
            // The store is at the end of the file: the file shrinks by what the store lost
            // (up to the store's page alignment), and the store stays mapped.
            let dropped = before["packed"]["store_size"].as_u64().unwrap()
                - after["packed"]["store_size"].as_u64().unwrap();
            let (len_before, len_after) = (
                std::fs::metadata(&exe).unwrap().len(),
                std::fs::metadata(&out).unwrap().len(),
            );
            assert!(
                len_before - len_after + 4096 >= dropped,
                "{len_before} -> {len_after}, store lost {dropped}"
            );
            assert_eq!(after["packed"]["mapped"], true);
        }
        assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");
        // The original is untouched and still consistent.
        assert_eq!(inspect_json(&exe)["packed"]["digest_matches"], true);
    }
}

fn tail_link(extra: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, i32, String) {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let cuda = cuda_lib();
    let mut flags = vec!["-Wl,--fatpack-mode=tail"];
    flags.extend_from_slice(extra);
    let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &flags);
    std::mem::forget(w);
    (dir, exe, code, err)
}

fn check_tail_layout(exe: &Path) {
    check_tail_layout_n(exe, 12);
}

/// The tail layout, with `entries` entries listed by cuobjdump.
fn check_tail_layout_n(exe: &Path, entries: usize) {
    let data = std::fs::read(exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let fat = f.section_by_name(".nv_fatbin").unwrap();
    let bss = f.section_by_name(".bss").unwrap();
    assert!(
        fat.address() >= bss.address() + bss.size(),
        "fatbin not after .bss"
    );
    // In a loadable segment of its own, read-only, and .bss still takes no file space.
    let seg = f
        .segments()
        .find(|s| s.address() <= fat.address() && fat.address() < s.address() + s.size())
        .expect("fatbin in a PT_LOAD");
    assert_eq!(seg.address(), fat.address());
    let bss_seg = f
        .segments()
        .find(|s| s.address() <= bss.address() && bss.address() < s.address() + s.size())
        .unwrap();
    assert!(
        bss_seg.file_range().1 < bss_seg.size(),
        ".bss became file-backed"
    );
    // cuobjdump still finds every entry (through the wrapper pointer's target).
    assert_eq!(cuobjdump_list(&cuda_tool("cuobjdump"), exe).len(), entries);
}

#[test]
fn tail_mode_puts_the_fatbin_after_bss_with_gnu_ld() {
    cuda_lib();
    let (_d, exe, code, err) = tail_link(&[]);
    assert_eq!(code, 0, "{err}");
    check_tail_layout(&exe);
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
    // No fatpack runtime, no store.
    let (_, syms, _) = run(Command::new("nm").arg(&exe));
    assert!(!syms.contains("__wrap___cudaRegisterFatBinary"));
    assert!(inspect_json(&exe)["packed"].is_null());
}

#[test]
fn tail_mode_with_lld_and_a_clear_refusal_with_gold_and_mold() {
    cuda_lib();
    crate::common::tool("ld.lld", "apt-get install lld");
    let (_d, exe, code, err) = tail_link(&["-fuse-ld=lld"]);
    assert_eq!(code, 0, "{err}");
    check_tail_layout(&exe);
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
    let (_d, exe, code, err) = tail_link(&["-fuse-ld=gold"]);
    assert_ne!(code, 0);
    assert!(err.contains("gold does not support INSERT"), "{err}");
    assert!(!exe.exists());
    crate::common::tool("ld.mold", "apt-get install mold");
    let (_d, exe, code, err) = tail_link(&["-fuse-ld=mold"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("mold does not read SECTIONS") && err.contains("packed mode works with mold"),
        "{err}"
    );
    assert!(!exe.exists());
}

/// `--for` keeps, per module, what the runtime's own selection function picks on those GPUs:
/// the `a` SASS on its exact device, `f` SASS across its family, PTX where no SASS runs (here
/// compute_80 of main.o on a 9.0 GPU), and refuses a GPU a module has nothing for. A pruned
/// packed program still runs and its store still matches.
#[test]
fn prune_for_capabilities_keeps_what_the_runtime_would_choose() {
    let dir = tempfile::tempdir().unwrap();
    let archs = |f: &Path| -> Vec<String> {
        let r = inspect_json(f);
        r["modules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["entries"].as_array().unwrap().clone())
            .map(|e| e["arch"].as_str().unwrap().to_string())
            .collect()
    };
    let prune = |args: &[&str], input: &Path, out: &Path| {
        run(Command::new(fatpack_bin())
            .arg("prune")
            .args(args)
            .arg(input)
            .arg("-o")
            .arg(out))
    };
    let af = fixture("kernels_af.o");
    for (spec, want) in [
        ("9.0", vec!["sm_90a"]),
        ("sm_103", vec!["sm_100f"]),
        ("100;120-real", vec!["sm_100f", "sm_120"]),
    ] {
        let out = dir
            .path()
            .join(format!("af-{}.o", spec.replace([';', '.'], "_")));
        let (code, _, err) = prune(&["--for", spec], &af, &out);
        assert_eq!(code, 0, "{spec}: {err}");
        assert_eq!(archs(&out), want, "{spec}");
        assert!(err.contains("fatpack prune: for "), "{err}");
    }
    // Nothing in it runs on 8.6, before pruning either: said, and only its smallest entry
    // stays (a well-formed container, no code an 8.6 GPU would never load).
    let out = dir.path().join("af-86.o");
    let (code, _, err) = prune(&["--for", "8.6"], &af, &out);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("for 8.6: nothing runs there, before or after pruning")
            && err.contains("sm_90a"),
        "{err}"
    );
    assert!(
        err.contains("none of them: only its smallest entry kept: 1 module (compute_90a)"),
        "{err}"
    );
    assert_eq!(archs(&out), ["compute_90a"]);
    let (code, _, err) = prune(&["--for", "nine"], &af, &out);
    assert_eq!(code, 2, "a usage error");
    assert!(err.contains("--for nine"), "{err}");

    // A packed program pruned for 9.0.
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let pruned = dir.path().join("app90");
    let (code, _, err) = prune(&["--for", "9.0"], &exe, &pruned);
    assert_eq!(code, 0, "{err}");
    let mut got = archs(&pruned);
    got.sort();
    // main.o has sm_80 and compute_80: on 9.0 the driver JITs compute_80.
    assert_eq!(got, ["compute_80", "sm_90", "sm_90"]);
    assert_eq!(inspect_json(&pruned)["packed"]["digest_matches"], true);
    assert_eq!(run(&mut Command::new(&pruned)).1, "fixture main ok\n");
}

/// Prune checks what it prunes: a store that is not the binary's own is refused (it would
/// otherwise be re-signed and run with this binary's host code), a damaged slot section
/// header is refused instead of written through, and a kept entry that does not decode is
/// refused. In each case nothing is written.
#[test]
fn prune_refuses_foreign_stores_bad_slots_and_damaged_entries() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let objs = fixture_objs();
    let side = ["-Wl,--fatpack-side-file"];
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    assert_eq!(gxx(Some(w.path()), &a, &objs, &cuda, &side).0, 0);
    // Another build of the same program: another compression level, another store.
    let side_b = ["-Wl,--fatpack-side-file", "-Wl,--fatpack-level=1"];
    assert_eq!(gxx(Some(w.path()), &b, &objs, &cuda, &side_b).0, 0);
    // b's store next to a: another build's device code.
    std::fs::copy(dir.path().join("b.fatpack"), dir.path().join("a.fatpack")).unwrap();
    let out = dir.path().join("a-pruned");
    let (code, err) = prune(&a, &out, "sm_90,compute_90");
    assert_ne!(code, 0);
    assert!(err.contains("does not belong to this binary"), "{err}");
    assert!(!out.exists() && !dir.path().join("a-pruned.fatpack").exists());
    // extract refuses it too: it would write another build's code as this binary's.
    let into = dir.path().join("extracted");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("extract")
        .arg(&a)
        .arg("-o")
        .arg(&into));
    assert_ne!(code, 0);
    assert!(err.contains("does not belong to this binary"), "{err}");
    let written = std::fs::read_dir(&into).map_or(0, |d| d.count());
    assert_eq!(written, 0, "extracted a foreign store");

    // The slot section's header says offset 0: writing there would clobber the ELF header.
    let c = dir.path().join("c");
    assert_eq!(gxx(Some(w.path()), &c, &objs, &cuda, &[]).0, 0);
    let mut data = std::fs::read(&c).unwrap();
    let (idx, shoff) = {
        let f = object::File::parse(&*data).unwrap();
        let idx = f.section_by_name(".fatpack_digest").unwrap().index().0;
        (
            idx,
            u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize,
        )
    };
    data[shoff + idx * 64 + 24..][..8].copy_from_slice(&0u64.to_le_bytes());
    let bad = dir.path().join("bad-slot");
    std::fs::write(&bad, &data).unwrap();
    let out = dir.path().join("bad-slot-pruned");
    let (code, err) = prune(&bad, &out, "sm_90,compute_90");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("section header is inconsistent"), "{err}");
    assert!(!err.contains("does not belong"), "{err}");
    assert!(!out.exists());
    assert_eq!(std::fs::read(&bad).unwrap(), data, "the input was modified");

    // A zstd entry (nvcc --compress-mode=size) whose frame magic is damaged.
    let obj = std::fs::read(fixture("kernels_size.o")).unwrap();
    let (start, entries) = {
        let f = object::File::parse(&*obj).unwrap();
        let sec = f.section_by_name(".nv_fatbin").unwrap();
        let (off, size) = sec.file_range().unwrap();
        let fbs = fatpack::fatbin::parse_all(&obj[off as usize..][..size as usize]).unwrap();
        (off as usize, fbs[0].entries.clone())
    };
    let e90 = entries.iter().find(|e| e.arch_name() == "sm_90").unwrap();
    let at = start
        + obj[start..]
            .windows(16)
            .position(|w| w == &e90.stored[..16])
            .unwrap();
    let mut damaged = obj.clone();
    damaged[at] ^= 0xFF;
    let dobj = dir.path().join("damaged.o");
    std::fs::write(&dobj, &damaged).unwrap();
    let out = dir.path().join("damaged-pruned.o");
    let (code, err) = prune(&dobj, &out, "sm_90");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("sm_90 is damaged"), "{err}");
    assert!(!out.exists());
    // The same file pruned to an intact entry is fine.
    let (code, err) = prune(&dobj, &out, "sm_86");
    assert_eq!(code, 0, "{err}");
}

/// A tail-mode output pruned: the containers are packed together, the file is smaller by
/// exactly the bytes dropped (up to alignment), every wrapper points at a container, and it
/// runs; PIE (relocated pointers) and non-PIE (absolute ones) alike.
#[test]
fn pruned_tail_outputs_shrink_and_keep_their_pointers() {
    for extra in [&[][..], &["-no-pie"][..]] {
        let (dir, exe, code, err) = tail_link(extra);
        assert_eq!(code, 0, "{err}");
        let out = dir.path().join("app90");
        let (code, err) = prune_for(&exe, &out, "9.0");
        assert_eq!(code, 0, "{extra:?}: {err}");
        assert!(!err.contains("keeps its size"), "{err}");
        let bytes = |e: &str| -> u64 {
            e.lines()
                .find_map(|l| l.split("device code ").nth(1))
                .and_then(|s| {
                    let (a, b) = s.split_once(" -> ")?;
                    Some(a.parse::<u64>().ok()? - b.split(' ').next()?.parse::<u64>().ok()?)
                })
                .expect("device code line")
        };
        let dropped = bytes(&err);
        let (before, after) = (
            std::fs::metadata(&exe).unwrap().len(),
            std::fs::metadata(&out).unwrap().len(),
        );
        assert!(
            before - after <= dropped && before - after + 8 >= dropped,
            "{extra:?}: {before} -> {after}, dropped {dropped}"
        );
        check_tail_layout_n(&out, 3);
        assert_eq!(
            run(&mut Command::new(&out)).1,
            "fixture main ok\n",
            "{extra:?}"
        );
        // Every wrapper's data pointer names a container in the new file.
        let data = std::fs::read(&out).unwrap();
        let f = object::File::parse(&*data).unwrap();
        let fat = f.section_by_name(".nv_fatbin").unwrap();
        let seg = f.section_by_name(".nvFatBinSegment").unwrap();
        let wrappers = seg.data().unwrap();
        let pie = f.kind() != object::ObjectKind::Executable;
        let relocs: std::collections::BTreeMap<u64, u64> = f
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .map(|(at, r)| (at, r.addend() as u64))
            .collect();
        let mut n = 0;
        for (i, w) in wrappers.chunks_exact(24).enumerate() {
            if u32::from_le_bytes(w[..4].try_into().unwrap()) != 0x466243b1 {
                continue;
            }
            let field = seg.address() + i as u64 * 24 + 8;
            let target = if pie {
                relocs[&field]
            } else {
                u64::from_le_bytes(w[8..16].try_into().unwrap())
            };
            let off = (target - fat.address()) as usize;
            let body = fat.data().unwrap();
            assert_eq!(
                &body[off..off + 4],
                &0xBA55ED50u32.to_le_bytes(),
                "wrapper {i}"
            );
            n += 1;
        }
        assert_eq!(n, 3, "{extra:?}");
        let archs: Vec<String> = inspect_json(&out)["per_arch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["arch"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(archs, ["sm_90", "compute_80"], "{extra:?}");
    }
}

/// Large-model data (`-mcmodel=medium`: `.lbss`, `.lrodata`, `.ldata`, as in cuBLAS's static
/// libraries) comes after `.bss` in GNU ld's default script; the tail script still puts the
/// fatbin last, so prune compacts it and the file shrinks.
#[test]
fn tail_mode_puts_the_fatbin_after_large_model_data_and_prune_shrinks_it() {
    cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.c");
    std::fs::write(
        &big,
        "__attribute__((section(\".ldata\"))) char ldata_v[70000] = {1};\n\
         __attribute__((section(\".lrodata\"))) const char lro_v[70000] = {2};\n\
         __attribute__((section(\".lbss\"))) char lbss_v[70000];\n\
         int large_sum(void) { return ldata_v[0] + lro_v[0] + lbss_v[5]; }\n",
    )
    .unwrap();
    let obj = dir.path().join("big.o");
    let (code, _, err) = run(Command::new("cc").arg("-c").arg(&big).arg("-o").arg(&obj));
    assert_eq!(code, 0, "{err}");
    let w = wrapper_dir();
    let exe = dir.path().join("app");
    let mut objs = fixture_objs();
    objs.push(obj);
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &objs,
        &cuda_lib(),
        &["-Wl,--fatpack-mode=tail"],
    );
    assert_eq!(code, 0, "{err}");
    let data = std::fs::read(&exe).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let fat = f.section_by_name(".nv_fatbin").unwrap().address();
    for s in [".bss", ".ldata", ".lrodata", ".lbss"] {
        let sec = f.section_by_name(s).unwrap_or_else(|| panic!("no {s}"));
        assert!(sec.address() + sec.size() <= fat, "{s} after the fatbin");
    }
    check_tail_layout(&exe);
    let out = dir.path().join("app90");
    let (code, err) = prune_for(&exe, &out, "9.0");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("keeps its size"), "{err}");
    assert!(
        std::fs::metadata(&out).unwrap().len() < std::fs::metadata(&exe).unwrap().len(),
        "{err}"
    );
    assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");
}
