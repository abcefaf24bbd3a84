//! `fatpack extract`: the device code of plain and packed files as files NVIDIA's tools read
//! (cuobjdump lists and disassembles them, nvdisasm disassembles the cubins), byte for byte
//! what nvcc compiled.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

fn extract(args: &[&str], input: &Path, out: &Path) -> Vec<PathBuf> {
    let (code, stdout, err) = run(Command::new(fatpack_bin())
        .arg("extract")
        .args(args)
        .arg(input)
        .arg("-o")
        .arg(out));
    assert_eq!(code, 0, "{err}");
    stdout.lines().map(PathBuf::from).collect()
}

#[test]
fn extracted_code_is_what_nvcc_made_and_nvidias_tools_read_it() {
    let cuobjdump = cuda_tool("cuobjdump");
    let nvdisasm = cuda_tool("nvdisasm");
    let dir = tempfile::tempdir().unwrap();
    // A packed executable: its code is in the store, which cuobjdump cannot read.
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(Command::new(&cuobjdump).arg("-lelf").arg(&exe));
    assert_ne!(
        code, 0,
        "cuobjdump read a packed output: this test would prove nothing"
    );

    // Per entry: the same cubins as extracting the plain object with cuobjdump itself.
    let files = extract(&[], &exe, &dir.path().join("all"));
    let kernels_sm90: Vec<_> = files
        .iter()
        .filter(|f| {
            let n = f.file_name().unwrap().to_string_lossy();
            n.starts_with("kernels.o") && n.ends_with(".sm_90.cubin")
        })
        .collect();
    assert_eq!(kernels_sm90.len(), 1, "{files:?}");
    let xdir = dir.path().join("cuobjdump");
    std::fs::create_dir(&xdir).unwrap();
    let (code, _, err) = run(Command::new(&cuobjdump)
        .args(["-xelf", "sm_90"])
        .arg(fixture("kernels.o"))
        .current_dir(&xdir));
    assert_eq!(code, 0, "{err}");
    let theirs = std::fs::read_dir(&xdir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::read(kernels_sm90[0]).unwrap(),
        std::fs::read(&theirs).unwrap()
    );
    let (code, sass, err) = run(Command::new(&nvdisasm).arg(kernels_sm90[0]));
    assert_eq!(code, 0, "{err}");
    assert!(sass.contains("axpy"), "{sass}");
    assert!(files.iter().any(|f| f.extension().unwrap() == "ptx"));

    // --fatbin --arch: one fatbin per module with just that arch, for cuobjdump -sass.
    let fatbins = extract(
        &["--fatbin", "--arch", "sm_90"],
        &exe,
        &dir.path().join("fatbins"),
    );
    // main.o is built for sm_80 only: the two other modules have sm_90.
    assert_eq!(fatbins.len(), 2, "{fatbins:?}");
    for f in &fatbins {
        let (code, list, err) = run(Command::new(&cuobjdump).arg("-lelf").arg(f));
        assert_eq!(code, 0, "{err}");
        assert_eq!(list.lines().count(), 1, "{list}");
        assert!(list.contains("sm_90.cubin"), "{list}");
        let (code, sass, err) = run(Command::new(&cuobjdump).arg("-sass").arg(f));
        assert_eq!(code, 0, "{err}");
        assert!(sass.contains("Function :"), "{sass}");
    }

    // Nothing of the archs asked for: an error, and no folder left behind.
    let none = dir.path().join("none");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["extract", "--arch", "sm_120"])
        .arg(&exe)
        .arg("-o")
        .arg(&none));
    assert_eq!(code, 1);
    assert!(
        err.contains("no device code of the archs asked for"),
        "{err}"
    );
    assert!(!none.exists());
}
