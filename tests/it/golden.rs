//! Every writer's output, byte for byte, against digests recorded in
//! `tests/fixtures/golden.blake3`: prune (packed, tail-mode, plain linked, shared library,
//! object, archive), repack, split and join, extract, `inspect --json`, and the objects a
//! link rewrites. The inputs are committed fixtures (`tests/fixtures/make-packed.sh` made
//! the packed ones), so nothing here depends on the system's linker, and a refactoring that
//! changes one output byte fails here. A deliberate format change re-records the digests:
//! `FATPACK_BLESS=1 cargo test --test it golden` (and says why in its commit).
//! `scripts/outputs.sh` compares whole links through every linker, old binary against new.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::common::*;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/golden.blake3");

fn fatpack(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(Command::new(fatpack_bin()).current_dir(dir).args(args));
    assert_eq!(code, 0, "fatpack {args:?}: {err}");
    out
}

/// Every file under `dir`, by its path relative to `dir` (after `prefix`), and its digest.
fn digests(dir: &Path, prefix: &str, into: &mut BTreeMap<String, String>) {
    for (rel, bytes) in tree(dir) {
        into.insert(
            format!("{prefix}{rel}"),
            blake3::hash(&bytes).to_hex().to_string(),
        );
    }
}

#[test]
fn every_writer_gives_the_recorded_bytes() {
    let fx = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // Inputs by their names in the fixtures folder: extract names its files after them.
    let input = |n: &str| n.to_string();
    let at = |n: &str| out.join(n).display().to_string();
    let run_ = |args: &[&str]| fatpack(&fx, args);
    run_(&[
        "prune",
        "--for",
        "8.0",
        &input("packed_exe"),
        "-o",
        &at("exe.for80"),
    ]);
    run_(&[
        "prune",
        "--keep",
        "sm_80,sm_90",
        &input("packed_exe"),
        "-o",
        &at("exe.keep"),
    ]);
    run_(&[
        "prune",
        "--for",
        "9.0",
        &input("packed_tail"),
        "-o",
        &at("tail.for90"),
    ]);
    run_(&[
        "prune",
        "--for",
        "9.0",
        &input("fixture_exe"),
        "-o",
        &at("plain.for90"),
    ]);
    run_(&[
        "prune",
        "--for",
        "8.6",
        &input("libfixture.so"),
        "-o",
        &at("lib.for86.so"),
    ]);
    run_(&[
        "prune",
        "--for",
        "8.6",
        &input("kernels.o"),
        "-o",
        &at("kernels.for86.o"),
    ]);
    run_(&[
        "prune",
        "--for",
        "8.6",
        &input("libfixture.a"),
        "-o",
        &at("lib.for86.a"),
    ]);
    run_(&[
        "repack",
        "--level",
        "5",
        &input("packed_exe"),
        "-o",
        &at("exe.level5"),
    ]);
    std::fs::create_dir(out.join("split")).unwrap();
    run_(&["split", &input("packed_exe"), "--into", &at("split")]);
    run_(&["join", &at("split/packed_exe"), "-o", &at("exe.joined")]);
    run_(&["extract", &input("packed_exe"), "-o", &at("extract-exe")]);
    run_(&["extract", &input("kernels.o"), "-o", &at("extract-kernels")]);
    let json = run_(&[
        "inspect",
        "--json",
        &input("packed_exe"),
        &input("packed_tail"),
        &input("kernels.o"),
        &input("libfixture.a"),
    ]);
    std::fs::write(out.join("inspect.json"), json).unwrap();
    let mut got = BTreeMap::new();
    digests(&out, "", &mut got);

    // The objects a link rewrites and the glue it adds (the real link's own output is the
    // system linker's, so it is not recorded here; scripts/outputs.sh covers it).
    let w = wrapper_dir();
    let exe = dir.path().join("linked");
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &fixture_objs(),
        &cuda_lib(),
        // The copy route: it writes the rewritten objects recorded here.
        &["-Wl,--fatpack-save-temps", "-Wl,--fatpack-route=copy"],
    );
    assert_eq!(code, 0, "{err}");
    let temps = dir.path().join("linked.fatpack-temps");
    let mut link = BTreeMap::new();
    digests(&temps, "link/", &mut link);
    for (name, hash) in link {
        // The runtime archive is the build's, the response file names temp paths.
        if name.ends_with(".o") {
            got.insert(name, hash);
        }
    }
    assert!(got.len() > 20, "too few outputs: {got:?}");

    let text: String = got.iter().map(|(n, h)| format!("{h}  {n}\n")).collect();
    if std::env::var_os("FATPACK_BLESS").is_some() {
        std::fs::write(GOLDEN, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(GOLDEN).unwrap();
    let want: BTreeMap<&str, &str> = want
        .lines()
        .filter_map(|l| l.split_once("  ").map(|(h, n)| (n, h)))
        .collect();
    let got: BTreeMap<&str, &str> = got.iter().map(|(n, h)| (n.as_str(), h.as_str())).collect();
    let differ: Vec<_> = want
        .keys()
        .chain(got.keys())
        .filter(|n| want.get(*n) != got.get(*n))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(
        differ.is_empty(),
        "outputs differ from {GOLDEN} (FATPACK_BLESS=1 re-records them): {differ:?}"
    );
}
