//! `fatpack split` of a conda package with a packed library: a host package, one device
//! package per architecture, the project's package that installs them all, and its
//! `cuda-arch` variants, in one channel that py-rattler indexes, solves and installs from on
//! every GPU of the matrix, with and without `__cuda_arch`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::prune_conda::{make_conda, solve, venv};
use crate::split_wheel::{kept, packed_library, serves_lib};

/// The packs installed beside the library in `prefix`, by the suffix after `libcut.so.1.`.
fn packs(prefix: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(prefix.join("lib"))
        .map(|r| {
            r.filter_map(|e| {
                let n = e.unwrap().file_name().into_string().unwrap();
                n.strip_prefix("libcut.so.1.")
                    .and_then(|r| r.strip_suffix(".fatpack"))
                    .map(str::to_string)
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

const EVERY_PACK: [&str; 5] = ["compute_90", "sm_75", "sm_80", "sm_86", "sm_90"];

/// The invariant for one GPU: the library installed in `prefix` runs exactly the entries
/// the fat library runs on a GPU of capability `cap`, every one of them installed.
fn serves(prefix: &Path, fat_lib: &Path, cap: &str, cell: &str) {
    serves_lib(&prefix.join("lib/libcut.so.1"), fat_lib, cap, cell);
}

/// A channel with conda-forge's `cuda-arch` metapackage for every capability of the matrix
/// and the fat package of `lib`, split into it. Returns (channel, the fat package).
fn channel(venv: &Path, d: &Path, lib: &Path, format: &str) -> (PathBuf, PathBuf, String) {
    let channel = d.join(format!("channel{format}"));
    let subdir = channel.join("linux-64");
    std::fs::create_dir_all(&subdir).unwrap();
    for cap in MATRIX {
        make_conda(
            venv,
            d,
            serde_json::json!({"out": subdir, "format": format, "name": "cuda-arch",
                "version": cap, "build": "0", "files": [],
                "constrains": [format!("__cuda_arch {cap}")]}),
        );
    }
    let src = d.join(format!("src{format}"));
    std::fs::create_dir(&src).unwrap();
    let fat = make_conda(
        venv,
        d,
        serde_json::json!({"out": src, "format": format, "depends": ["libgcc"], "files": [
            {"path": "lib/libcut.so.1", "file": lib, "mode": 0o755},
            {"path": "lib/libcut.so", "symlink": "libcut.so.1"},
            {"path": "share/doc/cutfix/README", "text": "cutfix\n"},
        ]}),
    );
    // libgcc, as a conda-forge library depends on it: a plain package here.
    make_conda(
        venv,
        d,
        serde_json::json!({"out": subdir, "format": format, "name": "libgcc",
            "version": "15.1.0", "build": "0", "files": []}),
    );
    let (code, err) = split_into(&fat, &subdir);
    assert_eq!(code, 0, "{err}");
    (channel, fat, err)
}

const MATRIX: [&str; 11] = [
    "5.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0", "12.1",
];

#[test]
fn a_split_conda_package_serves_every_gpu_through_py_rattler() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = packed_library(d);
    let venv = venv(d);
    let (channel, fat, err) = channel(&venv, d, &lib, ".conda");
    let subdir = channel.join("linux-64");
    let mut ours: Vec<String> = std::fs::read_dir(&subdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("cutfix"))
        .collect();
    ours.sort();
    assert_eq!(
        ours,
        [
            "cutfix-1.0-h0_0.conda",
            "cutfix-1.0-h0_0_compute90.conda",
            "cutfix-1.0-h0_0_sm75.conda",
            "cutfix-1.0-h0_0_sm80.conda",
            "cutfix-1.0-h0_0_sm86.conda",
            "cutfix-1.0-h0_0_sm90.conda",
            "cutfix-compute90-1.0-h0_0.conda",
            "cutfix-host-1.0-h0_0.conda",
            "cutfix-sm75-1.0-h0_0.conda",
            "cutfix-sm80-1.0-h0_0.conda",
            "cutfix-sm86-1.0-h0_0.conda",
            "cutfix-sm90-1.0-h0_0.conda",
        ],
        "{err}"
    );
    assert!(err.contains("cuda-arch >=8.6,<=8.9"), "{err}");
    // Same input, same bytes.
    let again = d.join("again");
    assert_eq!(split_into(&fat, &again).0, 0);
    for n in &ours {
        assert!(
            std::fs::read(again.join(n)).unwrap() == std::fs::read(subdir.join(n)).unwrap(),
            "{n} differs between two splits"
        );
    }

    let fat_lib = lib.as_path();
    let install = |cell: &str, specs: &str, arch: &str, env: &[(&str, &str)]| {
        let prefix = d.join(format!("p-{}", cell.replace([' ', ';', '=', '.'], "_")));
        let mut c = Command::new(venv.join("bin/python"));
        c.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/packages/solve_conda.py"))
            .arg(&channel)
            .arg(specs)
            .arg(arch)
            .arg(&prefix)
            .env_remove("CONDA_OVERRIDE_CUDA_ARCH")
            .env_remove("CONDA_OVERRIDE_CUDA")
            .envs(env.iter().copied());
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 0, "{cell}: {err}");
        (out.trim().to_string(), prefix)
    };
    // Every GPU of the matrix (CEP 46's `__cuda_arch`): the solver's own pick runs exactly
    // what the fat package runs there, and a GPU the build serves gets only its packs.
    for (cap, build, want) in [
        ("5.0", "h0_0", &EVERY_PACK[..]),
        ("6.1", "h0_0", &EVERY_PACK[..]),
        ("7.0", "h0_0", &EVERY_PACK[..]),
        ("7.5", "h0_0_sm75", &["sm_75"][..]),
        ("8.0", "h0_0_sm80", &["sm_80"][..]),
        ("8.6", "h0_0_sm86", &["sm_86"][..]),
        ("8.9", "h0_0_sm86", &["sm_86"][..]),
        ("9.0", "h0_0_sm90", &["sm_90"][..]),
        ("10.0", "h0_0_compute90", &["compute_90"][..]),
        ("12.0", "h0_0_compute90", &["compute_90"][..]),
        ("12.1", "h0_0_compute90", &["compute_90"][..]),
    ] {
        let cell = format!("rattler {cap}");
        let (got, prefix) = install(&cell, "cutfix", cap, &[]);
        assert_eq!(got, build, "{cell}");
        assert_eq!(packs(&prefix), want, "{cell}");
        serves(&prefix, fat_lib, cap, &cell);
    }
    // No `__cuda_arch` (a CPU build box, a client without CEP 46), a `cuda-arch` pin alone
    // included: everything, as the fat package.
    for (cell, specs, arch, env) in [
        ("none", "cutfix", "-", &[][..]),
        ("none pinned", "cutfix;cuda-arch ==9.0", "-", &[][..]),
        (
            "detected none",
            "cutfix",
            "detect",
            &[
                ("CONDA_OVERRIDE_CUDA_ARCH", ""),
                ("CONDA_OVERRIDE_CUDA", ""),
            ][..],
        ),
    ] {
        let (got, prefix) = install(cell, specs, arch, env);
        assert_eq!(got, "h0_0", "{cell}");
        assert_eq!(packs(&prefix), EVERY_PACK, "{cell}");
        for cap in ["7.5", "8.0", "8.6", "9.0", "12.0"] {
            serves(&prefix, fat_lib, cap, cell);
        }
    }
    // The GPU named the way conda users name it: py-rattler's own detection, overridden.
    let (got, prefix) = install(
        "override 9.0",
        "cutfix",
        "detect",
        &[
            ("CONDA_OVERRIDE_CUDA_ARCH", "9.0"),
            ("CONDA_OVERRIDE_CUDA", "13.0"),
        ],
    );
    assert_eq!(
        (got.as_str(), packs(&prefix)),
        ("h0_0_sm90", vec!["sm_90".into()])
    );
    serves(&prefix, fat_lib, "9.0", "override 9.0");
    // Device packages named by hand (a machine with several GPUs), and the host alone: what
    // a GPU would load is listed, and listed as not installed.
    let (_, prefix) = install("by hand", "cutfix-host;cutfix-sm80;cutfix-sm90", "-", &[]);
    assert_eq!(packs(&prefix), ["sm_80", "sm_90"]);
    serves(&prefix, fat_lib, "8.0", "by hand");
    serves(&prefix, fat_lib, "9.0", "by hand");
    let (_, prefix) = install("host alone", "cutfix-host", "9.0", &[]);
    assert!(packs(&prefix).is_empty());
    let hint = std::fs::read_to_string(prefix.join("lib/libcut.so.1.fatpack-install")).unwrap();
    assert!(
        hint.contains(".sm_90.fatpack\tcutfix-sm90\tconda install cutfix-sm90=1.0=h0_0\n"),
        "{hint}"
    );
    let (kept, missing) = kept(&prefix.join("lib/libcut.so.1"), "9.0");
    assert!(!kept.is_empty() && missing == kept, "{missing:?}");
}

#[test]
fn a_split_tar_bz2_package_installs_and_damage_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = packed_library(d);
    let venv = venv(d);
    let (channel, fat, _) = channel(&venv, d, &lib, ".tar.bz2");
    let prefix = d.join("prefix");
    assert_eq!(
        solve(&venv, &channel, "cutfix", "9.0", Some(&prefix)),
        "h0_0_sm90"
    );
    assert_eq!(packs(&prefix), ["sm_90"]);
    serves(&prefix, &lib, "9.0", ".tar.bz2 on 9.0");

    // A package whose library paths.json does not vouch for, one with nothing packed, and
    // a split that would replace its input: refused, naming the package, nothing written.
    let bad_dir = d.join("bad");
    std::fs::create_dir(&bad_dir).unwrap();
    let damaged = make_conda(
        &venv,
        d,
        serde_json::json!({"out": bad_dir, "format": ".conda", "files": [
            {"path": "lib/libcut.so.1", "file": lib, "mode": 0o755, "bad_hash": true}]}),
    );
    let plain_dir = d.join("plain");
    std::fs::create_dir(&plain_dir).unwrap();
    let unpacked = make_conda(
        &venv,
        d,
        serde_json::json!({"out": plain_dir, "format": ".conda", "files": [
            {"path": "lib/libcut.so.1", "file": crate::prune_package::fat_library(d),
             "mode": 0o755}]}),
    );
    for (input, why) in [
        (&damaged, "does not match info/paths.json"),
        (&unpacked, "no binary in it is packed"),
        (&fat, ""),
    ] {
        let out = d.join("out");
        if why.is_empty() {
            // Into the folder it lies in: the project's package would replace it. Refused
            // before anything is written; the input as it was.
            let folder = input.parent().unwrap();
            let before = std::fs::read(input).unwrap();
            let (code, err) = split_into(input, folder);
            assert_eq!(code, 1, "{err}");
            assert!(std::fs::read(input).unwrap() == before);
            assert_eq!(std::fs::read_dir(folder).unwrap().count(), 1, "{err}");
            continue;
        }
        let (code, err) = split_into(input, &out);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(why) && err.contains("cutfix-1.0"), "{err}");
        let left = std::fs::read_dir(&out).map(|r| r.count()).unwrap_or(0);
        assert_eq!(left, 0, "{why}: files left in {}", out.display());
    }
}
