//! `fatpack split` of a folder (an installed prefix, a Nix output) with a packed library.

use std::process::Command;

use crate::common::*;
use crate::prune_wheel::names_in;
use crate::split_wheel::{packed_library, serves_lib};

/// `fatpack split` of a folder (an installed prefix, a Nix output): `host/` and one folder
/// per architecture; the host with one device folder copied over it serves that GPU as the
/// fat folder did, under both names of a hard-linked library; symlinks stay symlinks.
#[test]
fn a_folder_splits_into_host_and_device_folders() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = packed_library(d);
    let fat = d.join("prefix");
    std::fs::create_dir_all(fat.join("lib")).unwrap();
    std::fs::create_dir_all(fat.join("share")).unwrap();
    std::fs::copy(&lib, fat.join("lib/libcut.so.1")).unwrap();
    std::fs::hard_link(fat.join("lib/libcut.so.1"), fat.join("lib/libcut.so.1.0")).unwrap();
    std::os::unix::fs::symlink("libcut.so.1", fat.join("lib/libcut.so")).unwrap();
    std::fs::write(fat.join("share/README"), "cutfix\n").unwrap();
    let out = d.join("split");
    let (code, err) = split_into(&fat, &out);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        names_in(&out),
        ["compute90", "host", "sm75", "sm80", "sm86", "sm90"],
        "{err}"
    );
    assert!(std::fs::symlink_metadata(out.join("host/lib/libcut.so"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(out.join("host/share/README")).unwrap(),
        b"cutfix\n"
    );
    assert!(
        std::fs::metadata(out.join("host/lib/libcut.so.1"))
            .unwrap()
            .len()
            < std::fs::metadata(&lib).unwrap().len()
    );
    // The host and the sm90 folder, installed together (`cp -a`): 9.0 runs as before.
    let root = d.join("installed");
    for part in ["host", "sm90"] {
        let (code, _, err) = run(Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", out.join(part).display()))
            .arg(&root));
        assert_eq!(code, 0, "{err}");
    }
    for name in ["libcut.so.1", "libcut.so.1.0"] {
        serves_lib(&root.join("lib").join(name), &lib, "9.0", "host and sm90");
    }
    // Into a folder that exists: refused, nothing written.
    let (code, err) = split_into(&fat, &out);
    assert_eq!(code, 1, "{err}");
    assert_eq!(names_in(&out).len(), 6);
}
