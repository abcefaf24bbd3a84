//! `fatpack prune` over a whole package: a folder (every ELF with device code pruned,
//! the rest copied as it was, symlinks and hard links kept) and a Python wheel in its
//! local-label form (members pruned, RECORD rewritten, the capability in the version's
//! local label), which pip installs and imports. prune_wheel.rs has the variant form.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// A shared library with enough device code for the cut (the fixture kernels and three
/// copies of the big ones), linked with static cudart: loading it registers its fatbins.
pub(crate) fn fat_library(dir: &Path) -> PathBuf {
    let mut objs = fixture_objs()[1..].to_vec();
    objs.extend(big_objects(dir, 3));
    let lib = dir.join("libcut.so");
    let (code, _, err) = gxx(None, &lib, &objs, &cuda_lib(), &["-shared"]);
    assert_eq!(code, 0, "{err}");
    lib
}

fn prune_for(input: &Path, out: &Path) -> (i32, String) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0", "--local-label"])
        .arg(input)
        .arg("-o")
        .arg(out));
    (code, err)
}

#[test]
fn a_folder_is_copied_with_every_fat_binary_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("prefix");
    std::fs::create_dir_all(src.join("lib")).unwrap();
    std::fs::create_dir_all(src.join("bin")).unwrap();
    let lib = fat_library(dir.path());
    std::fs::copy(&lib, src.join("lib/libcut.so.1")).unwrap();
    std::os::unix::fs::symlink("libcut.so.1", src.join("lib/libcut.so")).unwrap();
    write_executable(&src.join("bin/tool.sh"), "#!/bin/sh\necho tool\n");
    std::fs::write(src.join("README"), "not an ELF file\n").unwrap();
    std::fs::hard_link(src.join("lib/libcut.so.1"), src.join("lib/libcut.so.1.0")).unwrap();
    let out = dir.path().join("prefix-sm90");
    let (code, err) = prune_for(&src, &out);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("lib/libcut.so.1: "), "{err}");
    let (a, b) = (src.join("lib/libcut.so.1"), out.join("lib/libcut.so.1"));
    assert!(
        std::fs::metadata(&b).unwrap().len() < std::fs::metadata(&a).unwrap().len(),
        "not smaller"
    );
    assert!(
        archs_of(&b)
            .iter()
            .all(|a| a == "sm_90" || a == "compute_80"),
        "{:?}",
        archs_of(&b)
    );
    assert_eq!(
        std::fs::read_link(out.join("lib/libcut.so")).unwrap(),
        Path::new("libcut.so.1")
    );
    // Hard links stay one file.
    use std::os::unix::fs::MetadataExt;
    let ino = |p: &str| std::fs::metadata(out.join(p)).unwrap().ino();
    assert_eq!(ino("lib/libcut.so.1"), ino("lib/libcut.so.1.0"));
    assert_eq!(
        std::fs::read(out.join("README")).unwrap(),
        b"not an ELF file\n"
    );
    assert_eq!(run(&mut Command::new(out.join("bin/tool.sh"))).1, "tool\n");
    // A binary without device code: copied as it is, in a folder as alone, saying so.
    let plain = dir.path().join("plain");
    std::fs::copy("/bin/true", &plain).unwrap();
    let (code, err) = prune_for(&plain, &dir.path().join("plain-sm90"));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("plain: has no device code: copied as it is"),
        "{err}"
    );
    assert!(
        std::fs::read(&plain).unwrap() == std::fs::read(dir.path().join("plain-sm90")).unwrap()
    );
    // A program linked against the pruned prefix runs.
    let exe = dir.path().join("app");
    let (code, _, err) = run(Command::new("g++")
        .arg("-o")
        .arg(&exe)
        .arg(fixture("main.o"))
        .arg(format!("-L{}", out.join("lib").display()))
        .arg(format!("-Wl,-rpath,{}", out.join("lib").display()))
        .arg("-lcut")
        .arg(format!("-L{}", cuda_lib().display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
    // An existing output is refused, and left as it was.
    let (code, err) = prune_for(&src, &out);
    assert_ne!(code, 0);
    assert!(err.contains("exists"), "{err}");
    assert!(out.join("README").exists());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".fatpack"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Writes a wheel `cutfix-1.0+cu130-py3-none-linux_x86_64.whl` holding `lib` and a module
/// that loads it, RECORD and all, as a build backend would.
fn make_wheel(dir: &Path, lib: &Path) -> PathBuf {
    let wheel = dir.join("cutfix-1.0+cu130-py3-none-linux_x86_64.whl");
    let script = r#"
import base64, hashlib, sys, zipfile
wheel, lib = sys.argv[1], sys.argv[2]
files = {
    "cutfix/__init__.py": b"import ctypes, os\nlib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libcut.so'))\n",
    "cutfix/libcut.so": open(lib, "rb").read(),
    "cutfix-1.0+cu130.dist-info/METADATA": b"Metadata-Version: 2.1\nName: cutfix\nVersion: 1.0+cu130\n",
    "cutfix-1.0+cu130.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(data)}\n"
record += "cutfix-1.0+cu130.dist-info/RECORD,,\n"
with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, data)
    z.writestr("cutfix-1.0+cu130.dist-info/RECORD", record)
"#;
    let (code, _, err) = run(Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&wheel)
        .arg(lib));
    assert_eq!(code, 0, "{err}");
    wheel
}

#[test]
fn a_pruned_wheel_installs_with_pip_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fat_library(dir.path());
    let wheel = make_wheel(dir.path(), &lib);
    let out = dir.path().join("wheels");
    std::fs::create_dir(&out).unwrap();
    // A file name that does not carry the new version is refused: pip would reject it.
    let (code, err) = prune_for(&wheel, &out.join("cutfix.whl"));
    assert_ne!(code, 0);
    assert!(
        err.contains("must be called cutfix-1.0+cu130.sm90-py3-none-linux_x86_64.whl"),
        "{err}"
    );
    let (code, err) = prune_for(&wheel, &out);
    assert_eq!(code, 0, "{err}");
    let pruned = out.join("cutfix-1.0+cu130.sm90-py3-none-linux_x86_64.whl");
    assert!(pruned.exists(), "{err}");
    assert!(std::fs::metadata(&pruned).unwrap().len() < std::fs::metadata(&wheel).unwrap().len());
    let names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // Into the wheel's own folder: written beside it, the input untouched.
    let before = std::fs::read(&wheel).unwrap();
    let (code, err) = prune_for(&wheel, dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(dir.path().join(pruned.file_name().unwrap()).exists());
    assert!(std::fs::read(&wheel).unwrap() == before);
    // pip installs it into a fresh venv (checking every RECORD hash), it imports, and the
    // installed library holds only what a 9.0 GPU runs.
    let venv = dir.path().join("venv");
    let (code, _, err) = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    assert_eq!(code, 0, "{err}");
    let pip = venv.join("bin/pip");
    let (code, _, err) = run(Command::new(&pip)
        .args(["install", "--no-index", "--no-deps", "-q"])
        .arg(&pruned));
    assert_eq!(code, 0, "{err}");
    let (code, out_text, err) = run(Command::new(&pip).arg("check"));
    assert_eq!(code, 0, "{out_text}{err}");
    let py = venv.join("bin/python");
    let (code, out_text, err) = run(Command::new(&py).args([
        "-c",
        "import cutfix, importlib.metadata as m; print(m.version('cutfix'), cutfix.__file__)",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out_text.starts_with("1.0+cu130.sm90 "), "{out_text}");
    let installed =
        Path::new(out_text.split_whitespace().nth(1).unwrap()).with_file_name("libcut.so");
    assert!(archs_of(&installed)
        .iter()
        .all(|a| a == "sm_90" || a == "compute_80"));
    // Same input, same bytes.
    let again = dir.path().join("again");
    std::fs::create_dir(&again).unwrap();
    assert_eq!(prune_for(&wheel, &again).0, 0);
    assert_eq!(
        std::fs::read(&pruned).unwrap(),
        std::fs::read(again.join(pruned.file_name().unwrap())).unwrap()
    );
}

/// A pruned archive whose member names need GNU ar's long-name table (odd in length here)
/// reads in readelf as in ld (an odd-sized table once left readelf finding no next header).
#[test]
fn a_pruned_archive_with_long_member_names_reads_in_readelf_and_ar() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let names = [
        "a_very_long_member_name_kernels.o",
        "another_quite_long_member_name.o",
    ];
    std::fs::copy(fixture("kernels.o"), d.join(names[0])).unwrap();
    std::fs::copy(fixture("other.o"), d.join(names[1])).unwrap();
    let lib = d.join("long.a");
    let (code, _, err) = run(Command::new("ar")
        .arg("rcs")
        .arg(&lib)
        .args(names.iter().map(|n| d.join(n))));
    assert_eq!(code, 0, "{err}");
    let out = d.join("pruned.a");
    let (code, err) = prune_for(&lib, &out);
    assert_eq!(code, 0, "{err}");
    let (code, _, warnings) = run(Command::new("readelf").arg("-aW").arg(&out));
    assert_eq!((code, warnings.as_str()), (0, ""));
    let (code, listed, err) = run(Command::new("ar").arg("t").arg(&out));
    assert_eq!(code, 0, "{err}");
    assert_eq!(listed.lines().collect::<Vec<_>>(), names);
}

/// An output that is the input's side file (or whose side file is the input) would replace
/// what the command reads: prune and repack refuse it and leave both files as they were.
#[test]
fn an_output_on_the_inputs_side_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = wrapper_dir();
    let app = dir.path().join("app");
    let (code, _, err) = gxx(
        Some(w.path()),
        &app,
        &fixture_objs(),
        &cuda_lib(),
        &["-Wl,--fatpack-side-file"],
    );
    assert_eq!(code, 0, "{err}");
    let side = dir.path().join("app.fatpack");
    let before = (std::fs::read(&app).unwrap(), std::fs::read(&side).unwrap());
    for args in [
        vec!["prune", "--for", "9.0"],
        vec!["repack", "--level", "3"],
    ] {
        let (code, _, err) = run(Command::new(fatpack_bin())
            .args(&args)
            .arg(&app)
            .arg("-o")
            .arg(&side));
        assert_ne!(code, 0, "{args:?}");
        assert!(
            err.contains("must not be the input") && err.contains("app.fatpack, which"),
            "{args:?}: {err}"
        );
        assert_eq!(
            (std::fs::read(&app).unwrap(), std::fs::read(&side).unwrap()),
            before,
            "{args:?}"
        );
    }
}

/// The spellings users type for a GPU (Nixpkgs' `9.0a`, `sm90`, `SM_90`, nvprune's `-arch
/// sm_90` and `-arch=sm_90`, nvcc's `--gpu-architecture`) select what the canonical one
/// does, byte for byte; a virtual arch (`compute_90`, `90-virtual`) selects its PTX, as nvcc
/// means it; a near miss is answered with what was meant (the README's table).
#[test]
fn every_common_spelling_of_a_gpu_selects_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    let pruned = |args: &[&str], name: &str| {
        let out = d.join(name);
        let (code, err) = prune_with(args, &lib, &out);
        assert_eq!(code, 0, "{args:?}: {err}");
        std::fs::read(out).unwrap()
    };
    let for90 = pruned(&["--for", "9.0"], "for90");
    for (i, spelling) in ["9.0a", "sm90", "SM_90", "90", "sm_90a", "90-real"]
        .iter()
        .enumerate()
    {
        assert!(
            pruned(&["--for", spelling], &format!("f{i}")) == for90,
            "{spelling}"
        );
    }
    let keep = pruned(&["--keep", "sm_90"], "keep90");
    for (i, args) in [
        &["-arch", "sm_90"][..],
        &["-arch=sm_90"],
        &["--gpu-architecture", "sm_90"],
        &["--arch", "SM90"],
    ]
    .iter()
    .enumerate()
    {
        assert!(pruned(args, &format!("k{i}")) == keep, "{args:?}");
    }
    // nvcc's `compute_90` and CMake's `90-virtual` name the PTX a 9.0 GPU would JIT (the
    // newest PTX up to 9.0: compute_90 here, and for `compute_100` too); `9.0+PTX` both.
    let ptx = pruned(&["--keep", "compute_90"], "keep_c90");
    for (i, spelling) in ["compute_90", "90-virtual", "COMPUTE_90", "compute_100"]
        .iter()
        .enumerate()
    {
        assert!(
            pruned(&["--for", spelling], &format!("v{i}")) == ptx,
            "{spelling}"
        );
    }
    let both = pruned(&["--keep", "sm_90,compute_90"], "keep_both");
    assert!(pruned(&["--for", "9.0+PTX"], "plus") == both);
    let mut kept = archs_of(&d.join("plus"));
    kept.sort();
    assert_eq!(kept, ["compute_90", "sm_90"]);
    // A GPU newer than any SASS gets the PTX, and the report says so.
    let (code, err) = prune_with(&["--for", "12.0"], &lib, &d.join("for120"));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("for 12.0: compute_90") && err.contains("PTX, JIT-compiled at first load"),
        "{err}"
    );
    let (code, err) = prune_with(&["--for", "sm-90"], &lib, &d.join("bad"));
    assert_eq!(code, 2, "a usage error: {err}");
    assert!(err.contains("did you mean 9.0 (sm_90)?"), "{err}");
}

/// What a packager meets when something is off says what is wrong, names the user's path,
/// exits 1 and writes nothing: a wheel cut short (a download that stopped), an output inside
/// the folder being pruned.
#[test]
fn messages_say_what_is_wrong_with_the_users_paths() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let whl = d.join("demo-1.0-py3-none-any.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    z.start_file("demo/data.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    z.write_all(&[7u8; 4000]).unwrap();
    z.finish().unwrap();
    let len = std::fs::metadata(&whl).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&whl)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    let (code, err) = prune_with(&["--for", "9.0"], &whl, &d.join("out"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("demo-1.0-py3-none-any.whl: truncated or damaged"),
        "{err}"
    );
    assert!(!d.join("out").exists());

    // A file named like a wheel that is no zip at all.
    let fake = d.join("fake-1.0-py3-none-any.whl");
    std::fs::write(&fake, "<html>404</html>\n").unwrap();
    let (code, err) = prune_with(&["--for", "9.0"], &fake, &d.join("out"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("fake-1.0-py3-none-any.whl: not a wheel: a wheel is a zip file"),
        "{err}"
    );

    let tree = d.join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(fat_library(d), tree.join("lib/libcut.so")).unwrap();
    let (code, err) = prune_with(&["--for", "9.0"], &tree, &tree.join("sub"));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("tree/sub: lies inside") && err.contains("a folder this command reads"),
        "{err}"
    );
    assert!(!tree.join("sub").exists());
}

/// `-o` has one meaning per kind of input, as `fatpack help prune` states it: a file's is
/// the new file (its folder must exist); a folder's, the new folder (it must not exist); a
/// package's, the folder to write it into (made if missing), or the package's exact name.
#[test]
fn dash_o_means_what_the_help_says_for_files_folders_and_packages() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = fat_library(d);
    // A file: the new file.
    assert_eq!(prune_for(&lib, &d.join("one.so")).0, 0);
    assert!(d.join("one.so").is_file());
    let (code, err) = prune_for(&lib, &d.join("missing/one.so"));
    assert!(code == 1 && err.contains("does not exist"), "{err}");
    // A folder: a new folder, never one that exists.
    let tree = d.join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(&lib, tree.join("lib/libcut.so")).unwrap();
    assert_eq!(prune_for(&tree, &d.join("tree90")).0, 0);
    assert!(d.join("tree90/lib/libcut.so").is_file());
    let (code, err) = prune_for(&tree, &d.join("tree90"));
    assert!(code == 1 && err.contains("exists"), "{err}");
    // A package: into a folder (existing or made), or its exact name.
    let wheel = make_wheel(d, &lib);
    let existing = d.join("existing");
    std::fs::create_dir(&existing).unwrap();
    let mut names = Vec::new();
    for out in [existing, d.join("new/dist")] {
        let (code, err) = prune_for(&wheel, &out);
        assert_eq!(code, 0, "{out:?}: {err}");
        let written: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(written.len(), 1, "{out:?}: {written:?}");
        names.push(written[0].clone());
    }
    assert_eq!(names[0], names[1]);
    let exact = d.join("exact");
    std::fs::create_dir(&exact).unwrap();
    assert_eq!(prune_for(&wheel, &exact.join(&names[0])).0, 0);
    let (code, err) = prune_for(&wheel, &d.join("other-name.whl"));
    assert!(code == 1 && err.contains("must be called"), "{err}");
    assert!(!d.join("other-name.whl").exists());
    // A package prune that fails leaves no folder it made.
    let (code, err) = prune_with(&["--keep", "sm_61"], &wheel, &d.join("made/dist"));
    assert_eq!(code, 1, "{err}");
    assert!(!d.join("made").exists(), "{err}");
}
