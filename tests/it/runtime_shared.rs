//! Packed shared libraries: each packed output carries its own hidden runtime copy, digest
//! and store, and finds its own file (also when dlopen'ed by a relative path).

use std::path::PathBuf;
use std::process::Command;

use crate::rt_harness::*;

struct Pair {
    linked: PathBuf,
    dlopened: PathBuf,
    libdir: PathBuf,
}

fn build_pair(lib_store: StoreAt) -> Pair {
    let dir = scratch("shared");
    let libdir = dir.join("lib");
    let maindir = dir.join("main");
    std::fs::create_dir_all(&libdir).unwrap();
    std::fs::create_dir_all(&maindir).unwrap();
    let stubs = format!(
        "#define STUB_L {}\n#define STUB_M {}\n",
        c_array(&fatpack::format::stub::encode("lib#L", 0)),
        c_array(&fatpack::format::stub::encode("main#M", 0))
    );
    std::fs::write(dir.join("stubs.h"), stubs).unwrap();
    let cc = |src: &str, out: &PathBuf, extra: &[&str]| {
        sh(Command::new("cc")
            .args(["-c", "-O1", "-fPIC", "-Wall", "-Werror"])
            .args(extra)
            .arg(format!("-I{}", dir.display()))
            .arg(format!("{FAKE_DIR}/{src}"))
            .arg("-o")
            .arg(out));
    };

    // The library, with the same module names a program might also use: nothing leaks.
    let (lstore, ldigest) = make_store(&[("lib#L", &["sm_80", "sm_86", "compute_90"])]);
    let lobj = libdir.join("lib.o");
    cc("lib.c", &lobj, &[]);
    let lglue = glue(&libdir);
    let lib = libdir.join("liblib.so");
    link("cc", &[lobj, lglue], &lib, &["-shared"]);
    install_store(&lib, &lstore, lib_store, &ldigest);

    let (mstore, mdigest) = make_store(&[("main#M", &["sm_86", "sm_90"])]);
    let mglue = glue(&maindir);
    let libflags = [
        format!("-L{}", libdir.display()),
        "-llib".to_owned(),
        format!("-Wl,-rpath,{}", libdir.display()),
    ];
    let libflags: Vec<&str> = libflags.iter().map(String::as_str).collect();

    let o1 = maindir.join("main_linked.o");
    cc("main2.c", &o1, &["-DLINKED"]);
    let linked = maindir.join("main_linked");
    link("cc", &[o1, mglue.clone()], &linked, &libflags);
    install_store(&linked, &mstore, StoreAt::Mapped, &mdigest);

    let o2 = maindir.join("main_dlopen.o");
    cc("main2.c", &o2, &[]);
    let dlopened = maindir.join("main_dlopen");
    link("cc", &[o2, mglue], &dlopened, &["-ldl"]);
    install_store(&dlopened, &mstore, StoreAt::Mapped, &mdigest);
    Pair {
        linked,
        dlopened,
        libdir,
    }
}

#[test]
fn each_packed_object_loads_from_its_own_store() {
    let p = build_pair(StoreAt::Mapped);
    let r = run(&p.linked, "linked", Some("86"), &[("FATPACK_LOG", "debug")]);
    r.assert_clean();
    assert_eq!(
        r.out("main").as_deref(),
        Some("0"),
        "{}\n{}",
        r.log,
        r.stderr
    );
    assert_eq!(
        r.out("lib").as_deref(),
        Some("0"),
        "{}\n{}",
        r.log,
        r.stderr
    );
    assert_eq!(r.registered(), [vec!["main#M:sm_86"], vec!["lib#L:sm_86"]]);
    assert!(r.stderr.contains("liblib.so"), "{}", r.stderr);

    let dir = p.libdir.display().to_string();
    let r = run(&p.dlopened, &format!("dlopen {dir}"), Some("90"), &[]);
    r.assert_clean();
    assert_eq!(
        r.out("main").as_deref(),
        Some("0"),
        "{}\n{}",
        r.log,
        r.stderr
    );
    assert_eq!(
        r.out("lib").as_deref(),
        Some("0"),
        "{}\n{}",
        r.log,
        r.stderr
    );
    assert_eq!(
        r.registered(),
        [vec!["main#M:sm_90"], vec!["lib#L:compute_90"]]
    );

    // --exclude-libs: the library exports none of the runtime's symbols.
    let out = sh(Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(p.libdir.join("liblib.so")));
    let syms = String::from_utf8_lossy(&out.stdout);
    assert!(
        !syms.contains("__wrap_") && !syms.contains("__fatpack"),
        "{syms}"
    );
    assert!(syms.contains("lib_launch"));
}

/// dlopen'ed by a relative path, then the current directory changes to one where that
/// relative path names a FIFO (and so does the side-file name): the library still loads its
/// own store and nothing blocks, whether the store is mapped or in a side file (resolved and
/// opened when the library was loaded, from the kernel's record of its real path).
#[test]
fn relative_dlopen_never_looks_in_the_current_directory() {
    for at in [StoreAt::Mapped, StoreAt::SideFile] {
        let p = build_pair(at);
        let trap = p.libdir.parent().unwrap().join("trap");
        std::fs::create_dir_all(&trap).unwrap();
        for name in ["liblib.so", "liblib.so.fatpack"] {
            sh(Command::new("mkfifo").arg(trap.join(name)));
        }
        let mode = format!("dlopen {} {}", p.libdir.display(), trap.display());
        let r = run_via(&["timeout", "20"], &p.dlopened, &mode, Some("90"), &[]);
        r.assert_clean();
        assert_eq!(
            r.out("lib").as_deref(),
            Some("0"),
            "{at:?}\n{}\n{}",
            r.log,
            r.stderr
        );
        assert_eq!(
            r.registered(),
            [vec!["main#M:sm_90"], vec!["lib#L:compute_90"]],
            "{at:?}"
        );
    }
}
