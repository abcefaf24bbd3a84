//! `fatpack prune` of a conda package (`.conda` and `.tar.bz2`), with the tools that read
//! the result: py-rattler indexes a local channel holding the fat package and its variants,
//! solves for machines of several `__cuda_arch` (CEP 46) and installs; conda-package-handling
//! wrote the inputs. Hostile or damaged packages are refused with nothing written.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::prune_package::fat_library;

fn packages() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/packages")
}

/// A venv with py-rattler and conda-package-handling.
pub(crate) fn venv(dir: &Path) -> PathBuf {
    venv_with(
        dir,
        &["py-rattler==0.28.0", "conda-package-handling==2.6.0"],
    )
}

/// Writes a conda package from `spec` (tests/it/packages/make_conda.py says what it holds).
pub(crate) fn make_conda(venv: &Path, dir: &Path, spec: serde_json::Value) -> PathBuf {
    let spec_file = dir.join("spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let (code, out, err) = run(Command::new(venv.join("bin/python"))
        .arg(packages().join("make_conda.py"))
        .arg(&spec_file));
    std::fs::remove_file(&spec_file).unwrap();
    assert_eq!(code, 0, "{err}");
    PathBuf::from(out.trim())
}

fn prune(args: &[&str], input: &Path, out: &Path) -> (i32, String) {
    prune_with(args, input, out)
}

/// The build py-rattler's solver picks for `specs` (`cutfix` first, `;` between specs) on a
/// machine of `arch` (`-`: none).
pub(crate) fn solve(
    venv: &Path,
    channel: &Path,
    specs: &str,
    arch: &str,
    install: Option<&Path>,
) -> String {
    solve_env(venv, channel, specs, arch, install, &[])
}

/// [`solve`] with `env` set (`CONDA_OVERRIDE_CUDA_ARCH` for `arch` `detect`); the machine's
/// own overrides never leak into a cell.
fn solve_env(
    venv: &Path,
    channel: &Path,
    specs: &str,
    arch: &str,
    install: Option<&Path>,
    env: &[(&str, &str)],
) -> String {
    let mut c = Command::new(venv.join("bin/python"));
    c.env_remove("CONDA_OVERRIDE_CUDA_ARCH")
        .env_remove("CONDA_OVERRIDE_CUDA")
        .envs(env.iter().copied());
    c.arg(packages().join("solve_conda.py"))
        .arg(channel)
        .arg(specs)
        .arg(arch);
    if let Some(p) = install {
        c.arg(p);
    }
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "{arch}: {err}");
    out.trim().to_string()
}

fn files(lib: &Path) -> serde_json::Value {
    serde_json::json!([
        {"path": "lib/libcut.so.1", "file": lib, "mode": 0o755},
        {"path": "lib/libcut.so", "symlink": "libcut.so.1"},
        {"path": "share/doc/cutfix/README", "text": "cutfix\n"},
    ])
}

#[test]
fn a_channel_serves_each_gpu_its_variant_and_the_rest_the_fat_package() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let venv = venv(d);
    for format in [".conda", ".tar.bz2"] {
        let channel = d.join(format!("channel{format}"));
        let subdir = channel.join("linux-64");
        std::fs::create_dir_all(&subdir).unwrap();
        // The metapackage as conda-forge publishes it: one version per compute capability,
        // installable only where `__cuda_arch` is that capability.
        for cap in ["7.5", "8.0", "8.6", "9.0", "10.0"] {
            make_conda(
                &venv,
                d,
                serde_json::json!({"out": subdir, "format": format, "name": "cuda-arch",
                    "version": cap, "build": "0", "files": [],
                    "constrains": [format!("__cuda_arch {cap}")]}),
            );
        }
        let fat = make_conda(
            &venv,
            d,
            serde_json::json!({"out": subdir, "format": format, "files": files(&lib)}),
        );
        for caps in ["9.0", "8.0"] {
            let (code, err) = prune(&["--for", caps], &fat, &subdir);
            assert_eq!(code, 0, "{format} {caps}: {err}");
            assert!(err.contains(&format!("cuda-arch =={caps}")), "{err}");
        }
        let label = |l: &str| format!("cutfix-1.0-h0_0{l}{format}");
        assert!(subdir.join(label("_sm90")).exists() && subdir.join(label("_sm80")).exists());
        // Every GPU gets a variant that runs there as the fat package does, or the fat one
        // (8.6 runs sm_86 from the fat package, sm_80 from the 8.0 variant: the fat one).
        // Without `__cuda_arch` (a CPU build box, a client without CEP 46) only the fat
        // package installs, a pin of `cuda-arch` alone included; naming the GPU
        // (`CONDA_OVERRIDE_CUDA_ARCH`, which gives the solver `__cuda_arch`) is the cell
        // with that GPU.
        for (specs, arch, want) in [
            ("cutfix", "5.0", "h0_0"),
            ("cutfix", "6.1", "h0_0"),
            ("cutfix", "7.0", "h0_0"),
            ("cutfix", "7.5", "h0_0"),
            ("cutfix", "8.0", "h0_0_sm80"),
            ("cutfix", "8.6", "h0_0"),
            ("cutfix", "8.9", "h0_0"),
            ("cutfix", "9.0", "h0_0_sm90"),
            ("cutfix", "10.0", "h0_0"),
            ("cutfix", "12.0", "h0_0"),
            ("cutfix", "12.1", "h0_0"),
            ("cutfix", "-", "h0_0"),
            ("cutfix;cuda-arch ==9.0", "-", "h0_0"),
            ("cutfix;cuda-arch ==9.0", "9.0", "h0_0_sm90"),
        ] {
            assert_eq!(
                solve(&venv, &channel, specs, arch, None),
                want,
                "{format}: {specs} on {arch}"
            );
        }
        // py-rattler's own detection, as conda users name a GPU: `CONDA_OVERRIDE_CUDA_ARCH`
        // gives the variant, an empty override (no GPU) the fat package.
        for (arch_env, want) in [("9.0", "h0_0_sm90"), ("", "h0_0")] {
            let cuda = if arch_env.is_empty() { "" } else { "13.0" };
            let env = [
                ("CONDA_OVERRIDE_CUDA_ARCH", arch_env),
                ("CONDA_OVERRIDE_CUDA", cuda),
            ];
            assert_eq!(
                solve_env(&venv, &channel, "cutfix", "detect", None, &env),
                want,
                "{format}: detected with CONDA_OVERRIDE_CUDA_ARCH={arch_env:?}"
            );
        }
        // Installed on a 9.0 machine: the files are what paths.json says, the library holds
        // only what 9.0 runs, the symlink is a symlink.
        let prefix = d.join(format!("prefix{format}"));
        assert_eq!(
            solve(&venv, &channel, "cutfix", "9.0", Some(&prefix)),
            "h0_0_sm90"
        );
        let meta = std::fs::read_dir(prefix.join("conda-meta"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
            .unwrap();
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(meta).unwrap()).unwrap();
        for p in meta["paths_data"]["paths"].as_array().unwrap() {
            let at = prefix.join(p["_path"].as_str().unwrap());
            if p["path_type"] == "softlink" {
                assert!(
                    at.symlink_metadata().unwrap().file_type().is_symlink(),
                    "{at:?}"
                );
                continue;
            }
            let (_, sum, _) = run(Command::new("sha256sum").arg(&at));
            assert_eq!(
                sum.split_whitespace().next(),
                p["sha256"].as_str(),
                "{at:?}"
            );
        }
        let archs = archs_of(&prefix.join("lib/libcut.so.1"));
        assert!(
            archs.iter().all(|a| a == "sm_90" || a == "compute_80"),
            "{archs:?}"
        );
        // Same input, same bytes.
        let again = d.join(format!("again{format}"));
        std::fs::create_dir(&again).unwrap();
        assert_eq!(prune(&["--for", "9.0"], &fat, &again).0, 0);
        assert!(
            std::fs::read(again.join(label("_sm90"))).unwrap()
                == std::fs::read(subdir.join(label("_sm90"))).unwrap()
        );
    }
}

#[test]
fn hostile_conda_packages_are_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let venv = venv(d);
    let lib_file = serde_json::json!({"path": "lib/libcut.so.1", "file": lib});
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "hash",
            serde_json::json!({"files": [lib_file, {"path": "a.txt", "text": "a", "bad_hash": true}]}),
            "a.txt does not match info/paths.json",
        ),
        (
            "libhash",
            serde_json::json!({"files": [{"path": "lib/libcut.so.1", "file": lib, "bad_hash": true}]}),
            "lib/libcut.so.1 does not match",
        ),
        (
            "unlisted",
            serde_json::json!({"files": [lib_file, {"path": "b.txt", "text": "b", "in_paths": false}]}),
            "b.txt is not in info/paths.json",
        ),
        (
            "missing",
            serde_json::json!({"files": [lib_file], "extra_paths": [{"_path": "gone", "path_type": "hardlink", "sha256": "00", "size_in_bytes": 0}]}),
            "lists gone, which is not in the package",
        ),
        (
            "link",
            serde_json::json!({"files": [lib_file, {"path": "lib/passwd", "symlink": "../../etc/passwd"}]}),
            "outside the package",
        ),
        (
            "dotdot",
            serde_json::json!({"format": ".tar.bz2", "files": [lib_file], "raw_entries": [{"name": "../escape", "text": "x"}]}),
            "`..` component",
        ),
        (
            "abs",
            serde_json::json!({"format": ".tar.bz2", "files": [lib_file], "raw_entries": [{"name": "/abs/x", "text": "x"}]}),
            "absolute path",
        ),
        (
            "dup",
            serde_json::json!({"format": ".tar.bz2", "files": [lib_file], "raw_entries": [{"name": "lib/libcut.so.1", "text": "x"}]}),
            "twice",
        ),
    ];
    for (case, mut spec, want) in cases {
        let case_dir = d.join(case);
        let out = case_dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        spec["out"] = serde_json::json!(case_dir);
        let pkg = make_conda(&venv, d, spec);
        let before = std::fs::read(&pkg).unwrap();
        let (code, err) = prune(&["--for", "9.0"], &pkg, &out);
        assert_eq!(code, 1, "{case}: {err}");
        assert!(
            err.contains(want) && err.contains("cutfix-1.0-h0_0"),
            "{case}: {err}"
        );
        let left: Vec<_> = std::fs::read_dir(&case_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "{case}: {left:?}");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "{case}");
        assert!(
            std::fs::read(&pkg).unwrap() == before,
            "{case}: input changed"
        );
    }
}
