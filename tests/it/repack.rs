//! `fatpack repack`: a packed binary's store compressed again, without relinking; the same
//! entries, the binary still runs them, and bad inputs are refused without leaving files.

use std::path::Path;
use std::process::Command;

use crate::rt_harness::*;

fn repack(input: &Path, output: &Path, level: &str) -> (i32, String, String) {
    repack_with(input, output, &["--level", level])
}

/// `fatpack repack INPUT -o OUTPUT ARGS...`: exit status, stdout, stderr.
fn repack_with(input: &Path, output: &Path, args: &[&str]) -> (i32, String, String) {
    crate::common::run(
        Command::new(crate::common::fatpack_bin())
            .arg("repack")
            .arg(input)
            .arg("-o")
            .arg(output)
            .args(args),
    )
}

/// `fatpack repack --release --group-mib MIB`, which must succeed.
fn repack_release(input: &Path, output: &Path, mib: &str) {
    let (code, _, err) = repack_with(input, output, &["--release", "--group-mib", mib]);
    assert_eq!(code, 0, "{err}");
}

/// (module, arch, raw size, kernels) of every entry, as inspect reports them.
fn entries(file: &Path) -> Vec<String> {
    let j = crate::common::inspect_json(file);
    let mut v = Vec::new();
    for m in j["modules"].as_array().unwrap() {
        for e in m["entries"].as_array().unwrap() {
            v.push(format!(
                "{} {} {} {}",
                m["origin"], e["arch"], e["raw_size"], e["kernel_count"]
            ));
        }
    }
    v
}

#[test]
fn repacked_binaries_hold_the_same_entries_and_still_run() {
    for at in [StoreAt::Mapped, StoreAt::UnmappedSection, StoreAt::SideFile] {
        let app = build_app(at, None);
        let out = scratch("repack").join("app");
        let (code, _, err) = repack(&app.exe, &out, "19");
        assert_eq!(code, 0, "{at:?}: {err}");
        assert!(err.contains("level 19"), "{err}");
        assert_eq!(entries(&out), entries(&app.exe), "{at:?}");
        let j = crate::common::inspect_json(&out);
        assert_eq!(j["packed"]["digest_matches"], true, "{at:?}");
        for (devs, mode) in [("90", "launchA"), ("86", "launchD"), ("120", "launchA")] {
            let a = run(&app.exe, mode, Some(devs), &[]);
            let b = run(&out, mode, Some(devs), &[]);
            b.assert_clean();
            assert_eq!(b.registered(), a.registered(), "{at:?} {devs} {mode}");
        }
        // Deterministic.
        let again = scratch("repack-again").join("app");
        assert_eq!(repack(&app.exe, &again, "19").0, 0);
        assert!(std::fs::read(&again).unwrap() == std::fs::read(&out).unwrap());
    }
}

/// A release store (solid groups by family or by arch, groups small enough that there are
/// several): same entries, the runtime registers the same bytes on every GPU, split and
/// prune take it, and the groups paid for themselves.
#[test]
fn release_stores_run_the_same() {
    for at in [StoreAt::Mapped, StoreAt::SideFile] {
        let app = build_app(at, None);
        for by in ["family", "arch"] {
            let out = scratch("repack-release").join("app");
            let (code, _, err) = repack_with(
                &app.exe,
                &out,
                &["--release", "--group-by", by, "--group-mib", "1"],
            );
            assert_eq!(code, 0, "{at:?} {by}: {err}");
            assert!(err.contains("solid groups"), "{err}");
            assert_eq!(entries(&out), entries(&app.exe), "{at:?} {by}");
            let j = crate::common::inspect_json(&out);
            assert_eq!(j["packed"]["digest_matches"], true);
            let codecs: Vec<&str> = j["modules"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["entries"].as_array().unwrap())
                .map(|e| e["compression"].as_str().unwrap())
                .collect();
            assert!(codecs.contains(&"zstd-solid"), "{at:?} {by}: {codecs:?}");
            for (devs, mode) in [("90", "launchA"), ("86", "launchD"), ("120", "launchA")] {
                let a = run(&app.exe, mode, Some(devs), &[]);
                let b = run(&out, mode, Some(devs), &[]);
                b.assert_clean();
                assert_eq!(b.registered(), a.registered(), "{at:?} {by} {devs} {mode}");
            }
        }
    }
}

/// The sm_90a entries 3 MiB each (the rest as [`payload`] makes them): containers and a solid
/// group far larger than a zstd block or the fixtures' modules.
fn big_payload(module: &str, arch: &str) -> Vec<u8> {
    let mut v = crate::rt_harness::payload(module, arch);
    if arch == "sm_90a" {
        let mut x = 0x9e37_79b9_u32 ^ module.len() as u32;
        // Runs of a few distinct bytes: zstd has work to do, and finishes fast at -O0.
        while v.len() < (3 << 20) + 5 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            v.extend(std::iter::repeat_n(
                b'a' + (x % 23) as u8,
                1 + (x >> 27) as usize,
            ));
        }
    }
    v
}

/// Modules of several MiB, from the default store and from a release store (a solid group of
/// 6 MiB): the fake cudart is handed exactly the stored bytes.
#[test]
fn modules_of_several_mib_register_their_exact_bytes() {
    let app = crate::rt_harness::build_app_with(StoreAt::Mapped, None, big_payload);
    let release = scratch("repack-big").join("app");
    repack_release(&app.exe, &release, "8");
    for exe in [&app.exe, &release] {
        for (mode, module) in [("launchA", "app#A"), ("launchB", "app#B")] {
            let r = run(exe, mode, Some("90"), &[]);
            r.assert_clean();
            let want = big_payload(module, "sm_90a");
            let found = std::fs::read_dir(&r.dump).unwrap().any(|f| {
                let got = std::fs::read(f.unwrap().path()).unwrap();
                let at = got
                    .windows(want.len().min(16))
                    .position(|w| w == &want[..16]);
                at.is_some_and(|at| got.get(at..at + want.len()) == Some(&want[..]))
            });
            assert!(
                found,
                "{}: {module}'s sm_90a bytes not registered",
                exe.display()
            );
        }
    }
}

/// The runtime keeps the last solid group it decoded, as far as it went: modules of one group
/// loaded in either order, modules of two groups in turn, and 32 threads loading one module at
/// once register what the default store registers (the digest check would refuse anything
/// else).
#[test]
fn solid_groups_read_in_any_order_in_one_process() {
    let app = build_app(StoreAt::Mapped, None);
    let out = scratch("repack-order").join("app");
    repack_release(&app.exe, &out, "1");
    for devs in ["86", "90", "120"] {
        for order in ["seq A D", "seq D A", "seq B A D B A", "seq D B D A"] {
            let a = run(&app.exe, order, Some(devs), &[]);
            let b = run(&out, order, Some(devs), &[]);
            b.assert_clean();
            assert_eq!(b.registered(), a.registered(), "{devs} {order}");
            assert_eq!(b.stdout, a.stdout, "{devs} {order}");
        }
        let r = run(&out, "race", Some(devs), &[]);
        r.assert_clean();
        assert_eq!(
            r.out("race ok").as_deref(),
            Some("32"),
            "{devs}: {}",
            r.stdout
        );
    }
}

#[test]
fn real_nvcc_output_repacked_runs_and_extracts_the_same() {
    let cuda = crate::common::cuda_lib();
    let w = crate::common::wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let (code, _, err) = crate::common::gxx(
        Some(w.path()),
        &exe,
        &crate::common::fixture_objs(),
        &cuda,
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let out = dir.path().join("app19");
    let (code, _, err) = repack(&exe, &out, "19");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        crate::common::run(&mut Command::new(&out)).1,
        "fixture main ok\n"
    );
    assert_eq!(entries(&out), entries(&exe));
    assert_eq!(crate::common::inspect_json(&out)["packed"]["mapped"], true);
}

/// `-Wl,--fatpack-release` links a release store: the very store `repack --release` makes of
/// the default link's output (same digest), and the program runs.
#[test]
fn a_release_link_writes_what_repack_release_writes() {
    let cuda = crate::common::cuda_lib();
    let w = crate::common::wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let (exe, rel) = (dir.path().join("app"), dir.path().join("app-release"));
    for (out, extra) in [(&exe, &[][..]), (&rel, &["-Wl,--fatpack-release"][..])] {
        let (code, _, err) = crate::common::gxx(
            Some(w.path()),
            out,
            &crate::common::fixture_objs(),
            &cuda,
            extra,
        );
        assert_eq!(code, 0, "{err}");
    }
    let repacked = dir.path().join("app-repacked");
    let (code, _, err) = repack_with(&exe, &repacked, &["--release"]);
    assert_eq!(code, 0, "{err}");
    let digest = |f: &Path| crate::common::inspect_json(f)["packed"]["digest"].clone();
    assert_eq!(digest(&rel), digest(&repacked));
    assert_ne!(digest(&rel), digest(&exe));
    assert_eq!(entries(&rel), entries(&exe));
    assert_eq!(
        crate::common::run(&mut Command::new(&rel)).1,
        "fixture main ok\n"
    );
    let j = crate::common::inspect_json(&rel);
    assert!(j.to_string().contains("zstd-solid"), "{j}");
}

#[test]
fn bad_inputs_are_refused_and_leave_nothing() {
    let d = scratch("repack-bad");
    let app = build_app(StoreAt::Mapped, None);
    // Output = input.
    let (code, _, err) = repack(&app.exe, &app.exe, "19");
    assert!(code != 0 && err.contains("must not be the input"), "{err}");
    // Not packed.
    let plain = d.join("plain");
    std::fs::copy("/bin/true", &plain).unwrap();
    let (code, _, err) = repack(&plain, &d.join("o1"), "19");
    assert!(code != 0 && err.contains("not a packed output"), "{err}");
    // A level zstd does not have.
    let (code, _, err) = repack(&app.exe, &d.join("o2"), "99");
    assert!(code != 0 && err.contains("level"), "{err}");
    // Split binaries.
    let into = d.join("split");
    let (code, _, err) = crate::common::run(
        Command::new(crate::common::fatpack_bin())
            .arg("split")
            .arg(&app.exe)
            .arg("--into")
            .arg(&into),
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = repack(&into.join("app"), &d.join("o3"), "19");
    assert!(code != 0 && err.contains("split"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter().all(|n| n == "plain" || n == "split"),
        "left behind: {left:?}"
    );
}

/// A release store pruned for one GPU stays a release store: groups whose blobs are all kept
/// are copied frame and all, groups kept in part are compressed again as one group; the
/// pruned program registers on that GPU what the unpruned one does.
#[test]
fn pruned_release_stores_keep_their_groups_and_run() {
    let app = build_app(StoreAt::Mapped, None);
    for by in ["arch", "family"] {
        let release = scratch("prune-release").join("app");
        let (code, _, err) = repack_with(&app.exe, &release, &["--release", "--group-by", by]);
        assert_eq!(code, 0, "{err}");
        let frames = |file: &Path| -> Vec<Vec<u8>> {
            let bytes = std::fs::read(file).unwrap();
            let store =
                cubin_store::Store::parse(fatpack::packed::section_bytes(&bytes).unwrap()).unwrap();
            let mut out: Vec<Vec<u8>> = store
                .blobs()
                .filter(|b| b.codec == cubin_store::Codec::ZstdSolid)
                .map(|b| {
                    store.as_bytes()[b.offset as usize..(b.offset + b.stored_len) as usize].to_vec()
                })
                .collect();
            out.dedup();
            out
        };
        let before = frames(&release);
        assert!(!before.is_empty());
        for (cap, devs, mode) in [("9.0", "90", "launchA"), ("8.6", "86", "launchD")] {
            let pruned = scratch("prune-release-out").join("app");
            let (code, _, err) = crate::common::run(
                Command::new(crate::common::fatpack_bin())
                    .arg("prune")
                    .arg(&release)
                    .arg("-o")
                    .arg(&pruned)
                    .args(["--for", cap]),
            );
            assert_eq!(code, 0, "{cap}: {err}");
            let a = run(&app.exe, mode, Some(devs), &[]);
            let b = run(&pruned, mode, Some(devs), &[]);
            b.assert_clean();
            assert_eq!(b.registered(), a.registered(), "{cap}");
            let after = frames(&pruned);
            assert!(!after.is_empty(), "{by} {cap}");
            // Grouped by arch, what one GPU keeps is whole groups: their frames, as they were.
            // Grouped by family, sm_80 and sm_86 share a group that 8.6 keeps in part: new.
            let copied = after.iter().all(|f| before.contains(f));
            assert_eq!(copied, by == "arch" || cap == "9.0", "{by} {cap}");
            assert!(
                entries(&pruned).len() < entries(&release).len(),
                "{by} {cap}"
            );
        }
    }
}
