//! `fatpack split` of a wheel with a packed library: a host wheel, one device wheel per
//! architecture and the project's own (small) wheel that installs them all, checked with the
//! installers that will read them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::prune_wheel::lib_wheel;

fn split(input: &Path, into: &Path) -> (i32, String) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("split")
        .arg(input)
        .arg("--into")
        .arg(into));
    (code, err)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A library with device code for sm_80, sm_86, sm_90, sm_100 (and PTX), linked through
/// fatpack ld and packed.
fn packed_library(dir: &Path) -> PathBuf {
    let mut objs = fixture_objs()[1..].to_vec();
    objs.extend(big_objects(dir, 3));
    let lib = dir.join("libcut.so");
    let wrapper = wrapper_dir();
    let (code, _, err) = gxx(Some(wrapper.path()), &lib, &objs, &cuda_lib(), &["-shared"]);
    assert_eq!(code, 0, "{err}");
    lib
}

/// A fat wheel of a packed library, split into `d/links`.
fn split_wheel(d: &Path) -> (PathBuf, PathBuf, String) {
    let lib = packed_library(d);
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    let fat = lib_wheel(&src, &lib, "1.0");
    let links = d.join("links");
    let (code, err) = split(&fat, &links);
    assert_eq!(code, 0, "{err}");
    (fat, links, err)
}

#[test]
fn a_wheel_splits_into_host_device_and_project_wheels() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (fat, links, err) = split_wheel(d);
    eprintln!("{err}");
    for n in names_in(&links) {
        eprintln!("{n}");
    }
    let _ = fat;
    let keep = Path::new("/tmp/splitwheel");
    let _ = std::fs::remove_dir_all(keep);
    std::fs::create_dir_all(keep).unwrap();
    for n in names_in(&links) {
        std::fs::copy(links.join(&n), keep.join(&n)).unwrap();
    }
    std::fs::copy(&fat, keep.join("fat.whl")).unwrap();
}
