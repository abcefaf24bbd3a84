//! `fatpack prune` of a Debian package, with Debian's own tools: dpkg-deb builds the fat
//! package and reads the variant back, md5sum checks its files, dpkg installs it into a
//! fresh root in place of the fat one and a package that depends on the fat one installs
//! beside it. Damaged or altered packages are refused with nothing written.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::prune_package::fat_library;

/// Builds `libcut1_1.0-1_amd64.deb` (compressed with `z`: gzip, xz, zstd) in `dir` with
/// dpkg-deb: the library, a symlink to it, a conffile; `md5sums` as dh_md5sums writes it,
/// then passed through `tamper`.
pub(crate) fn build_deb(
    dir: &Path,
    lib: &Path,
    z: &str,
    tamper: &dyn Fn(&str) -> String,
) -> PathBuf {
    let root = dir.join(format!("pkg-{z}"));
    let libdir = root.join("usr/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::copy(lib, libdir.join("libcut.so.1")).unwrap();
    std::os::unix::fs::symlink("libcut.so.1", libdir.join("libcut.so")).unwrap();
    // A second name for the library: dpkg-deb stores it as a tar hard link.
    std::fs::hard_link(libdir.join("libcut.so.1"), libdir.join("libcut.so.1.0")).unwrap();
    std::fs::write(root.join("etc/cut.conf"), "conf=1\n").unwrap();
    std::fs::write(root.join("DEBIAN/conffiles"), "/etc/cut.conf\n").unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        "Package: libcut1\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: t <t@example.org>\n\
         Installed-Size: 1700\nDescription: a fat library\n for the prune tests\n",
    )
    .unwrap();
    let (code, sums, err) = run(Command::new("md5sum")
        .arg("usr/lib/x86_64-linux-gnu/libcut.so.1")
        .arg("usr/lib/x86_64-linux-gnu/libcut.so.1.0")
        .current_dir(&root));
    assert_eq!(code, 0, "{err}");
    std::fs::write(root.join("DEBIAN/md5sums"), tamper(&sums)).unwrap();
    let out = dir.join(format!("{z}/libcut1_1.0-1_amd64.deb"));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let (code, _, err) = run(Command::new("dpkg-deb")
        .args(["--root-owner-group", &format!("-Z{z}"), "--build"])
        .arg(&root)
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    out
}

/// Builds `deb`: a package of no files that depends on `libcut1 (>= 1.0)` (as a program
/// linked against it would), from the folder `root`.
pub(crate) fn cutapp_deb(root: &Path, deb: &Path) {
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        "Package: cutapp\nVersion: 1\nArchitecture: all\nMaintainer: t <t@example.org>\n\
         Depends: libcut1 (>= 1.0)\nDescription: needs libcut1\n x\n",
    )
    .unwrap();
    let (code, _, err) = run(Command::new("dpkg-deb").arg("--build").arg(root).arg(deb));
    assert_eq!(code, 0, "{err}");
}

fn prune(input: &Path, out: &Path) -> (i32, String) {
    prune_with(&["--for", "9.0"], input, out)
}

/// dpkg with its database in `root` (made empty on first use).
pub(crate) fn dpkg(root: &Path, args: &[&str], deb: Option<&Path>) -> (i32, String, String) {
    let admin = root.join("var/lib/dpkg");
    if !admin.exists() {
        for d in ["info", "updates", "triggers"] {
            std::fs::create_dir_all(admin.join(d)).unwrap();
        }
        std::fs::write(admin.join("status"), "").unwrap();
        std::fs::write(admin.join("available"), "").unwrap();
    }
    let mut c = Command::new("dpkg");
    c.arg(format!("--root={}", root.display()))
        .args([
            "--force-not-root",
            "--force-script-chrootless",
            "--force-unsafe-io",
        ])
        .args(args);
    if let Some(d) = deb {
        c.arg(d);
    }
    run(&mut c)
}

#[test]
fn a_deb_variant_installs_in_place_of_the_fat_package() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    for z in ["xz", "gzip", "zstd"] {
        let fat = build_deb(d, &lib, z, &|s| s.to_string());
        let out = d.join(format!("out-{z}"));
        std::fs::create_dir(&out).unwrap();
        let (code, err) = prune(&fat, &out);
        assert_eq!(code, 0, "{z}: {err}");
        let variant = out.join("libcut1-sm90_1.0-1_amd64.deb");
        let field = |f: &str| {
            let (code, out, err) =
                run(Command::new("dpkg-deb").arg("--field").arg(&variant).arg(f));
            assert_eq!(code, 0, "{err}");
            out.trim().to_string()
        };
        assert_eq!(field("Package"), "libcut1-sm90");
        assert_eq!(field("Provides"), "libcut1 (= 1.0-1)");
        assert_eq!(field("Conflicts"), "libcut1");
        assert_eq!(field("X-Cuda-Arch"), "9.0");
        assert!(field("Installed-Size").parse::<u64>().unwrap() < 1700);
        // dpkg-deb extracts it and md5sum agrees with its md5sums.
        let x = d.join(format!("x-{z}"));
        let (code, _, err) = run(Command::new("dpkg-deb").arg("-R").arg(&variant).arg(&x));
        assert_eq!(code, 0, "{err}");
        let (code, out_text, err) = run(Command::new("md5sum")
            .args(["-c", "DEBIAN/md5sums"])
            .current_dir(&x));
        assert_eq!(code, 0, "{out_text}{err}");
        assert!(
            std::fs::symlink_metadata(x.join("usr/lib/x86_64-linux-gnu/libcut.so"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // dpkg: the fat package, then the variant in its place; a package that depends on
        // the fat one is satisfied by the variant.
        let root = d.join(format!("root-{z}"));
        let (code, _, err) = dpkg(&root, &["-i"], Some(&fat));
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = dpkg(&root, &["-i"], Some(&variant));
        assert_eq!(code, 0, "{err}");
        let app_deb = d.join(format!("cutapp-{z}.deb"));
        cutapp_deb(&d.join(format!("app-{z}")), &app_deb);
        let (code, _, err) = dpkg(&root, &["-i"], Some(&app_deb));
        assert_eq!(code, 0, "{err}");
        let (_, status, _) = dpkg(&root, &["-l"], None);
        assert!(
            status.lines().any(|l| l.starts_with("ii  libcut1-sm90")),
            "{status}"
        );
        assert!(
            !status.lines().any(|l| l.starts_with("ii  libcut1 ")),
            "{status}"
        );
        let installed = root.join("usr/lib/x86_64-linux-gnu/libcut.so.1");
        assert!(
            std::fs::read(&installed).unwrap()
                == std::fs::read(root.join("usr/lib/x86_64-linux-gnu/libcut.so.1.0")).unwrap()
        );
        let archs = archs_of(&installed);
        assert!(
            archs.iter().all(|a| a == "sm_90" || a == "compute_80"),
            "{archs:?}"
        );
        // Same input, same bytes.
        let again = d.join(format!("again-{z}"));
        std::fs::create_dir(&again).unwrap();
        assert_eq!(prune(&fat, &again).0, 0);
        assert!(
            std::fs::read(again.join("libcut1-sm90_1.0-1_amd64.deb")).unwrap()
                == std::fs::read(&variant).unwrap()
        );
    }
}

#[test]
fn altered_debs_are_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    type Tamper = Box<dyn Fn(&str) -> String>;
    let cases: Vec<(&str, Tamper, &str)> = vec![
        (
            "mismatch",
            Box::new(|s: &str| format!("0{}", &s[1..])),
            "does not match md5sums",
        ),
        (
            "unlisted",
            Box::new(|_: &str| String::new()),
            "is not in md5sums",
        ),
        (
            "missing",
            Box::new(|s: &str| format!("{s}d41d8cd98f00b204e9800998ecf8427e  usr/share/gone\n")),
            "md5sums lists usr/share/gone",
        ),
    ];
    for (case, tamper, want) in cases {
        let case_dir = d.join(case);
        let fat = build_deb(&case_dir, &lib, "xz", &*tamper);
        let before = std::fs::read(&fat).unwrap();
        let out = case_dir.join("out");
        std::fs::create_dir(&out).unwrap();
        let (code, err) = prune(&fat, &out);
        assert_eq!(code, 1, "{case}: {err}");
        assert!(
            err.contains(want) && err.contains("libcut1_1.0-1_amd64.deb"),
            "{case}: {err}"
        );
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "{case}");
        assert!(
            std::fs::read(&fat).unwrap() == before,
            "{case}: input changed"
        );
    }
}
