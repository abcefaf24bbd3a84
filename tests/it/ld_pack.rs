//! `fatpack ld` with the real linker on real nvcc objects: what it packs, that the result is
//! sound, and that it behaves like ld everywhere else.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

#[test]
fn packed_executable_runs_and_holds_every_entry() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&mut Command::new(&exe));
    assert_eq!((code, out.as_str()), (0, "fixture main ok\n"), "{err}");
    let r = inspect_json(&exe);
    assert_eq!(r["packed"]["digest_matches"], true);
    assert_eq!(r["packed"]["store"], ".fatpack section");
    let names = module_names(&r);
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.iter().any(|n| n.ends_with("kernels.o#0")));
    // Every entry of the inputs is in the store: compare with inspect of the inputs.
    let mut want = Vec::new();
    for o in fixture_objs() {
        for m in inspect_json(&o)["modules"].as_array().unwrap() {
            for e in m["entries"].as_array().unwrap() {
                want.push((
                    e["arch"].clone(),
                    e["raw_size"].clone(),
                    e["kernel_count"].clone(),
                ));
            }
        }
    }
    let got: Vec<_> = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["entries"].as_array().unwrap().clone())
        .map(|e| {
            (
                e["arch"].clone(),
                e["raw_size"].clone(),
                e["kernel_count"].clone(),
            )
        })
        .collect();
    let mut g = got.clone();
    let mut wn = want.clone();
    let key = |t: &(serde_json::Value, serde_json::Value, serde_json::Value)| format!("{t:?}");
    g.sort_by_key(key);
    wn.sort_by_key(key);
    assert_eq!(g, wn);
    // The device code is gone from the loaded image: .nv_fatbin holds only stubs.
    let plain = dir.path().join("plain");
    let (code, _, err) = gxx(None, &plain, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let sec_size = |p: &Path, name: &str| -> u64 {
        let data = std::fs::read(p).unwrap();
        let f = object::File::parse(&*data).unwrap();
        use object::{Object, ObjectSection};
        f.section_by_name(name).map_or(0, |s| s.size())
    };
    assert!(sec_size(&exe, ".nv_fatbin") < 512);
    assert!(sec_size(&plain, ".nv_fatbin") > 50_000);
}

#[test]
fn without_device_code_the_output_is_byte_identical_to_plain_ld() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("hello.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void){puts(\"hi\");return 0;}\n",
    )
    .unwrap();
    let obj = dir.path().join("hello.o");
    assert!(Command::new("gcc")
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap()
        .success());
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    assert!(Command::new("gcc")
        .arg("-o")
        .arg(&a)
        .arg(&obj)
        .status()
        .unwrap()
        .success());
    let (code, _, err) = run(Command::new("gcc")
        .arg(format!("-B{}", w.path().display()))
        .arg("-o")
        .arg(&b)
        .arg(&obj));
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

/// `--fatpack-mode=auto` (the default): under `PACK_THRESHOLD` of device code the line goes
/// to the real linker unchanged (the plain link's bytes, which prune still cuts); from it up,
/// the link packs. `--fatpack-mode=packed` and `FATPACK_MODE=packed` pack a small program;
/// the line wins over the environment; a value the mode does not know is an error naming
/// where it came from.
#[test]
fn small_programs_are_the_real_linkers_bytes_until_packing_pays() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let link = |out: &str, inputs: &[PathBuf], through: bool, env: Option<&str>, extra: &[&str]| {
        let mut c = Command::new("g++");
        if through {
            c.arg(format!("-B{}", w.path().display()));
        }
        c.env_remove("FATPACK_MODE");
        if let Some(v) = env {
            c.env("FATPACK_MODE", v);
        }
        let (code, stdout, err) = run(c
            .arg("-o")
            .arg(d.join(out))
            .args(inputs)
            .args(extra)
            .arg(format!("-L{}", cuda.display()))
            .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
        (code, stdout + &err)
    };
    let packed =
        |out: &str| d.join(out).exists() && inspect_json(&d.join(out))["packed"].is_object();
    let mut small = fixture_objs();
    small.extend(big_objects(d, 1));
    let device: u64 = small.iter().map(|o| fatbin_bytes(o)).sum();
    assert!(
        device > 0 && device < fatpack::link::PACK_THRESHOLD,
        "{device}"
    );

    assert_eq!(link("plain", &small, false, None, &[]).0, 0);
    let (code, err) = link("auto", &small, true, None, &["-Wl,--fatpack-verbose"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "{device} bytes of device code linked, under the 512 KiB"
        )) && err.contains("the line went to the real linker unchanged"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(d.join("auto")).unwrap(),
        std::fs::read(d.join("plain")).unwrap()
    );
    assert!(!packed("auto"));
    // Such an output is a plain build to prune: the cut keeps 9.0's code.
    let (code, err) = prune_with(&["--for", "9.0"], &d.join("auto"), &d.join("auto-sm90"));
    assert_eq!(code, 0, "{err}");
    let archs = archs_of(&d.join("auto-sm90"));
    assert!(
        archs.contains(&"sm_90".to_string())
            && !archs.iter().any(|a| a.starts_with("sm_") && a != "sm_90"),
        "{archs:?}"
    );

    // Asked for, by the line or the environment, a small program is packed.
    for (out, env, extra) in [
        ("line", None, &["-Wl,--fatpack-mode=packed"][..]),
        ("env", Some("packed"), &[][..]),
    ] {
        let (code, err) = link(out, &small, true, env, extra);
        assert_eq!(code, 0, "{err}");
        assert!(packed(out), "{out}");
    }
    // The line wins over the environment.
    let (code, err) = link(
        "line-wins",
        &small,
        true,
        Some("packed"),
        &["-Wl,--fatpack-mode=auto"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(d.join("line-wins")).unwrap(),
        std::fs::read(d.join("plain")).unwrap()
    );
    let (code, err) = link("bad", &small, true, Some("pakced"), &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("FATPACK_MODE=pakced: want `auto`, `packed` or `tail`"),
        "{err}"
    );
    assert!(!d.join("bad").exists());

    // The dry run says the same.
    let (code, said) = link("dry", &small, true, None, &["-Wl,--fatpack-dry-run"]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("under the 512 KiB") && said.contains("would run: "),
        "{said}"
    );
    assert!(!d.join("dry").exists());

    // From the threshold up, the default packs.
    let mut large = fixture_objs();
    large.extend(big_objects(d, 3));
    let device: u64 = large.iter().map(|o| fatbin_bytes(o)).sum();
    assert!(device >= fatpack::link::PACK_THRESHOLD, "{device}");
    let (code, err) = link("large", &large, true, None, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(packed("large"));
}

/// The threshold counts the device code a link takes in: an archive's members the link does
/// not pull (as `libcudadevrt.a`'s 1 MB in every `-rdc` link) are left out, in a regular or a
/// thin archive, unless `--whole-archive` takes them all.
#[test]
fn archive_members_the_link_does_not_take_are_not_counted() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // main.o calls into kernels.o and other.o; the big members define nothing it needs.
    let mut members = vec![fixture("kernels.o"), fixture("other.o")];
    members.extend(big_objects(d, 3));
    let held =
        fatbin_bytes(&fixture("main.o")) + members.iter().map(|o| fatbin_bytes(o)).sum::<u64>();
    assert!(held >= fatpack::link::PACK_THRESHOLD, "{held}");
    let taken: u64 = fixture_objs().iter().map(|o| fatbin_bytes(o)).sum();
    for (flags, name) in [("rcs", "libmixed.a"), ("rcsT", "libthin.a")] {
        let lib = d.join(name);
        let (code, _, err) = run(Command::new("ar").arg(flags).arg(&lib).args(&members));
        assert_eq!(code, 0, "{err}");
        let link = |out: &str, through: bool, whole: bool| {
            let mut c = Command::new("g++");
            if through {
                c.arg(format!("-B{}", w.path().display()))
                    .arg("-Wl,--fatpack-verbose");
            }
            c.env_remove("FATPACK_MODE")
                .arg("-o")
                .arg(d.join(out))
                .arg(fixture("main.o"));
            if whole {
                c.arg("-Wl,--whole-archive")
                    .arg(&lib)
                    .arg("-Wl,--no-whole-archive");
            } else {
                c.arg(&lib);
            }
            let (code, _, err) = run(c.arg(format!("-L{}", cuda.display())).args([
                "-lcudart_static",
                "-ldl",
                "-lpthread",
                "-lrt",
            ]));
            assert_eq!(code, 0, "{name} {out}: {err}");
            err
        };
        link("plain", false, false);
        let err = link("auto", true, false);
        assert!(
            err.contains(&format!(
                "{taken} bytes of device code linked (of {held} in its inputs"
            )),
            "{name}: {err}"
        );
        assert_eq!(
            std::fs::read(d.join("auto")).unwrap(),
            std::fs::read(d.join("plain")).unwrap(),
            "{name}"
        );
        // Every member taken: packed.
        link("whole", true, true);
        assert!(
            inspect_json(&d.join("whole"))["packed"].is_object(),
            "{name}"
        );
    }
}

/// A member the link pulls for what another member needs counts too, as ld pulls it: an
/// API entry point without device code that calls a kernel's launcher in another member is
/// how static cuBLAS is built (its 186 MB were counted as 1,696 bytes before, and its link
/// was left unpacked). A `--whole-archive` archive's members pull from the archives after it.
#[test]
fn members_pulled_by_other_members_are_counted() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let big = &big_objects(d, 4);
    // big0 defines `launch_big`, what bridge.o calls; the others define nothing anyone needs
    // (they make the inputs hold enough device code for the estimate to be asked).
    define_symbol(&big[0], "launch_big");
    let bridge = c_object(
        d,
        "bridge",
        "extern void launch_big(void);\nvoid api(void) { launch_big(); }\n",
    );
    let main = c_object(
        d,
        "main_api",
        "extern void api(void);\nint main(void) { api(); return 0; }\n",
    );
    let big0 = fatbin_bytes(&big[0]);
    let held: u64 = big.iter().map(|o| fatbin_bytes(o)).sum();
    assert!(held >= fatpack::link::PACK_THRESHOLD, "{held}");
    let dry_run = |libs: &[&[&str]]| {
        let mut c = Command::new("g++");
        c.env_remove("FATPACK_MODE")
            .arg(format!("-B{}", w.path().display()))
            .args(["-Wl,--fatpack-verbose", "-Wl,--fatpack-dry-run", "-o"])
            .arg(d.join("out"))
            .arg(&main);
        for l in libs {
            c.args(*l);
        }
        let (code, out, err) = run(c.arg(format!("-L{}", cuda.display())).args([
            "-lcudart_static",
            "-ldl",
            "-lpthread",
            "-lrt",
        ]));
        assert_eq!(code, 0, "{err}");
        out + &err
    };
    let ar = |name: &str, members: &[&Path]| {
        let lib = d.join(name);
        ar_rcs(&lib, members);
        lib.display().to_string()
    };
    // One archive: main pulls bridge.o, bridge.o pulls big0.o.
    let mut members: Vec<&Path> = vec![&bridge];
    members.extend(big.iter().map(PathBuf::as_path));
    let one = ar("libone.a", &members);
    let err = dry_run(&[&[&one]]);
    let linked = |n: u64| format!("{n} bytes of device code linked (of {held} in its inputs");
    assert!(big0 < fatpack::link::PACK_THRESHOLD, "{big0}");
    assert!(err.contains(&linked(big0)), "{err}");
    // bridge.o taken whole by --whole-archive pulls big0.o from the archive after it.
    let api = ar("libapi.a", &[&bridge]);
    let kernels = ar("libkernels.a", &members[1..]);
    let err = dry_run(&[
        &["-Wl,--whole-archive", &api, "-Wl,--no-whole-archive"],
        &[&kernels],
    ]);
    assert!(err.contains(&linked(big0)), "{err}");
}

/// An input a link found free of device code is remembered between links (libgcc.a and the
/// like are on every line), and an input rewritten in place since is read again: the entry
/// is named by the file's identity, its change time included.
#[test]
fn inputs_found_free_of_device_code_are_remembered_until_they_change() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cache = d.join("cache");
    let main = c_object(
        d,
        "main_table",
        "extern int from_table(void);\nint main(void) { return from_table(); }\n",
    );
    let host = c_object(
        d,
        "table",
        "const char table[100000] = {1};\nint from_table(void) { return table[7]; }\n",
    );
    let lib = d.join("libtable.a");
    ar_rcs(&lib, &[&host]);
    let link = |out: &str| {
        let mut c = Command::new("g++");
        c.arg(format!("-B{}", w.path().display()))
            .env("FATPACK_CACHE_DIR", &cache)
            .env("FATPACK_MODE", "packed")
            .arg("-o")
            .arg(d.join(out))
            .arg(&main)
            .arg(&lib)
            .arg(format!("-L{}", cuda.display()))
            .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]);
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 0, "{out}: {err}");
    };
    link("host_only");
    let entries = || {
        std::fs::read_dir(cache.join("no-device-code"))
            .map(|r| r.count())
            .unwrap_or(0)
    };
    let before = entries();
    assert!(before >= 1, "libtable.a is not remembered");
    // The same archive rewritten in place: its member now holds device code, and defines
    // what main calls.
    let dev = big_objects(d, 1).remove(0);
    define_symbol(&dev, "from_table");
    let rebuilt = d.join("rebuilt.a");
    ar_rcs(&rebuilt, &[&dev]);
    std::fs::write(&lib, std::fs::read(&rebuilt).unwrap()).unwrap();
    link("with_device_code");
    assert!(
        inspect_json(&d.join("with_device_code"))["packed"].is_object(),
        "the rewritten archive's device code was not packed: a stale entry was believed"
    );
    assert_eq!(
        entries(),
        before,
        "an archive with device code is not remembered"
    );
}

/// The bytes of `.nv_fatbin` in the object `o`.
fn fatbin_bytes(o: &Path) -> u64 {
    let data = std::fs::read(o).unwrap();
    let f = object::File::parse(&*data).unwrap();
    use object::{Object, ObjectSection};
    f.section_by_name(".nv_fatbin").map_or(0, |s| s.size())
}

#[test]
fn two_links_of_the_same_inputs_give_the_same_bytes() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for out in [&a, &b] {
        let (code, _, err) = gxx(Some(w.path()), out, &fixture_objs(), &cuda, &[]);
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // The same objects in two other folders, named by absolute path: still the same bytes
    // (the store records no build folder).
    let mut outs = Vec::new();
    for sub in ["one", "two/deeper"] {
        let d = dir.path().join(sub);
        std::fs::create_dir_all(&d).unwrap();
        let objs: Vec<PathBuf> = ["main.o", "kernels.o", "other.o"]
            .iter()
            .map(|n| {
                let p = d.join(n);
                std::fs::copy(fixture(n), &p).unwrap();
                p
            })
            .collect();
        let out = d.join("app");
        let (code, _, err) = gxx(Some(w.path()), &out, &objs, &cuda, &[]);
        assert_eq!(code, 0, "{err}");
        outs.push(std::fs::read(&out).unwrap());
    }
    assert_eq!(outs[0], outs[1], "output depends on the build folder");
}

#[test]
fn only_archive_members_the_link_pulls_in_are_packed() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let main_c = dir.path().join("m.c");
    std::fs::write(&main_c, "int launch_fill(int*);\nint main(int c, char** v){ if (c > 5) launch_fill(0); return 0; }\n").unwrap();
    let main_o = dir.path().join("m.o");
    assert!(Command::new("gcc")
        .arg("-c")
        .arg(&main_c)
        .arg("-o")
        .arg(&main_o)
        .status()
        .unwrap()
        .success());
    for lib in ["libfixture.a", "libfixture_thin.a"] {
        let exe = dir.path().join(format!("app-{lib}"));
        let (code, _, err) = gxx(
            Some(w.path()),
            &exe,
            &[main_o.clone(), fixture(lib)],
            &cuda,
            &["-Wl,--fatpack-verbose"],
        );
        assert_eq!(code, 0, "{lib}: {err}");
        // The memory report: this process's peak after each step and the real linker's.
        let line = err
            .lines()
            .find(|l| l.contains("peak RSS (MiB) after each step: resolve inputs "))
            .unwrap_or_else(|| panic!("{lib}: no peak report: {err}"));
        let linker_peak: f64 = line
            .rsplit("the linker's own peak ")
            .next()
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{lib}: {line}"));
        assert!(linker_peak >= 1.0, "{lib}: {line}");
        assert!(
            line.contains("while the linker ran this process held "),
            "{line}"
        );
        // The real linker's CPU time (a link that reads libraries takes some of each).
        let cpu = err
            .lines()
            .find_map(|l| l.strip_prefix("fatpack:   linker CPU: user "))
            .unwrap_or_else(|| panic!("{lib}: no linker CPU line: {err}"));
        let (user, sys) = cpu
            .split_once("s, sys ")
            .and_then(|(u, s)| {
                Some((
                    u.parse::<f64>().ok()?,
                    s.strip_suffix('s')?.parse::<f64>().ok()?,
                ))
            })
            .unwrap_or_else(|| panic!("{lib}: {cpu}"));
        assert!(user + sys > 0.0, "{lib}: {cpu}");
        // The account covers the whole command: what came before the first step and the
        // cleanup after the last are reported too.
        assert!(
            err.lines()
                .any(|l| l.starts_with("fatpack:   before the first step ")
                    && l.contains("s; cleanup after the last (temp files, mappings) ")),
            "{lib}: {err}"
        );
        // Each ELF input (archive members included) is parsed once: the rewrite edits the
        // headers the scan read.
        let counts = err
            .lines()
            .find_map(|l| l.strip_prefix("fatpack:   inputs: "))
            .unwrap_or_else(|| panic!("{lib}: no input count: {err}"));
        let numbers: Vec<usize> = counts
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(numbers.len(), 2, "{counts}");
        // The archive's two members at least (inputs with no device-section name in their
        // bytes, m.o and the host libraries, are not walked at all).
        assert!(numbers[0] >= 2, "{counts}");
        assert_eq!(numbers[0], numbers[1], "{lib}: {counts}");
        let names = module_names(&inspect_json(&exe));
        assert_eq!(names.len(), 1, "{lib}: {names:?}");
        assert!(
            names[0].ends_with(&format!("{lib}(kernels.o)#0")),
            "{names:?}"
        );
        assert_eq!(run(&mut Command::new(&exe)).0, 0);
    }
}

#[test]
fn a_failed_link_returns_lds_code_and_leaves_nothing() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    // An old output of each: ld unlinks it before it reads its inputs, and fatpack, whose
    // real link writes a temp file, unlinks it while that link runs.
    std::fs::write(&out, b"old").unwrap();
    std::fs::write(dir.path().join("never2"), b"old").unwrap();
    // kernels.o alone has no main: ld fails.
    let (code, _, err) = gxx(Some(w.path()), &out, &[fixture("kernels.o")], &cuda, &[]);
    let (plain_code, _, plain_err) = gxx(
        None,
        &dir.path().join("never2"),
        &[fixture("kernels.o")],
        &cuda,
        &[],
    );
    assert_ne!(code, 0);
    assert_eq!(code, plain_code);
    assert!(err.contains("undefined reference to `main'"), "{err}");
    assert!(plain_err.contains("undefined reference to `main'"));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A line whose output is one of its inputs (by real path) is refused as ld refuses it,
/// before anything is touched: fatpack's real link writes a temp file, so the real linker
/// cannot tell.
#[test]
fn an_output_that_is_an_input_is_refused_as_ld_refuses_it() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let obj = dir.path().join("kernels.o");
    std::fs::copy(fixture("kernels.o"), &obj).unwrap();
    let before = std::fs::read(&obj).unwrap();
    let link = dir.path().join("app");
    std::os::unix::fs::symlink(&obj, &link).unwrap();
    // The same file by another spelling, and through a symlink.
    for out in [dir.path().join(".").join("kernels.o"), link.clone()] {
        let line = |c: &mut Command| {
            c.arg("-o")
                .arg(&out)
                .arg(&obj)
                .arg(fixture("main.o"))
                .arg(format!("-L{}", cuda.display()))
                .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lc"]);
        };
        let mut plain = Command::new("ld");
        line(&mut plain);
        let (plain_code, _, plain_err) = run(&mut plain);
        let mut packed = Command::new(fatpack_bin());
        line(packed.arg("ld"));
        let (code, _, err) = run(&mut packed);
        assert_ne!(plain_code, 0, "{plain_err}");
        assert!(
            plain_err.contains("is the same as output file"),
            "{plain_err}"
        );
        assert_ne!(code, 0, "{err}");
        assert!(
            err.contains(&format!(
                "input file '{}' is the same as output file",
                obj.display()
            )),
            "{err}"
        );
        assert!(std::fs::read(&obj).unwrap() == before, "the input changed");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["app", "kernels.o"], "{out:?}");
    }
}

#[test]
fn side_file_mode_writes_the_store_beside_the_output() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &fixture_objs(),
        &cuda,
        &["-Wl,--fatpack-side-file"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(dir.path().join("app.fatpack").exists());
    let r = inspect_json(&exe);
    assert_eq!(r["packed"]["digest_matches"], true);
    assert!(r["packed"]["store"]
        .as_str()
        .unwrap()
        .ends_with("app.fatpack"));
    assert_eq!(module_names(&r).len(), 3);
    // The side file is a store of its own, inspectable directly.
    let s = inspect_json(&dir.path().join("app.fatpack"));
    assert_eq!(s["kind"], "store");
}

#[test]
fn shared_library_is_packed_and_response_files_work() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let rsp = dir.path().join("objs.rsp");
    std::fs::write(
        &rsp,
        format!(
            "{} '{}'\n",
            fixture("kernels.o").display(),
            fixture("other.o").display()
        ),
    )
    .unwrap();
    let so = dir.path().join("libpacked.so");
    let (code, _, err) = run(Command::new("g++")
        .arg(format!("-B{}", w.path().display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .args(["-shared", "-o"])
        .arg(&so)
        .arg(format!("-Wl,@{}", rsp.display()))
        .arg(format!("-L{}", cuda.display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
    assert_eq!(code, 0, "{err}");
    let r = inspect_json(&so);
    assert_eq!(r["kind"], "shared-library");
    assert_eq!(r["packed"]["digest_matches"], true);
    assert_eq!(module_names(&r).len(), 2);
    // An executable linked against the packed library: the library's device code is its own.
    let exe = dir.path().join("uses-lib");
    let (code, _, err) = run(Command::new("g++")
        .arg(format!("-B{}", w.path().display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg("-o")
        .arg(&exe)
        .arg(fixture("main.o"))
        .arg(&so)
        .arg(format!("-Wl,-rpath,{}", dir.path().display()))
        .arg(format!("-L{}", cuda.display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(module_names(&inspect_json(&exe)).len(), 1);
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
    // The runtime's symbols stay inside the library.
    let (_, syms, _) = run(Command::new("nm").arg("-D").arg("--defined-only").arg(&so));
    assert!(
        !syms.contains("__wrap_"),
        "runtime symbols exported:\n{syms}"
    );
    assert!(
        !syms.contains("fatpack"),
        "runtime symbols exported:\n{syms}"
    );
}

#[test]
fn gold_and_lld_link_packed_outputs_too() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    for (name, flags, marker_args, marker) in [
        (
            "gold",
            vec!["-fuse-ld=gold"],
            ["-p", ".note.gnu.gold-version"],
            "gold",
        ),
        (
            "lld",
            vec!["-fuse-ld=lld", "-Wl,--gc-sections"],
            ["-p", ".comment"],
            "LLD",
        ),
        ("mold", vec!["-fuse-ld=mold"], ["-p", ".comment"], "mold"),
    ] {
        crate::common::tool(&format!("ld.{name}"), "apt-get install binutils lld mold");
        let exe = dir.path().join(format!("app-{name}"));
        let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &flags);
        assert_eq!(code, 0, "{name}: {err}");
        let (_, text, _) = run(Command::new("readelf").args(marker_args).arg(&exe));
        assert!(text.contains(marker), "not linked by {name}");
        let r = inspect_json(&exe);
        assert_eq!(r["packed"]["digest_matches"], true, "{name}");
        assert_eq!(module_names(&r).len(), 3, "{name}");
        // gold and lld give the glue note a PT_NOTE of its own, which becomes the store's
        // PT_LOAD; mold 1.x merges all notes into one, so its outputs keep an unmapped
        // section (the runtime then reads the file).
        let mapped = name != "mold" || mold_splits_notes();
        assert_eq!(r["packed"]["mapped"], mapped, "{name}");
        assert_eq!(
            run(&mut Command::new(&exe)).1,
            "fixture main ok\n",
            "{name}"
        );
    }
}

#[test]
fn packed_output_survives_strip_patchelf_and_debug_splitting() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &fixture_objs(),
        &cuda,
        &["-g", "-Wl,-rpath,/opt/nowhere:/usr/lib"],
    );
    assert_eq!(code, 0, "{err}");
    let check = |p: &Path, what: &str| {
        let r = inspect_json(p);
        assert_eq!(r["packed"]["digest_matches"], true, "{what}");
        assert_eq!(module_names(&r).len(), 3, "{what}");
        let (code, out, err) = run(&mut Command::new(p));
        assert_eq!(
            (code, out.as_str()),
            (0, "fixture main ok\n"),
            "{what}: {err}"
        );
    };
    let copy = |name: &str| {
        let p = dir.path().join(name);
        std::fs::copy(&exe, &p).unwrap();
        p
    };
    let s = copy("stripped");
    assert!(Command::new("strip").arg(&s).status().unwrap().success());
    check(&s, "strip");
    let s = copy("stripped-debug");
    assert!(Command::new("strip")
        .arg("-S")
        .arg(&s)
        .status()
        .unwrap()
        .success());
    check(&s, "strip -S");
    // Debug splitting as distributions do it.
    let dbg = dir.path().join("app.debug");
    assert!(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(&dbg)
        .status()
        .unwrap()
        .success());
    let s = copy("split");
    assert!(Command::new("objcopy")
        .arg("--strip-debug")
        .arg(format!("--add-gnu-debuglink={}", dbg.display()))
        .arg(&s)
        .status()
        .unwrap()
        .success());
    check(&s, "objcopy --only-keep-debug split");
    assert!(
        Command::new("patchelf").arg("--version").output().is_ok(),
        "patchelf not found: apt-get install patchelf (.ci/run does)"
    );
    let s = copy("rpath");
    assert!(Command::new("patchelf")
        .args(["--set-rpath", "/opt/x/lib:/opt/y/lib"])
        .arg(&s)
        .status()
        .unwrap()
        .success());
    check(&s, "patchelf --set-rpath");
    let s = copy("shrunk");
    assert!(Command::new("patchelf")
        .arg("--shrink-rpath")
        .arg(&s)
        .status()
        .unwrap()
        .success());
    check(&s, "patchelf --shrink-rpath");
}

/// A link for another machine than the runtime fatpack carries is refused in one line,
/// before the real linker runs (it would print hundreds of `Relocations in generic ELF`).
/// The input is a real nvcc object whose ELF header says aarch64; a `FATPACK_RUNTIME` of the
/// wrong machine is refused the same way, and tail mode, which needs no runtime, is not.
#[test]
fn a_runtime_for_another_machine_is_refused_before_the_real_linker_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut obj = std::fs::read(fixture("kernels.o")).unwrap();
    obj[18..20].copy_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    let foreign = dir.path().join("kernels-aarch64.o");
    std::fs::write(&foreign, &obj).unwrap();
    // A "linker" that records being run for a link (`-o`): it must not be. Queries such as
    // `--verbose` (ld's search defaults) go to the real ld.
    let ld = dir.path().join("fake-ld");
    let ran = dir.path().join("ran");
    write_executable(
        &ld,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -o ] && {{ touch {}; exit 1; }}; done\nexec ld \"$@\"\n",
            ran.display()
        ),
    );
    let out = dir.path().join("libx.so");
    let named = dir.path().join("libfatpack_rt.a");
    std::fs::write(&named, fatpack::link::runtime::host().bytes).unwrap();
    for runtime in [None, Some(&named)] {
        let mut c = Command::new(fatpack_bin());
        c.args(["ld", "-shared", "-o"])
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .arg(&out)
            .arg(&foreign)
            .env("FATPACK_REAL_LD", &ld);
        match runtime {
            Some(r) => c.env("FATPACK_RUNTIME", r),
            None => c.env_remove("FATPACK_RUNTIME"),
        };
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 1, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("this link is for aarch64"), "{err}");
        assert!(err.contains("FATPACK_RUNTIME"), "{err}");
        assert!(!ran.exists(), "the real linker ran");
        assert!(!out.exists());
    }
    // Tail mode needs no runtime: the real linker runs.
    let mut c = Command::new(fatpack_bin());
    c.args(["ld", "--fatpack-mode=tail", "-shared", "-o"])
        .arg(&out)
        .arg(&foreign)
        .env("FATPACK_REAL_LD", &ld);
    run(&mut c);
    assert!(ran.exists(), "tail mode did not run the real linker");
}

/// A host-only object, for links that carry no device code.
fn host_object(dir: &Path) -> PathBuf {
    let c = dir.join("host.c");
    std::fs::write(&c, "int f(void) { return 1; }\n").unwrap();
    let o = dir.join("host.o");
    let (code, _, err) = run(Command::new("gcc")
        .args(["-c", "-fPIC", "-o"])
        .arg(&o)
        .arg(&c));
    assert_eq!(code, 0, "{err}");
    o
}

/// `fatpack ld` gives every argument to ld: `-h SONAME` is ld's, not a request for help.
#[test]
fn ld_dash_h_is_the_soname_not_help() {
    let dir = tempfile::tempdir().unwrap();
    let o = host_object(dir.path());
    let lib = dir.path().join("libx.so");
    let (code, out, err) = run(Command::new(fatpack_bin())
        .args(["ld", "-h", "libx.so.1", "-shared", "-o"])
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg(&lib)
        .arg(&o));
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("Usage"), "{out}");
    let (_, dynamic, _) = run(Command::new("readelf").arg("-d").arg(&lib));
    assert!(dynamic.contains("Library soname: [libx.so.1]"), "{dynamic}");
}

/// A misspelt `--fatpack-*` option is an error naming the known ones, not silently ignored;
/// nothing is written.
#[test]
fn unknown_fatpack_options_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = host_object(dir.path());
    let lib = dir.path().join("libx.so");
    for mode in [&[][..], &["--fatpack-mode=tail"][..], &["-r"][..]] {
        let (code, _, err) = run(Command::new(fatpack_bin())
            .args(["ld", "--fatpack-sidefile", "-shared", "-o"])
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .args(mode)
            .arg(&lib)
            .arg(&o));
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("unknown option --fatpack-sidefile")
                && err.contains("--fatpack-side-file"),
            "{err}"
        );
        assert!(!lib.exists());
    }
}

/// `--fatpack-verbose` says what fatpack did in every mode, not only when it packed.
#[test]
fn verbose_says_what_was_done_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let o = host_object(dir.path());
    for (args, want) in [
        (&["-shared"][..], "no device code"),
        (&["-shared", "--fatpack-mode=tail"][..], "tail mode"),
        (&["-r"][..], "partial link (-r)"),
    ] {
        let out = dir.path().join("out");
        let (code, _, err) = run(Command::new(fatpack_bin())
            .args(["ld", "--fatpack-verbose"])
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .args(args)
            .arg("-o")
            .arg(&out)
            .arg(&o));
        assert_eq!(code, 0, "{err}");
        assert!(
            err.starts_with("fatpack: ") && err.contains(want),
            "{args:?}: {err}"
        );
    }
}

/// A thin archive whose member is a FIFO: every command that reads inputs says so and exits,
/// instead of waiting forever for a writer.
#[test]
fn a_fifo_thin_archive_member_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::copy(fixture("kernels.o"), d.join("k.o")).unwrap();
    std::fs::copy(fixture("other.o"), d.join("m.o")).unwrap();
    let (code, _, err) = run(Command::new("ar")
        .args(["rcT", "libthin.a", "k.o", "m.o"])
        .current_dir(d));
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(d.join("m.o")).unwrap();
    let (code, _, err) = run(Command::new("mkfifo").arg(d.join("m.o")));
    assert_eq!(code, 0, "{err}");
    let thin = d.join("libthin.a");
    let commands: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["inspect".into(), thin.clone().into()],
        vec![
            "ld".into(),
            "-shared".into(),
            "-o".into(),
            d.join("x.so").into(),
            "--whole-archive".into(),
            thin.clone().into(),
        ],
        vec![
            "prune".into(),
            "--keep".into(),
            "sm_90".into(),
            thin.clone().into(),
            "-o".into(),
            d.join("p.a").into(),
        ],
    ];
    for args in commands {
        let mut child = Command::new(fatpack_bin())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > std::time::Duration::from_secs(30) {
                child.kill().unwrap();
                panic!("fatpack {args:?} hangs on a FIFO member");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("m.o: not a regular file"), "{args:?}: {err}");
    }
}

/// What ld writes about files names the user's files, as with plain ld: the dependency file
/// (`--dependency-file`, which CMake >= 3.27 and Ninja rely on), the map (`-Map`), `--trace`
/// and error messages. No temp path of fatpack's appears, and a link without cudart is said
/// in one line instead of the runtime's Rust internals.
#[test]
fn ld_reports_name_the_users_files() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let dep = dir.path().join("app.d");
    let map = dir.path().join("app.map");
    let (code, trace, err) = gxx(
        Some(w.path()),
        &exe,
        &fixture_objs(),
        &cuda,
        &[
            &format!("-Wl,--dependency-file={}", dep.display()),
            &format!("-Wl,-Map={}", map.display()),
            "-Wl,--trace",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let dep_text = std::fs::read_to_string(&dep).unwrap();
    assert!(
        dep_text.starts_with(&format!("{}: \\\n", exe.display())),
        "{dep_text}"
    );
    for o in fixture_objs() {
        assert!(
            dep_text.contains(&format!("  {} \\\n", o.display())),
            "{dep_text}"
        );
        assert!(trace.contains(&o.display().to_string()), "{trace}");
    }
    let map_text = std::fs::read_to_string(&map).unwrap();
    for text in [&dep_text, &map_text, &trace] {
        assert!(!text.contains("fatpack-ld-"), "{text}");
        assert!(!text.contains(".fatpack-out-"), "{text}");
    }
    assert!(map_text.contains("<fatpack>/libfatpack_rt.a("));
    assert!(!dep_text.contains("libfatpack_rt"), "{dep_text}");

    // Without cudart: the user's objects' undefined references under their own names, and
    // one line for what the runtime misses.
    let (code, _, err) = run(Command::new("g++")
        .arg(format!("-B{}", w.path().display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg("-o")
        .arg(dir.path().join("nocudart"))
        .args(fixture_objs()));
    assert_ne!(code, 0);
    assert!(
        !err.contains("fatpack-ld-") && !err.contains("fatpack_rt::"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}: in function", fixture("kernels.o").display())),
        "{err}"
    );
    assert_eq!(
        err.matches("fatpack ld: error: the CUDA runtime is not in this link")
            .count(),
        1,
        "{err}"
    );
    assert!(!dir.path().join("nocudart").exists());
}

/// Ninja with the linker's dependency file (`deps = gcc`, as CMake >= 3.27 sets up for GNU
/// ld): a second `ninja` has nothing to do, and touching a library the link found by `-l`
/// (known to Ninja only through the dependency file) relinks.
#[test]
fn ninja_with_the_linkers_depfile_is_incremental() {
    let ninja = tool("ninja", "apt-get install ninja-build");
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("lib")).unwrap();
    std::fs::copy(fixture("libfixture.a"), d.join("lib/libfixture.a")).unwrap();
    std::fs::copy(fixture("main.o"), d.join("main.o")).unwrap();
    std::fs::write(
        d.join("build.ninja"),
        format!(
            "rule link\n  command = g++ -B{w} -o $out $in -Wl,--dependency-file=$out.d -Llib -lfixture -L{cuda} -lcudart_static -ldl -lpthread -lrt\n  deps = gcc\n  depfile = $out.d\nbuild app: link main.o\n",
            w = w.path().display(),
            cuda = cuda.display()
        ),
    )
    .unwrap();
    let ninja_run = |args: &[&str]| -> String {
        let (code, out, err) = run(Command::new(&ninja).args(args).current_dir(d));
        assert_eq!(code, 0, "ninja {args:?}: {out}{err}");
        out
    };
    let out = ninja_run(&[]);
    assert!(out.contains("[1/1]"), "{out}");
    assert_eq!(run(&mut Command::new(d.join("app"))).1, "fixture main ok\n");
    let out = ninja_run(&[]);
    assert!(
        out.contains("no work to do"),
        "second ninja relinked:\n{out}"
    );
    // Ninja's recorded dependencies are the user's files.
    let deps = ninja_run(&["-t", "deps", "app"]);
    assert!(deps.contains("lib/libfixture.a"), "{deps}");
    assert!(!deps.contains("fatpack"), "{deps}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let lib = d.join("lib/libfixture.a");
    std::fs::File::options()
        .append(true)
        .open(&lib)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    let out = ninja_run(&[]);
    assert!(
        out.contains("[1/1]"),
        "touching libfixture.a did not relink:\n{out}"
    );
}

/// A side-file output and its store change together or not at all: a relink that cannot put
/// the binary in place leaves the previous pair as it was, and concurrent links of one
/// output leave a pair that belongs together (each inspects with a matching digest).
#[test]
fn side_file_pairs_change_together() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let side = dir.path().join("app.fatpack");
    let link = |level: u32, out: &Path| {
        gxx(
            Some(w.path()),
            out,
            &fixture_objs(),
            &cuda,
            &[
                "-Wl,--fatpack-side-file",
                &format!("-Wl,--fatpack-level={level}"),
            ],
        )
    };
    let (code, _, err) = link(3, &exe);
    assert_eq!(code, 0, "{err}");
    let (old_exe, old_side) = (std::fs::read(&exe).unwrap(), std::fs::read(&side).unwrap());
    // The binary cannot be renamed into place (its path is now a folder): the new store must
    // not replace the old one either.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir(&blocked).unwrap();
    std::fs::write(dir.path().join("blocked.fatpack"), &old_side).unwrap();
    let (code, _, err) = link(19, &blocked);
    assert_ne!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("blocked.fatpack")).unwrap(),
        old_side
    );
    assert_eq!(std::fs::read(&exe).unwrap(), old_exe);
    // Concurrent relinks with different stores: the pair left matches.
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (w, cuda, exe) = (w.path().to_path_buf(), cuda.clone(), exe.clone());
            std::thread::spawn(move || {
                gxx(
                    Some(&w),
                    &exe,
                    &fixture_objs(),
                    &cuda,
                    &[
                        "-Wl,--fatpack-side-file",
                        &format!("-Wl,--fatpack-level={}", 1 + i * 2),
                    ],
                )
            })
        })
        .collect();
    for h in handles {
        let (code, _, err) = h.join().unwrap();
        assert_eq!(code, 0, "{err}");
    }
    let r = inspect_json(&exe);
    assert_eq!(r["packed"]["digest_matches"], true, "{r}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A link stopped by SIGTERM or SIGINT leaves none of fatpack's temp folders (the real
/// linker is stopped too); one killed by SIGKILL leaves them, and the next link sweeps them.
#[test]
fn signals_leave_no_temp_files_and_the_next_link_sweeps_after_sigkill() {
    let cuda = cuda_lib();
    // A real linker that hangs on the link itself.
    let SlowLinkDirs {
        dir: _dir,
        tmp,
        out: out_dir,
        slow,
        pids,
    } = slow_link_dirs();
    // Both routes: the direct route's link starts before the scan (the line names cudart),
    // the copy route's after the rewrite; either way, one real link per run.
    let start = |route: &str| {
        Command::new(fatpack_bin())
            .arg("ld")
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .arg(format!("--fatpack-route={route}"))
            .arg("-o")
            .arg(out_dir.join("app"))
            .args(fixture_objs())
            .arg(format!("-L{}", cuda.display()))
            .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lc"])
            .env("TMPDIR", &tmp)
            .env("FATPACK_REAL_LD", &slow)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let ours = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("fatpack"))
            .collect()
    };
    // Until the n-th real link runs (its fake linker has written its pid).
    let wait_for_link = |n: usize| {
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(&pids).map_or(0, |p| p.lines().count()) < n {
            assert!(t0.elapsed().as_secs() < 60, "the link never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!ours(&out_dir).is_empty());
    };
    for (n, (sig, route)) in [(libc::SIGTERM, "direct"), (libc::SIGINT, "copy")]
        .into_iter()
        .enumerate()
    {
        let mut child = start(route);
        wait_for_link(n + 1);
        assert!(!ours(&tmp).is_empty());
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert!(!status.success());
        assert_eq!(ours(&tmp), Vec::<String>::new(), "signal {sig}");
        assert_eq!(
            ours(&out_dir),
            Vec::<String>::new(),
            "signal {sig} ({route})"
        );
        assert!(!out_dir.join("app").exists());
    }
    let mut child = start("direct");
    wait_for_link(3);
    child.kill().unwrap(); // SIGKILL: nothing can clean up
    child.wait().unwrap();
    assert!(!ours(&tmp).is_empty() && !ours(&out_dir).is_empty());
    // The linkers SIGTERM and SIGINT reached are gone; stop the one SIGKILL orphaned.
    let pids = std::fs::read_to_string(&pids).unwrap();
    let pids: Vec<i32> = pids
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3);
    for (i, &pid) in pids.iter().enumerate() {
        let t0 = std::time::Instant::now();
        while i < 2 && running(pid) && t0.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(running(pid), i == 2, "linker {i} (pid {pid})");
        // SAFETY: SIGKILL to the `sleep` our fake linker became.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // The next link (with the real ld) sweeps what the dead one left.
    let w = wrapper_dir();
    let (code, _, err) = run(Command::new("g++")
        .arg(format!("-B{}", w.path().display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg("-o")
        .arg(out_dir.join("app"))
        .args(fixture_objs())
        .arg(format!("-L{}", cuda.display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"])
        .env("TMPDIR", &tmp));
    assert_eq!(code, 0, "{err}");
    assert_eq!(ours(&tmp), Vec::<String>::new());
    assert_eq!(ours(&out_dir), Vec::<String>::new());
    assert!(out_dir.join("app").exists());
}

/// The GNU build ID covers the device code: two links that differ only in their stores get
/// different IDs, the same link twice the same one, and prune gives its output a new one.
#[test]
fn the_build_id_covers_the_store() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let build_id = |exe: &Path| -> String {
        let (_, notes, _) = run(Command::new("readelf").arg("-n").arg(exe));
        notes
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .unwrap_or_else(|| panic!("no build ID in {}:\n{notes}", exe.display()))
            .to_string()
    };
    let link = |name: &str, level: u32| {
        let exe = dir.path().join(name);
        let (code, _, err) = gxx(
            Some(w.path()),
            &exe,
            &fixture_objs(),
            &cuda,
            &["-Wl,--build-id", &format!("-Wl,--fatpack-level={level}")],
        );
        assert_eq!(code, 0, "{err}");
        exe
    };
    let (a, b, c) = (link("a", 9), link("b", 9), link("c", 19));
    assert_eq!(build_id(&a), build_id(&b));
    assert_ne!(
        build_id(&a),
        build_id(&c),
        "stores differ, build IDs must too"
    );
    let pruned = dir.path().join("pruned");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(&a)
        .arg("-o")
        .arg(&pruned));
    assert_eq!(code, 0, "{err}");
    assert_ne!(build_id(&a), build_id(&pruned));
    assert_eq!(inspect_json(&pruned)["packed"]["digest_matches"], true);
    // Distribution stripping (elfutils, as RPM's find-debuginfo runs it): the stripped file
    // and its debug file carry the build ID that covers the device code.
    let eu_strip = tool("eu-strip", "apt-get install elfutils");
    let (stripped, debug) = (
        dir.path().join("stripped"),
        dir.path().join("stripped.debug"),
    );
    std::fs::copy(&a, &stripped).unwrap();
    let (code, _, err) = run(Command::new(eu_strip).arg("-f").arg(&debug).arg(&stripped));
    assert_eq!(code, 0, "{err}");
    assert_eq!(build_id(&stripped), build_id(&a));
    assert_eq!(build_id(&debug), build_id(&a));
}

/// `--fatpack-dry-run` says what would be rewritten and run and writes nothing;
/// `--fatpack-save-temps` keeps the rewritten inputs, glue, runtime and the real linker's
/// command line, which reruns the real link.
#[test]
fn dry_run_and_save_temps() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    // (route flags, what the dry run says of each input, the route line, the temps kept)
    let routes: [(&[&str], &str, &str, &[&str]); 2] = [
        (
            &["-Wl,--fatpack-route=direct"],
            "would link as given",
            "route: direct (",
            &[
                "fatbin-tail.ld",
                "fatpack-glue.o",
                "ld.rsp",
                "libfatpack_rt.a",
            ],
        ),
        (
            &["-Wl,--fatpack-route=copy"],
            "would rewrite",
            "route: copy (--fatpack-route=copy)",
            &[
                "0000-main.o",
                "0001-kernels.o",
                "0002-other.o",
                "fatpack-glue.o",
                "ld.rsp",
                "libfatpack_rt.a",
            ],
        ),
    ];
    for (flags, says, route, temps_kept) in routes {
        let mut dry = vec!["-Wl,--fatpack-dry-run"];
        dry.extend_from_slice(flags);
        let (code, out, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &dry);
        assert_eq!(code, 0, "{err}");
        for o in fixture_objs() {
            assert!(
                out.contains(&format!("{says} {} (1 fatbin container)", o.display())),
                "{out}"
            );
        }
        assert!(out.contains(route), "{out}");
        assert!(out.contains("would run: ") && out.contains("--wrap=__cudaRegisterFatBinary"));
        assert_eq!(
            out.contains("-T '<fatpack>/fatbin-tail.ld'"),
            says == "would link as given",
            "{out}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "a dry run wrote {left:?}");

        let mut save = vec!["-Wl,--fatpack-save-temps"];
        save.extend_from_slice(flags);
        let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &save);
        assert_eq!(code, 0, "{err}");
        assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
        let temps = dir.path().join("app.fatpack-temps");
        assert!(
            err.contains(&format!("temps kept in {}", temps.display())),
            "{err}"
        );
        let mut kept: Vec<String> = std::fs::read_dir(&temps)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        kept.sort();
        assert_eq!(kept, temps_kept, "{flags:?}");
        let (code, _, err) = run(Command::new("ld").arg("@ld.rsp").current_dir(&temps));
        assert_eq!(code, 0, "{err}");
        assert!(temps.join("out").is_file());
        std::fs::remove_dir_all(&temps).unwrap();
        std::fs::remove_file(&exe).unwrap();
    }
}

/// The runtime exports nothing but its `__wrap_*` entry points, so a packed program can link
/// its own zstd: Debian's static libzstd (`libzstd-dev`) next to the runtime links, and the
/// program gets Debian's zstd, not the runtime's copy. A packed executable and shared library
/// add no global symbol of the runtime's but `__wrap_*` (and the .so exports none of those).
#[test]
fn the_runtime_exports_only_its_entry_points() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let libzstd = Path::new("/usr/lib/x86_64-linux-gnu/libzstd.a");
    assert!(
        libzstd.exists(),
        "libzstd.a not found: apt-get install libzstd-dev (.ci/run does)"
    );
    let c = dir.path().join("z.c");
    std::fs::write(
        &c,
        "#include <stdio.h>\n#include <zstd.h>\nint launch_fill(int*);\n\
         int main(int argc, char** argv) {\n  char src[64] = \"fatpack\", dst[256];\n\
           size_t n = ZSTD_compress(dst, sizeof dst, src, sizeof src, 3);\n\
           if (argc > 5) launch_fill(0);\n\
           printf(\"%u %d\\n\", ZSTD_versionNumber(), (int)ZSTD_isError(n));\n  return 0;\n}\n",
    )
    .unwrap();
    let o = dir.path().join("z.o");
    let (code, _, err) = run(Command::new("gcc").arg("-c").arg(&c).arg("-o").arg(&o));
    assert_eq!(code, 0, "{err}");
    let exe = dir.path().join("z");
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &[o.clone(), fixture("kernels.o"), libzstd.to_path_buf()],
        &cuda,
        &[],
    );
    assert_eq!(code, 0, "packed program with Debian's libzstd.a: {err}");
    assert_eq!(inspect_json(&exe)["packed"]["digest_matches"], true);
    // Debian's zstd.h says which version that libzstd.a is.
    let header = std::fs::read_to_string("/usr/include/zstd.h").unwrap();
    let num = |name: &str| -> u32 {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    let debian = num("ZSTD_VERSION_MAJOR") * 10000
        + num("ZSTD_VERSION_MINOR") * 100
        + num("ZSTD_VERSION_RELEASE");
    assert_eq!(run(&mut Command::new(&exe)).1, format!("{debian} 0\n"));

    // Global definitions a packed build has that the plain build of the same objects has not.
    let globals = |f: &Path, dynamic: bool| -> std::collections::BTreeSet<String> {
        let (_, out, _) = run(Command::new("readelf")
            .arg(if dynamic { "--dyn-syms" } else { "-s" })
            .arg("-W")
            .arg(f));
        out.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                // Hidden globals are as local as locals to everything outside the file.
                (f.len() >= 8 && f[4] != "LOCAL" && f[5] != "HIDDEN" && f[6] != "UND")
                    .then(|| f[7].to_string())
            })
            .collect()
    };
    let plain = dir.path().join("plain");
    let (code, _, err) = gxx(None, &plain, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let packed = dir.path().join("packed");
    let (code, _, err) = gxx(Some(w.path()), &packed, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let added: Vec<String> = globals(&packed, false)
        .difference(&globals(&plain, false))
        .filter(|s| !s.starts_with("__wrap_"))
        .cloned()
        .collect();
    assert!(added.is_empty(), "the runtime leaks {added:?}");
    let so = dir.path().join("libk.so");
    let (code, _, err) = gxx(
        Some(w.path()),
        &so,
        &[fixture("kernels.o"), fixture("other.o")],
        &cuda,
        &["-shared"],
    );
    assert_eq!(code, 0, "{err}");
    let exported: Vec<String> = globals(&so, true)
        .into_iter()
        .filter(|s| s.starts_with("__wrap_") || s.starts_with("ZSTD") || s.contains("blake3"))
        .collect();
    assert!(exported.is_empty(), "libk.so exports {exported:?}");
}

/// Whether the installed mold gives notes of different alignments their own PT_NOTE
/// (mold 2.x does; Debian 12's mold 1.10 does not).
fn mold_splits_notes() -> bool {
    let (_, v, _) = run(Command::new("mold").arg("--version"));
    let major: u32 = v
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.split('.').next())
        .and_then(|s| s.parse().ok())
        .expect("mold --version");
    major >= 2
}

/// The default linker (GNU ld) maps the store with the image: a read-only PT_LOAD past
/// everything else, the section allocated at that address, and the glue note no longer a
/// note (readelf would warn about its alignment).
#[test]
fn the_store_is_mapped_by_a_pt_load_of_its_own() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(inspect_json(&exe)["packed"]["mapped"], true);
    let data = std::fs::read(&exe).unwrap();
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::{Object, ObjectSection};
    let f = object::File::parse(&*data).unwrap();
    let sec = f.section_by_name(".fatpack").unwrap();
    let (off, size) = sec.file_range().unwrap();
    let hdr = object::elf::FileHeader64::<object::LittleEndian>::parse(&*data).unwrap();
    let e = object::LittleEndian;
    let loads: Vec<_> = hdr
        .program_headers(e, &*data)
        .unwrap()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD)
        .collect();
    let last = loads.last().unwrap();
    assert_eq!(last.p_offset(e), off);
    assert_eq!(last.p_filesz(e), size);
    assert_eq!(last.p_vaddr(e), sec.address());
    assert_eq!(last.p_flags(e), object::elf::PF_R);
    for p in &loads[..loads.len() - 1] {
        assert!(p.p_vaddr(e) + p.p_memsz(e) <= last.p_vaddr(e));
    }
    let (_, _, warnings) = run(Command::new("readelf").args(["-n", "-W"]).arg(&exe));
    assert!(!warnings.contains("Warning"), "{warnings}");
}

/// Entries nvcc already compressed with zstd keep their frames in the store (the link only
/// decodes them once, to check and deduplicate them); a level given with `--fatpack-level`
/// compresses them again and keeps whichever frame is smaller: no entry is stored larger than
/// nvcc's frame; at level 1 every one keeps nvcc's, and at level 19 the PTX nvcc compressed
/// in its default mode (`kernels.o`) is stored smaller, while the size mode's frames
/// (`kernels_size.o`) stay. All read back (extract checks every blob).
#[test]
fn nvcc_zstd_frames_are_kept_or_kept_where_smaller() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let stored = |r: &serde_json::Value, origin: &str| -> Vec<(String, u64)> {
        r["modules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["origin"].as_str().unwrap().contains(origin))
            .flat_map(|m| m["entries"].as_array().unwrap().clone())
            .map(|e| {
                (
                    e["arch"].as_str().unwrap().to_string(),
                    e["stored_size"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    for object in ["kernels_size.o", "kernels.o"] {
        let objs = vec![fixture("main.o"), fixture(object), fixture("other.o")];
        // The entries nvcc compressed with zstd (the others are the link's to compress).
        let zstd: Vec<String> = inspect_json(&fixture(object))["modules"][0]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["compression"] == "zstd")
            .map(|e| e["arch"].as_str().unwrap().to_string())
            .collect();
        let only_zstd = |v: Vec<(String, u64)>| -> Vec<(String, u64)> {
            v.into_iter().filter(|(a, _)| zstd.contains(a)).collect()
        };
        let nvcc = only_zstd(stored(&inspect_json(&fixture(object)), object));
        assert!(!nvcc.is_empty());
        for (level, extra) in [
            (None, &[][..]),
            (Some(1), &["-Wl,--fatpack-level=1"][..]),
            (Some(19), &["-Wl,--fatpack-level=19"][..]),
        ] {
            let name = format!("{object}-{level:?}");
            let exe = dir.path().join(&name);
            let (code, _, err) = gxx(Some(w.path()), &exe, &objs, &cuda, extra);
            assert_eq!(code, 0, "{err}");
            let got = only_zstd(stored(&inspect_json(&exe), object));
            assert_eq!(got.len(), nvcc.len(), "{name}: {got:?}");
            for ((arch, g), (_, n)) in got.iter().zip(&nvcc) {
                assert!(
                    g <= n,
                    "{name}: {arch} stored in {g} bytes, nvcc's frame is {n}"
                );
            }
            let smaller = got.iter().zip(&nvcc).any(|((_, g), (_, n))| g < n);
            let want = level == Some(19) && object == "kernels.o";
            assert_eq!(smaller, want, "{name}: store {got:?}, nvcc {nvcc:?}");
            let out = dir.path().join(format!("{name}-x"));
            let (code, _, err) = run(Command::new(fatpack_bin())
                .arg("extract")
                .arg(&exe)
                .arg("-o")
                .arg(&out));
            assert_eq!(code, 0, "{name}: {err}");
            assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
        }
    }
}

/// ld writes into an output that is not a regular file (`-o /dev/null`, a FIFO) and replaces
/// a symlink; so does `fatpack ld`, and it creates nothing beside a FIFO.
#[test]
fn outputs_that_are_fifos_or_symlinks_are_treated_as_ld_treats_them() {
    use std::os::unix::fs::FileTypeExt;
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("out.fifo");
    let (code, _, err) = run(Command::new("mkfifo").arg(&fifo));
    assert_eq!(code, 0, "{err}");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let (code, _, err) = gxx(Some(w.path()), &fifo, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    // Checked before waiting for the reader: had the FIFO been replaced, nothing would ever
    // open it for writing (the blocked reader is left behind; the test still ends).
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO was replaced"
    );
    let bytes = reader.join().unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["out.fifo"], "left beside the FIFO: {names:?}");
    let got = dir.path().join("got");
    std::fs::write(&got, &bytes).unwrap();
    assert!(bytes.starts_with(b"\x7fELF"), "{} bytes", bytes.len());
    assert_eq!(module_names(&inspect_json(&got)).len(), 3);

    // A symlink output: replaced by the new file, its target untouched.
    let target = dir.path().join("target");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.path().join("app");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, _, err) = gxx(Some(w.path()), &link, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert_eq!(run(&mut Command::new(&link)).1, "fixture main ok\n");

    // The side-file mode needs a regular output: said, and nothing is written.
    let (code, _, err) = gxx(
        Some(w.path()),
        &fifo,
        &fixture_objs(),
        &cuda,
        &["-Wl,--fatpack-side-file"],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("--fatpack-side-file needs a regular output file"),
        "{err}"
    );
    assert!(!dir.path().join("out.fifo.fatpack").exists());
}

/// Two archive members with the same name (GNU ar keeps both): their modules are numbered
/// in member order, whatever order the threads rewrite them in, and the program runs.
#[test]
fn repeated_member_names_get_names_in_member_order() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    for (sub, obj) in [("a", "kernels.o"), ("b", "other.o")] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        std::fs::copy(fixture(obj), dir.path().join(sub).join("kernels.o")).unwrap();
    }
    let (code, _, err) = run(Command::new("ar")
        .args(["qc", "libtwice.a", "a/kernels.o", "b/kernels.o"])
        .current_dir(dir.path()));
    assert_eq!(code, 0, "{err}");
    let exe = dir.path().join("app");
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &[fixture("main.o"), dir.path().join("libtwice.a")],
        &cuda,
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let mut names = module_names(&inspect_json(&exe));
    names.sort();
    assert_eq!(
        names,
        [
            "libtwice.a(kernels.o)#0",
            "libtwice.a(kernels.o)#0~1",
            "main.o#0"
        ],
        "{names:?}"
    );
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
    // Which module is which follows member order: the second member's (other.o's) kernels
    // are in `#0~1`.
    let kernels_of = |r: &serde_json::Value, origin: &str| -> Vec<String> {
        let mut k: Vec<String> = r["modules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| origin.is_empty() || x["origin"].as_str() == Some(origin))
            .flat_map(|x| x["entries"].as_array().unwrap().clone())
            .flat_map(|e| e["kernels"].as_array().cloned().unwrap_or_default())
            .map(|k| k["mangled"].as_str().unwrap().to_string())
            .collect();
        k.sort();
        k.dedup();
        k
    };
    let report = inspect_json(&exe);
    let other = kernels_of(&inspect_json(&fixture("other.o")), "");
    assert!(!other.is_empty());
    assert_eq!(kernels_of(&report, "libtwice.a(kernels.o)#0~1"), other);
}

/// The budget: the runtime adds at most 150 KB to an output, and four pages more: one the
/// resumed solid groups took (825 bytes of code that crossed a page boundary; they cut the sum
/// of a release store's first loads 5-23 times, BENCHMARKS.md "Release stores"), one the
/// driver handoff took (6 KB of code: the stored frames handed to a driver that decodes them,
/// checked beside it; a first launch went from 1.28x to 1.16x nvcc's size mode, BENCHMARKS.md
/// "The stored frames handed to the driver"), one decoding ahead took (the helper thread and
/// the wrappers of the calls that start it: a first launch no longer decodes at all,
/// BENCHMARKS.md "Decoding ahead"), one the install hints took (1.2 KB of code: a missing
/// pack of a split package names the package and the command that installs it, issue 55;
/// the code had 23 bytes left in its page). The fixture program, plain and packed, as
/// `bench/runtime_size.sh` measures it (a change that pushes the runtime over a page boundary
/// shows here first).
#[test]
fn the_runtime_adds_at_most_150_kb_and_four_pages() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let (plain, packed) = (dir.path().join("plain"), dir.path().join("packed"));
    let (code, _, err) = gxx(None, &plain, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = gxx(Some(w.path()), &packed, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    let added = size(&packed) as i64 - size(&plain) as i64;
    assert!(
        added > 0 && added <= 166_384,
        "the packed fixture program is {added} bytes larger than the plain one (budget 166,384)"
    );
}

/// A link with no device code is the real linker's, byte for byte, through `gcc -B`; what
/// the real linker says about itself is asked once and kept under `FATPACK_CACHE_DIR`
/// (a later link reads it), and a damaged entry is asked again, never trusted.
#[test]
fn a_link_without_device_code_is_the_real_linkers_and_its_defaults_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let c = d.join("hello.c");
    std::fs::write(
        &c,
        "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n",
    )
    .unwrap();
    let wrap = wrapper_dir();
    let cache = d.join("cache");
    let link = |out: &Path, through: bool| {
        let mut cmd = Command::new("gcc");
        if through {
            cmd.arg(format!("-B{}", wrap.path().display()));
        }
        let (code, _, err) = run(cmd
            .env("FATPACK_CACHE_DIR", &cache)
            .arg("-o")
            .arg(out)
            .arg(&c));
        assert_eq!(code, 0, "{err}");
        std::fs::read(out).unwrap()
    };
    let plain = link(&d.join("plain"), false);
    assert!(
        link(&d.join("fp1"), true) == plain,
        "not the real linker's bytes"
    );
    let entries: Vec<PathBuf> = std::fs::read_dir(cache.join("linker-defaults"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let kept = std::fs::read_to_string(&entries[0]).unwrap();
    assert!(
        kept.starts_with("fatpack linker defaults 2\n") && kept.ends_with("end\n"),
        "{kept}"
    );
    assert!(link(&d.join("fp2"), true) == plain);
    std::fs::write(&entries[0], "fatpack linker defaults 2\ndir zz\n").unwrap();
    assert!(link(&d.join("fp3"), true) == plain);
    assert_eq!(
        std::fs::read_to_string(&entries[0]).unwrap(),
        kept,
        "asked again and kept"
    );
}

/// Every `--fatpack-*` option the parser takes (its one table) is in `fatpack help ld`, in
/// `fatpack ld --help` (which prints fatpack's own options first and then the real linker's
/// help), in the man page fatpack-ld(1), in the bash, zsh and fish completions, and in the
/// README's list.
#[test]
fn every_fatpack_option_is_in_the_helps_man_page_completions_and_readme() {
    let out = |args: &[&str]| {
        let (code, text, err) = run(Command::new(fatpack_bin()).args(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        text
    };
    let long = out(&["help", "ld"]);
    let ld_help = out(&["ld", "--help"]);
    let man = out(&["man", "ld"]);
    let shells = ["bash", "zsh", "fish"].map(|sh| (sh, out(&["completions", sh])));
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let ours = ld_help
        .find("--fatpack-side-file")
        .expect("fatpack's options");
    let theirs = ld_help.find("Usage:").expect("the real linker's help");
    assert!(ours < theirs, "{ld_help}");
    for o in fatpack::link::options::OPTIONS {
        let spelled = format!("--fatpack-{}", o.name);
        assert!(long.contains(&spelled), "`fatpack help ld` lacks {spelled}");
        assert!(
            ld_help.contains(&spelled),
            "`fatpack ld --help` lacks {spelled}"
        );
        assert!(
            long.contains(o.help),
            "`fatpack help ld` lacks what {spelled} does"
        );
        // roff escapes each `-` of the page's text.
        assert!(
            man.replace("\\-", "-").contains(&spelled),
            "fatpack-ld(1) lacks {spelled}"
        );
        for (sh, text) in &shells {
            // fish names a long option without its dashes (`-l fatpack-level`).
            let found = match *sh {
                "fish" => text.contains(&format!("-l fatpack-{} ", o.name)),
                _ => text.contains(&spelled),
            };
            assert!(found, "the {sh} completions lack {spelled}");
        }
        assert!(readme.contains(&spelled), "README.md lacks {spelled}");
    }
}

/// Every `FATPACK_*` variable read by code fatpack ships (the CLI, the runtime, the format
/// and store crates, the build script) is in the one table, `fatpack::environment`; each one
/// a link reads is in `fatpack help ld` and fatpack-ld(1), each one a packed program reads in
/// `fatpack --help` and fatpack(1), and each one a user sets in the README.
#[test]
fn every_environment_variable_is_in_the_table_the_helps_man_pages_and_readme() {
    use fatpack::environment::{Reader, VARIABLES};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut read = std::collections::BTreeSet::new();
    let mut files = vec![root.join("build.rs")];
    for dir in ["src", "runtime/src", "format/src", "cubin-store/src"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
    }
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("FATPACK_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            // `FATPACK_RT_<TOOL>` in build.rs is a pattern whose names the table lists;
            // FATPACK_PREFIX is the name of a Rust constant (`--fatpack-`), not a variable.
            if !name.ends_with('_') && name != "FATPACK_PREFIX" {
                read.insert((name, f.strip_prefix(root).unwrap().display().to_string()));
            }
        }
    }
    assert!(read.len() > 10, "the scan found {read:?}");
    for (name, file) in &read {
        assert!(
            VARIABLES.iter().any(|v| v.name == name),
            "{file} reads {name}, which fatpack::environment::VARIABLES lacks"
        );
    }
    let out = |args: &[&str]| {
        let (code, text, err) = run(Command::new(fatpack_bin()).args(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        // roff escapes each `-` and `_` of a page's text as the helps print it, and sets a
        // variable's name and value in fonts (its ENVIRONMENT section).
        text.replace("\\-", "-")
            .replace("\\_", "_")
            .replace("\\fB", "")
            .replace("\\fI", "")
            .replace("\\fR", "")
    };
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (help_ld, man_ld) = (out(&["help", "ld"]), out(&["man", "ld"]));
    let (help, man) = (out(&["--help"]), out(&["man"]));
    for v in VARIABLES {
        let spelled = format!("{}={}", v.name, v.value);
        let (in_help, in_man) = match v.reader {
            Reader::Link => (help_ld.contains(&spelled), man_ld.contains(&spelled)),
            Reader::Program => (help.contains(&spelled), man.contains(&spelled)),
            Reader::Build | Reader::Internal => (true, true),
        };
        assert!(
            in_help && in_man,
            "{spelled}: help {in_help}, man page {in_man}"
        );
        if v.reader != Reader::Internal {
            assert!(readme.contains(v.name), "README.md lacks {}", v.name);
        }
    }
}

/// An archive named inside an implicit linker script (`-ldev` finding `libdev.so`, which is
/// `INPUT(libdevreal.a)`; and one script deeper, `libouter.so` naming `-ldev`) is scanned and
/// packed like one on the line: the direct route links the scripts as given, the copy route
/// gives ld copies of the scripts naming the rewritten archive, and what ld writes about
/// files (its depfile) names the user's.
#[test]
fn inputs_named_inside_implicit_linker_scripts_are_packed() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::copy(fixture("libfixture.a"), sub.join("libdevreal.a")).unwrap();
    std::fs::write(
        sub.join("libdev.so"),
        "/* GNU ld script */\nINPUT ( libdevreal.a )\n",
    )
    .unwrap();
    std::fs::write(
        sub.join("libouter.so"),
        "GROUP ( -ldev AS_NEEDED ( -lm ) )\n",
    )
    .unwrap();
    // Calls the archive's launcher (so ld takes its member), never at run time.
    let main_c = d.join("m.c");
    std::fs::write(
        &main_c,
        "int launch_fill(int*);\nint main(int c, char** v){ if (c > 5) launch_fill(0); return 0; }\n",
    )
    .unwrap();
    let main_o = d.join("m.o");
    let (code, _, err) = run(Command::new("gcc")
        .arg("-c")
        .arg(&main_c)
        .arg("-o")
        .arg(&main_o));
    assert_eq!(code, 0, "{err}");
    for lib in ["dev", "outer"] {
        for route in ["copy", "direct"] {
            let what = format!("-l{lib}, {route} route");
            let exe = d.join(format!("app-{lib}-{route}"));
            let l = format!("-l{lib}");
            let depfile = format!("-Wl,--dependency-file={}.d", exe.display());
            let flags = [
                "-Lsub",
                l.as_str(),
                &format!("-Wl,--fatpack-route={route}"),
                "-Wl,--fatpack-verbose",
                &depfile,
            ];
            let (code, _, err) = gxx_in(d, w.path(), &exe, &main_o, &cuda, &flags);
            assert_eq!(code, 0, "{what}: {err}");
            assert!(err.contains(&format!("route: {route}")), "{what}: {err}");
            let r = inspect_json(&exe);
            assert_eq!(r["packed"]["digest_matches"], true, "{what}");
            assert_eq!(
                module_names(&r),
                ["sub/libdevreal.a(kernels.o)#0"],
                "{what}"
            );
            assert_eq!(run(&mut Command::new(&exe)).0, 0, "{what}");
            let deps = std::fs::read_to_string(format!("{}.d", exe.display())).unwrap();
            assert!(deps.contains("sub/libdevreal.a"), "{what}: {deps}");
            assert!(deps.contains(&format!("sub/lib{lib}.so")), "{what}: {deps}");
            assert!(!deps.contains("fatpack"), "{what}: {deps}");
        }
        // The copy route's temps: the archive's copy, and a copy of each script up to the
        // line's input, each naming the copy below it.
        let exe = d.join("app-temps");
        let l = format!("-l{lib}");
        let flags = ["-Lsub", l.as_str(), "-Wl,--fatpack-route=copy"];
        let mut dry = flags.to_vec();
        dry.push("-Wl,--fatpack-dry-run");
        let (code, out, err) = gxx_in(d, w.path(), &exe, &main_o, &cuda, &dry);
        assert_eq!(code, 0, "{err}");
        let top = if lib == "dev" {
            "<fatpack>/0001-libdev.so"
        } else {
            "<fatpack>/0002-libouter.so"
        };
        assert!(out.contains("would rewrite sub/libdevreal.a ("), "{out}");
        assert!(
            out.contains(&format!("'{top}'")) && !out.contains(&format!(" {l} ")),
            "{out}"
        );
        let mut save = flags.to_vec();
        save.push("-Wl,--fatpack-save-temps");
        let (code, _, err) = gxx_in(d, w.path(), &exe, &main_o, &cuda, &save);
        assert_eq!(code, 0, "{err}");
        let temps = d.join("app-temps.fatpack-temps");
        let read = |name: &str| std::fs::read_to_string(temps.join(name)).unwrap();
        assert_eq!(
            read("0001-libdev.so"),
            format!(
                "/* GNU ld script */\nINPUT ( \"{}\" )\n",
                temps.join("0000-libdevreal.a").display()
            )
        );
        if lib == "outer" {
            assert_eq!(
                read("0002-libouter.so"),
                format!(
                    "GROUP ( \"{}\" AS_NEEDED ( -lm ) )\n",
                    temps.join("0001-libdev.so").display()
                )
            );
        }
        std::fs::remove_dir_all(&temps).unwrap();
    }
    // A `-T` script's own INPUT is not read for device code: where its archive's code
    // reaches the output beside code that was packed, the error says where it came from,
    // and no output is left.
    std::fs::write(
        d.join("x.ld"),
        "INPUT(sub/libdevreal.a)\nSECTIONS { .fpx : { *(.fpx) } } INSERT AFTER .text;\n",
    )
    .unwrap();
    let exe = d.join("app-t");
    let other = fixture("other.o");
    let flags = [other.to_str().unwrap(), "-Wl,-T,x.ld"];
    let (code, _, err) = gxx_in(d, w.path(), &exe, &main_o, &cuda, &flags);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("holds device code that was not packed")
            && err.contains("the linker script x.ld names files (INPUT, GROUP)"),
        "{err}"
    );
    assert!(!exe.exists());
}

/// [`gxx`] run in `dir`, with `main_o` and `flags` before the CUDA libraries.
fn gxx_in(
    dir: &Path,
    wrapper: &Path,
    out: &Path,
    main_o: &Path,
    cuda: &Path,
    flags: &[&str],
) -> (i32, String, String) {
    run(Command::new("g++")
        .current_dir(dir)
        .arg(format!("-B{}", wrapper.display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg("-o")
        .arg(out)
        .arg(main_o)
        .args(flags)
        .arg(format!("-L{}", cuda.display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]))
}
