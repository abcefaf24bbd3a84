//! `fatpack split` of a Debian package with a packed library: a host package, one device
//! package per architecture and the package under the input's name that depends on all,
//! read by dpkg-deb and md5sum and installed by dpkg into fresh roots, for every GPU of the
//! matrix as an administrator picks for it from split's own report.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::prune_deb::{build_deb, cutapp_deb, dpkg};
use crate::prune_wheel::names_in;
use crate::split_wheel::{kept, packed_library, serves_lib};

const LIBDIR: &str = "usr/lib/x86_64-linux-gnu";

/// The packs installed beside `name` in `dir` (by the suffix after `name.`).
fn packs(dir: &Path, name: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            n.strip_prefix(&format!("{name}."))
                .and_then(|r| r.strip_suffix(".fatpack"))
                .filter(|r| !r.contains('.'))
                .map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// The invariant for one GPU, through both names dpkg installed the library under.
fn serves(root: &Path, fat_lib: &Path, cap: &str, cell: &str) {
    for name in ["libcut.so.1", "libcut.so.1.0"] {
        serves_lib(&root.join(LIBDIR).join(name), fat_lib, cap, cell);
    }
}

fn field(deb: &Path, f: &str) -> String {
    let (code, out, err) = run(Command::new("dpkg-deb").arg("--field").arg(deb).arg(f));
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

/// dpkg -i of `debs` (names in `out`) into a fresh root.
fn install(d: &Path, out: &Path, cell: &str, debs: &[String]) -> (i32, PathBuf, String) {
    let root = d.join(format!("root-{}", cell.replace([' ', '.'], "_")));
    let paths: Vec<PathBuf> = debs.iter().map(|n| out.join(n)).collect();
    let mut args = vec!["-i"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let (code, o, err) = dpkg(&root, &args, None);
    (code, root, format!("{o}{err}"))
}

#[test]
fn a_split_deb_installs_with_dpkg_for_every_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = packed_library(d);
    let fat = build_deb(d, &lib, "xz", &|s| s.to_string());
    let out = d.join("out");
    let (code, report) = split_into(&fat, &out);
    assert_eq!(code, 0, "{report}");
    let deb = |p: &str| format!("libcut1{p}_1.0-1_amd64.deb");
    let labels = ["compute90", "sm75", "sm80", "sm86", "sm90"];
    let mut want: Vec<String> = labels.iter().map(|l| deb(&format!("-{l}"))).collect();
    want.push(deb("-host"));
    want.push(deb(""));
    want.sort();
    assert_eq!(names_in(&out), want, "{report}");

    // dpkg-deb reads each; md5sum agrees with each one's md5sums.
    assert_eq!(field(&out.join(deb("-host")), "Package"), "libcut1-host");
    assert_eq!(
        field(&out.join(deb("-host")), "Replaces"),
        "libcut1 (<< 1.0-1)"
    );
    assert_eq!(
        field(&out.join(deb("-sm90")), "Depends"),
        "libcut1-host (= 1.0-1)"
    );
    let all = field(&out.join(deb("")), "Depends");
    for l in labels {
        assert!(all.contains(&format!("libcut1-{l} (= 1.0-1)")), "{all}");
    }
    for n in &want {
        let x = d.join(format!("x-{n}"));
        let (code, _, err) = run(Command::new("dpkg-deb").arg("-R").arg(out.join(n)).arg(&x));
        assert_eq!(code, 0, "{n}: {err}");
        if *n == deb("") {
            // No files, so no md5sums (as dh_md5sums).
            assert!(!x.join("DEBIAN/md5sums").exists());
            continue;
        }
        let (code, text, err) = run(Command::new("md5sum")
            .args(["-c", "--quiet", "DEBIAN/md5sums"])
            .current_dir(&x));
        assert_eq!(code, 0, "{n}: {text}{err}");
    }
    // Same input, same bytes.
    let again = d.join("again");
    assert_eq!(split_into(&fat, &again).0, 0);
    for n in &want {
        assert!(
            std::fs::read(again.join(n)).unwrap() == std::fs::read(out.join(n)).unwrap(),
            "{n} differs between two splits"
        );
    }

    // The package under the input's name, and one that depends on it: everything, for
    // every GPU, under both names of the library.
    cutapp_deb(&d.join("app"), &out.join("cutapp.deb"));
    let mut everything = want.clone();
    everything.push("cutapp.deb".into());
    let (code, root, text) = install(d, &out, "everything", &everything);
    assert_eq!(code, 0, "{text}");
    let every_pack = ["compute_90", "sm_75", "sm_80", "sm_86", "sm_90"];
    assert_eq!(packs(&root.join(LIBDIR), "libcut.so.1"), every_pack);
    assert_eq!(packs(&root.join(LIBDIR), "libcut.so.1.0"), every_pack);
    for cap in ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0", "12.1"] {
        serves(&root, &lib, cap, "everything");
    }

    // Every GPU of the matrix: the host and the device packages split reports it loads
    // from (none: the package under the input's name, everything).
    for cap in [
        "5.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0", "12.1",
    ] {
        let line = format!("a GPU of compute capability {cap} loads from ");
        let debs: Vec<String> = match report.lines().find_map(|l| l.split_once(&line)) {
            Some((_, from)) => std::iter::once(deb("-host"))
                .chain(from.split(", ").map(|l| deb(&format!("-{l}"))))
                .collect(),
            None => want.clone(),
        };
        let cell = format!("GPU {cap}");
        let (code, root, text) = install(d, &out, &cell, &debs);
        assert_eq!(code, 0, "{cell}: {text}");
        serves(&root, &lib, cap, &cell);
    }

    // The host alone: what a GPU would load is listed as not installed. The package under
    // the input's name without its device packages: dpkg refuses to configure it.
    let (code, root, text) = install(d, &out, "host alone", &[deb("-host")]);
    assert_eq!(code, 0, "{text}");
    let (kept, missing) = kept(&root.join(LIBDIR).join("libcut.so.1"), "9.0");
    assert!(!kept.is_empty() && missing == kept, "{missing:?}");
    for name in ["libcut.so.1", "libcut.so.1.0"] {
        let hint =
            std::fs::read_to_string(root.join(LIBDIR).join(format!("{name}.fatpack-install")))
                .unwrap();
        assert!(
            hint.contains(".sm_90.fatpack\tlibcut1-sm90\tapt install libcut1-sm90=1.0-1\n"),
            "{hint}"
        );
    }
    let (code, _, text) = install(d, &out, "no devices", &[deb("-host"), deb("")]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("libcut1-sm90"), "{text}");
}
