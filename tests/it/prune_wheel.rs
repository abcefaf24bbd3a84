//! `fatpack prune` of a Python wheel, with the installers that read the result: pip installs
//! the fat wheel from a folder that also holds its variant wheels (it ignores those), the
//! PEP 825 reference resolver (variantlib) picks the variant for a matching GPU and the fat
//! wheel elsewhere, local labels are canonical; and every hostile or damaged wheel is
//! refused with nothing written, in bounded memory.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

use crate::prune_package::fat_library;

/// A fat wheel at version 1.0 (in `d/src`), and a new folder `d/name` holding a copy of it.
fn fat_wheel_in_folder(d: &Path, name: &str) -> (PathBuf, PathBuf) {
    let lib = fat_library(d);
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    let fat = lib_wheel(&src, &lib, "1.0");
    let folder = d.join(name);
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&fat, folder.join(fat.file_name().unwrap())).unwrap();
    (fat, folder)
}

/// What variantlib's resolution picks from `index` (a variants.json) for a GPU: a label,
/// or `fat`.
pub(crate) fn resolve(venv: &Path, index: &Path, gpu: &str) -> String {
    let (code, out, err) = run(Command::new(venv.join("bin/python"))
        .arg(packages().join("resolve_variant.py"))
        .arg(index)
        .arg(gpu));
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

pub(crate) fn packages() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/packages")
}

/// Writes a wheel from `spec` (tests/it/packages/make_wheel.py says what it holds).
pub(crate) fn make_wheel(dir: &Path, spec: serde_json::Value) -> PathBuf {
    let wheel = PathBuf::from(spec["wheel"].as_str().unwrap());
    let spec_file = dir.join("spec.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let (code, _, err) = run(Command::new("python3")
        .arg(packages().join("make_wheel.py"))
        .arg(&spec_file));
    assert_eq!(code, 0, "{err}");
    wheel
}

/// The usual wheel: a module that loads `lib`, at `version`, named as its version says.
pub(crate) fn lib_wheel(dir: &Path, lib: &Path, version: &str) -> PathBuf {
    make_wheel(
        dir,
        serde_json::json!({
            "wheel": dir.join(format!("cutfix-{version}-py3-none-linux_x86_64.whl")),
            "version": version,
            "members": [
                {"name": "cutfix/__init__.py", "text": "import ctypes, os\nlib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libcut.so'))\n"},
                {"name": "cutfix/libcut.so", "file": lib, "mode": 0o755},
            ],
        }),
    )
}

fn prune(args: &[&str], input: &Path, out: &Path) -> (i32, String) {
    prune_with(args, input, out)
}

pub(crate) fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A venv with a current pip, uv and variantlib (the PEP 825 reference implementation).
pub(crate) fn venv(dir: &Path) -> PathBuf {
    venv_with(dir, &["pip>=25.3", "variantlib==0.2.2", "uv==0.13.10"])
}

#[test]
fn pip_installs_the_fat_wheel_and_variantlib_picks_the_variant() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (fat, links) = fat_wheel_in_folder(d, "links");
    // 8.0 alone would be picked by NVIDIA's provider on 8.6-8.9 too, which it does not
    // serve as the fat wheel does: refused, naming the `--for` that covers them.
    let (code, err) = prune(&["--for", "8.0"], &fat, &links);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("prune --for 8.0,8.6,8.7,8.8,8.9"), "{err}");
    for caps in ["9.0", "8.0,8.6,8.9"] {
        let (code, err) = prune(&["--for", caps], &fat, &links);
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(
        names_in(&links),
        [
            "cutfix-1.0-py3-none-linux_x86_64-sm80.sm86.sm89.whl",
            "cutfix-1.0-py3-none-linux_x86_64-sm90.whl",
            "cutfix-1.0-py3-none-linux_x86_64.whl",
        ]
    );
    let venv = venv(d);
    // Today's pip: the variant wheels are not wheels it reads; unpinned and pinned alike it
    // installs the fat wheel, which runs everywhere the build ran.
    for want in ["cutfix", "cutfix==1.0"] {
        let (code, out, err) = run(Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--dry-run",
                "--no-index",
                "--no-deps",
                "--find-links",
            ])
            .arg(&links)
            .arg(want)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"));
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("cutfix-1.0-py3-none-linux_x86_64.whl"),
            "{want}: {out}"
        );
        assert!(
            !out.contains("sm90") && !out.contains("sm86"),
            "{want}: {out}"
        );
    }
    // uv too: it installs the fat wheel (no variant.json, every arch in the library).
    let target = d.join("uv-target");
    let (code, _, err) = run(Command::new(venv.join("bin/uv"))
        .args([
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--find-links",
        ])
        .arg(&links)
        .arg("--target")
        .arg(&target)
        .arg("cutfix==1.0"));
    assert_eq!(code, 0, "{err}");
    assert!(target.join("cutfix-1.0.dist-info/WHEEL").exists());
    assert!(!target.join("cutfix-1.0.dist-info/variant.json").exists());
    let lib_archs = archs_of(&target.join("cutfix/libcut.so")).len();
    assert!(lib_archs > 2, "uv installed a pruned library");
    // The index-level variants file, as variantlib makes it from the variant wheels (it
    // reads and validates each wheel's variant.json).
    let (code, _, err) = run(Command::new(venv.join("bin/variantlib"))
        .args(["generate-index-json", "-d"])
        .arg(&links));
    assert_eq!(code, 0, "{err}");
    let index = links.join("cutfix-1.0-variants.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index).unwrap()).unwrap();
    assert_eq!(
        doc["variants"]["sm90"]["nvidia"]["sm_arch"],
        serde_json::json!(["90_real"])
    );
    assert_eq!(
        doc["variants"]["sm80.sm86.sm89"]["nvidia"]["sm_arch"],
        serde_json::json!(["80_real", "86_real", "87_real", "88_real", "89_real"])
    );
    // A variant-aware resolver, the machine described as NVIDIA's provider describes it:
    // on every GPU, a variant that gives it what the fat wheel gives it, or the fat wheel.
    for (gpu, want) in [
        ("50", "fat"),
        ("61", "fat"),
        ("70", "fat"),
        ("75", "fat"),
        ("80", "sm80.sm86.sm89"),
        ("86", "sm80.sm86.sm89"),
        ("87", "sm80.sm86.sm89"),
        ("89", "sm80.sm86.sm89"),
        ("90", "sm90"),
        ("100", "fat"),
        ("120", "fat"),
        ("121", "fat"),
    ] {
        assert_eq!(resolve(&venv, &index, gpu), want, "GPU {gpu}");
    }
    // uv's own variant mode over the index fatpack writes, its NVIDIA provider forced to
    // each GPU (and to none): what it installs runs there exactly what the fat wheel runs.
    let idx = d.join("idx");
    fatpack_index(&links, &idx);
    let fat_lib = d.join("libcut.so");
    for (cap, label) in [
        ("5.0", None),
        ("6.1", None),
        ("7.0", None),
        ("7.5", None),
        ("8.0", Some("sm80.sm86.sm89")),
        ("8.6", Some("sm80.sm86.sm89")),
        ("8.9", Some("sm80.sm86.sm89")),
        ("9.0", Some("sm90")),
        ("10.0", None),
        ("12.0", None),
        ("12.1", None),
        ("", None),
    ] {
        let target = d.join(format!("uv-variant-{cap}"));
        let mut c = uv_variant_install(&venv, &d.join("uv-cache"));
        c.arg("--index-url")
            .arg(format!("file://{}/simple", idx.display()))
            .arg("--target")
            .arg(&target)
            .arg("cutfix");
        match cap {
            "" => c.env("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", ""),
            _ => c
                .env("NV_VARIANT_PROVIDER_FORCE_SM_ARCH", cap)
                .env("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "13.0"),
        };
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 0, "uv on {cap:?}: {err}");
        let variant = std::fs::read_to_string(target.join("cutfix-1.0.dist-info/variant.json"));
        assert_eq!(
            variant.is_ok(),
            label.is_some(),
            "uv on {cap:?}: a variant installed or not"
        );
        let lib = target.join("cutfix/libcut.so");
        let caps: &[&str] = match cap {
            "" => &["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"],
            c => &[c],
        };
        for c in caps {
            crate::split_wheel::serves_lib(&lib, &fat_lib, c, &format!("uv on {cap:?}"));
        }
    }
}

#[test]
fn labels_are_canonical_and_do_not_stack() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let fat = lib_wheel(d, &lib, "1.0+cu130");
    let name = |args: &[&str], input: &Path| {
        let out = tempfile::tempdir_in(d).unwrap();
        let (code, err) = prune(args, input, out.path());
        assert_eq!(code, 0, "{args:?}: {err}");
        let names = names_in(out.path());
        assert_eq!(names.len(), 1);
        let path = d.join(&names[0]);
        std::fs::rename(out.path().join(&names[0]), &path).unwrap();
        (names[0].clone(), path)
    };
    // (8.6: a variant NVIDIA's provider picks only where it serves as the fat wheel does.)
    let (a, _) = name(&["--for", "9.0,8.6"], &fat);
    let (b, _) = name(&["--for", "86;sm_90"], &fat);
    assert_eq!(
        (a.as_str(), b.as_str()),
        (
            "cutfix-1.0+cu130-py3-none-linux_x86_64-sm86.sm90.whl",
            a.as_str()
        )
    );
    let (keep, _) = name(&["--keep", "sm_90"], &fat);
    assert_eq!(keep, "cutfix-1.0+cu130-py3-none-linux_x86_64-k.s90.whl");
    let (dead, _) = name(&["--dead"], &fat);
    assert_eq!(dead, "cutfix-1.0+cu130-py3-none-linux_x86_64-live.whl");
    // Local labels: sorted, one spelling, and a wheel pruned again gets one label.
    let (l1, pruned) = name(&["--local-label", "--for", "9.0,8.0"], &fat);
    assert_eq!(l1, "cutfix-1.0+cu130.sm80.sm90-py3-none-linux_x86_64.whl");
    let (l2, _) = name(&["--local-label", "--for", "9.0"], &pruned);
    assert_eq!(l2, "cutfix-1.0+cu130.sm90-py3-none-linux_x86_64.whl");
    let (l3, _) = name(&["--local-label", "--dead"], &fat);
    assert_eq!(l3, "cutfix-1.0+cu130.live-py3-none-linux_x86_64.whl");
    // A variant wheel pruned again: one variant label.
    let (_, v) = name(&["--for", "9.0,8.6"], &fat);
    let (v2, v90) = name(&["--for", "9.0"], &v);
    assert_eq!(v2, "cutfix-1.0+cu130-py3-none-linux_x86_64-sm90.whl");
    // ... but not for a GPU it has nothing of its own for: the label would say 8.0 and the
    // property 9.0 (`90_real`), and the bytes serve only 9.0.
    let out = tempfile::tempdir_in(d).unwrap();
    let (code, err) = prune(&["--for", "8.0"], &v90, out.path());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("gives GPU 8.0 no code of its own (it serves 9.0)"),
        "{err}"
    );
    assert!(names_in(out.path()).is_empty());
}

/// A hostile or damaged wheel: refused naming what is wrong, nothing written beside the
/// output or the input, the input untouched.
#[test]
fn hostile_wheels_are_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let info = "cutfix-1.0.dist-info";
    let base = |extra: serde_json::Value| {
        let mut members = vec![
            serde_json::json!({"name": "cutfix/__init__.py", "text": "x = 1\n"}),
            serde_json::json!({"name": "cutfix/libcut.so", "file": lib}),
        ];
        members.extend(extra.as_array().unwrap().iter().cloned());
        members
    };
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "dotdot",
            serde_json::json!({"members": base(serde_json::json!([{"name": "../escape", "text": "x"}]))}),
            "`..` component",
        ),
        (
            "abs",
            serde_json::json!({"members": base(serde_json::json!([{"name": "/abs/x", "text": "x"}]))}),
            "absolute path",
        ),
        (
            "inner",
            serde_json::json!({"members": base(serde_json::json!([{"name": "a/../../b", "text": "x"}]))}),
            "`..` component",
        ),
        (
            "backslash",
            serde_json::json!({"members": base(serde_json::json!([{"name": "demo\\..\\..\\x.so", "text": "x"}]))}),
            "backslash",
        ),
        (
            "dup",
            serde_json::json!({"members": base(serde_json::json!([{"name": "cutfix/__init__.py", "text": "y = 2\n", "in_record": false}]))}),
            "twice",
        ),
        (
            "hash",
            serde_json::json!({"members": base(serde_json::json!([{"name": "cutfix/data.txt", "text": "data", "bad_hash": true}]))}),
            "does not match RECORD",
        ),
        (
            "libhash",
            serde_json::json!({"members": [
                {"name": "cutfix/__init__.py", "text": "x = 1\n"},
                {"name": "cutfix/libcut.so", "file": lib, "bad_hash": true},
            ]}),
            "cutfix/libcut.so does not match RECORD",
        ),
        (
            "unlisted",
            serde_json::json!({"members": base(serde_json::json!([{"name": "cutfix/extra.py", "text": "x", "in_record": false}]))}),
            "not in RECORD",
        ),
        (
            "missing",
            serde_json::json!({"members": base(serde_json::json!([])), "extra_record": ["cutfix/gone.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"]}),
            "not in the wheel",
        ),
        (
            "md5",
            serde_json::json!({"members": base(serde_json::json!([{"name": "cutfix/m.py", "text": "x", "in_record": false}])), "extra_record": ["cutfix/m.py,md5=xx,1"]}),
            "want sha256",
        ),
        (
            "norecord",
            serde_json::json!({"members": base(serde_json::json!([])), "no_record": true}),
            "no cutfix-1.0.dist-info/RECORD",
        ),
        (
            "link",
            serde_json::json!({"members": base(serde_json::json!([{"name": "cutfix/passwd", "symlink": "../../../etc/passwd"}]))}),
            "outside the package",
        ),
    ];
    for (case, mut spec, want) in cases {
        let case_dir = d.join(case);
        std::fs::create_dir(&case_dir).unwrap();
        spec["wheel"] = serde_json::json!(case_dir.join("cutfix-1.0-py3-none-linux_x86_64.whl"));
        spec["version"] = serde_json::json!("1.0");
        let wheel = make_wheel(&case_dir, spec);
        std::fs::remove_file(case_dir.join("spec.json")).unwrap();
        let before = std::fs::read(&wheel).unwrap();
        let out = case_dir.join("out");
        std::fs::create_dir(&out).unwrap();
        let (code, err) = prune(&["--for", "9.0"], &wheel, &out);
        assert_eq!(code, 1, "{case}: {err}");
        assert!(
            err.contains(want) && err.contains("cutfix-1.0-py3"),
            "{case}: {err}"
        );
        assert!(names_in(&out).is_empty(), "{case}: {:?}", names_in(&out));
        assert_eq!(
            names_in(&case_dir),
            ["cutfix-1.0-py3-none-linux_x86_64.whl", "out"],
            "{case}"
        );
        assert!(
            std::fs::read(&wheel).unwrap() == before,
            "{case}: input changed"
        );
    }
    let _ = info;
}

/// A symlink member stays a symlink with its mode; an executable stays executable.
#[test]
fn symlinks_and_modes_stay() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let wheel = make_wheel(
        d,
        serde_json::json!({
            "wheel": d.join("cutfix-1.0-py3-none-linux_x86_64.whl"),
            "version": "1.0",
            "members": [
                {"name": "cutfix/libcut.so.1", "file": lib, "mode": 0o755},
                {"name": "cutfix/libcut.so", "symlink": "libcut.so.1", "mode": 0o777},
                {"name": "cutfix/tool", "text": "#!/bin/sh\n", "mode": 0o750},
            ],
        }),
    );
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let (code, err) = prune(&["--for", "9.0"], &wheel, &out);
    assert_eq!(code, 0, "{err}");
    let pruned = out.join("cutfix-1.0-py3-none-linux_x86_64-sm90.whl");
    let script = "import sys, zipfile\nfor i in zipfile.ZipFile(sys.argv[1]).infolist(): print(i.filename, oct(i.external_attr >> 16))";
    let (code, listing, err) = run(Command::new("python3").args(["-c", script]).arg(&pruned));
    assert_eq!(code, 0, "{err}");
    for want in [
        "cutfix/libcut.so.1 0o100755",
        "cutfix/libcut.so 0o120777",
        "cutfix/tool 0o100750",
    ] {
        assert!(listing.lines().any(|l| l == want), "{want}: {listing}");
    }
}

/// A member of 1 GiB streams through: the prune's peak memory stays under 100 MB.
#[test]
fn a_gib_member_prunes_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let wheel = make_wheel(
        d,
        serde_json::json!({
            "wheel": d.join("cutfix-1.0-py3-none-linux_x86_64.whl"),
            "version": "1.0",
            "members": [
                {"name": "cutfix/libcut.so", "file": lib},
                {"name": "cutfix/zeros.bin", "zeros": 1u64 << 30},
            ],
        }),
    );
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let (code, _, err) = run(Command::new("/usr/bin/time")
        .args(["-f", "peak-kib %M"])
        .arg(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(&wheel)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    let peak: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("peak-kib "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {err}"));
    assert!(peak < 100 * 1000, "peak RSS {peak} KiB");
    assert_eq!(
        names_in(&out),
        ["cutfix-1.0-py3-none-linux_x86_64-sm90.whl"]
    );
}

/// A fat binary whose device code is damaged fails the whole package (alone, in a folder,
/// in a wheel), rather than shipping unpruned under a label that says it was pruned.
#[test]
fn a_damaged_fat_binary_fails_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let damaged = d.join("libdamaged.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    let (code, out, err) = run(Command::new("readelf").args(["-SW"]).arg(&lib));
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains(" .nv_fatbin "))
        .expect(".nv_fatbin");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields.iter().position(|f| *f == ".nv_fatbin").unwrap();
    let off = usize::from_str_radix(fields[at + 3], 16).unwrap();
    // The first container's header size: past the end of the section.
    bytes[off + 4..off + 8].copy_from_slice(&[0xff, 0xff, 0, 0]);
    bytes[off + 8..off + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&damaged, &bytes).unwrap();
    let (code, err) = prune(&["--for", "9.0"], &damaged, &d.join("alone.so"));
    assert_eq!(code, 1, "alone: {err}");
    let tree = d.join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(&damaged, tree.join("lib/libdamaged.so")).unwrap();
    let (code, err) = prune(&["--for", "9.0"], &tree, &d.join("tree-out"));
    assert_eq!(code, 1, "folder: {err}");
    assert!(err.contains("libdamaged.so"), "{err}");
    assert!(!d.join("tree-out").exists());
    let wheel = lib_wheel(d, &damaged, "1.0");
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let (code, err) = prune(&["--for", "9.0"], &wheel, &out);
    assert_eq!(code, 1, "wheel: {err}");
    assert!(err.contains("cutfix/libcut.so"), "{err}");
    assert!(names_in(&out).is_empty());
}

/// Local-label wheels beside the fat one win everywhere with pip (a local version sorts
/// above its public one, and `==1.0` matches it): `fatpack index` serves each label from
/// an index of its own, and the generic index holds the fat wheel, the variant wheels and
/// the versions' variants.json.
#[test]
fn local_label_wheels_get_an_index_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (fat, dist) = fat_wheel_in_folder(d, "dist");
    for args in [
        &["--for", "9.0"][..],
        &["--for", "9.0", "--local-label"],
        &["--for", "8.0", "--local-label"],
    ] {
        let (code, err) = prune(args, &fat, &dist);
        assert_eq!(code, 0, "{args:?}: {err}");
        // Written beside the fat wheel, a local-label wheel is said to be where pip and uv
        // take it on every machine.
        assert_eq!(
            err.contains(
                "warning: it is beside the fat wheel cutfix-1.0-py3-none-linux_x86_64.whl"
            ),
            args.contains(&"--local-label"),
            "{args:?}: {err}"
        );
    }
    let venv = venv(d);
    let pip = |args: &[&str]| {
        let (code, out, err) = run(Command::new(venv.join("bin/pip"))
            .args(["install", "--no-deps", "--disable-pip-version-check"])
            .args(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    // The measured reason: in one folder pip takes a local-label variant, pinned or not.
    for want in ["cutfix", "cutfix==1.0"] {
        let links = dist.to_str().unwrap();
        let out = pip(&["--dry-run", "--no-index", "--find-links", links, want]);
        assert!(out.contains("Would install cutfix-1.0+sm"), "{want}: {out}");
    }
    let site = d.join("site");
    fatpack_index(&dist, &site);
    let url = |folder: &str| format!("file://{}", site.join(folder).display());
    let out = pip(&["--dry-run", "--index-url", &url("simple"), "cutfix"]);
    assert!(out.contains("Would install cutfix-1.0\n"), "{out}");
    // The per-variant index: pip installs the 9.0 build, which imports and holds only what
    // a 9.0 GPU runs.
    pip(&["-q", "--index-url", &url("sm90/simple"), "cutfix"]);
    let (code, out, err) = run(Command::new(venv.join("bin/python")).args([
        "-c",
        "import cutfix, importlib.metadata as m; print(m.version('cutfix'), cutfix.__file__)",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1.0+sm90 "), "{out}");
    let installed = Path::new(out.split_whitespace().nth(1).unwrap()).with_file_name("libcut.so");
    let archs = archs_of(&installed);
    assert!(
        archs.iter().all(|a| a == "sm_90" || a == "compute_80"),
        "{archs:?}"
    );
    // The generic index's variants.json is what the variant-aware resolver reads.
    let index = site.join("files/cutfix-1.0-variants.json");
    for (gpu, want) in [("90", "sm90"), ("80", "fat")] {
        assert_eq!(resolve(&venv, &index, gpu), want, "GPU {gpu}");
    }
    // An existing output is refused.
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("index")
        .arg(&dist)
        .arg("-o")
        .arg(&site));
    assert_ne!(code, 0, "{err}");
}

/// `inspect` reads a wheel and a folder: one report per binary with device code (named
/// `wheel!member`), a package summary, and with `--for` what prune would keep, which is
/// what prune then keeps.
#[test]
fn inspect_reads_wheels_and_folders() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (fat, _) = fat_wheel_in_folder(d, "links");
    let tree = d.join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(fat_library(d), tree.join("lib/libcut.so")).unwrap();
    std::fs::write(tree.join("README"), "not a binary\n").unwrap();
    for (input, member) in [
        (fat.clone(), format!("{}!cutfix/libcut.so", fat.display())),
        (
            tree.clone(),
            tree.join("lib/libcut.so").display().to_string(),
        ),
    ] {
        let (code, out, err) = run(Command::new(fatpack_bin())
            .args(["inspect", "--json", "--for", "9.0"])
            .arg(&input));
        assert_eq!(code, 0, "{err}");
        let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
        let reports = reports.as_array().unwrap();
        assert_eq!(reports.len(), 1, "{out}");
        assert_eq!(reports[0]["path"], member.as_str());
        assert_eq!(reports[0]["would_keep"]["entries"], 5, "{out}");
        let (code, table, err) = run(Command::new(fatpack_bin())
            .args(["inspect", "--for", "9.0"])
            .arg(&input));
        assert_eq!(code, 0, "{err}");
        assert!(
            table.contains(&format!(
                "package {}: 1 file with device code",
                input.display()
            )),
            "{table}"
        );
        assert!(
            table.contains("would keep of") && table.contains(": 5 of 25 entries"),
            "{table}"
        );
    }
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let (code, err) = prune(&["--for", "9.0"], &fat, &out);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("(5 of 25 entries kept)"), "{err}");
}
