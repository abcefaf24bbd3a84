//! `fatpack ld --fatpack-route=direct`: the inputs linked as given and the output's
//! containers replaced by stubs afterwards. Every case is checked against the copy route on
//! the same inputs: the same store bytes, and the same registrations and launches against the
//! fake cudart (nvcc's own host code from the fixtures registers and launches); the output
//! is sound (eu-elflint says nothing the copy route's output does not make it say) and the
//! same bytes link after link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::rt_harness::fakes;

/// Links `inputs` through fatpack by `route` against the fake cudart; returns the linker's
/// stderr (`--fatpack-verbose`).
fn link(w: &Path, route: &str, out: &Path, inputs: &[PathBuf], extra: &[&str]) -> String {
    let (code, _, err) = run(fake_link(w, out, inputs)
        .arg(format!("-Wl,--fatpack-route={route}"))
        .args(extra));
    assert_eq!(code, 0, "{route} {extra:?}: {err}");
    // A small program's sizes are said in bytes or KiB, never as `0.0 MiB`.
    assert!(
        !err.contains(" 0.0 ") && err.contains("KiB of device code stored in"),
        "{route}: {err}"
    );
    err
}

/// The g++ line that links `inputs` through fatpack (`--fatpack-verbose`) against the fake
/// cudart into `out`.
fn fake_link(w: &Path, out: &Path, inputs: &[PathBuf]) -> Command {
    let mut c = Command::new("g++");
    c.arg(format!("-B{}", w.display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg("-Wl,--fatpack-verbose")
        .arg("-o")
        .arg(out)
        .args(inputs)
        .arg(format!("-L{}", fakes().display()))
        .arg("-lfakecudart")
        .arg(format!("-Wl,-rpath,{}", fakes().display()));
    c
}

/// The fake cudart's log of a launch of the fixture program (`exe go` launches its kernels)
/// on an sm_90 device.
fn launch_log(exe: &Path) -> String {
    let r = crate::rt_harness::run(exe, "go", Some("90"), &[]);
    assert_eq!(
        r.stdout,
        "fixture main ok\n",
        "{}: {}",
        exe.display(),
        r.stderr
    );
    assert!(
        r.log.contains("launchkernel fill_iota"),
        "{}: {}",
        exe.display(),
        r.log
    );
    r.log
}

/// The bytes of section `name` of `file` (empty when it has none).
fn section(file: &Path, name: &str) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(file).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.section_by_name(name)
        .map(|s| s.data().unwrap().to_vec())
        .unwrap_or_default()
}

/// Checks what the steps after the link leave between and after the sections of `file`: the
/// bytes before the store section are zeros (not what the linker or a cut left there), and
/// the file ends with its section header table (nothing dead after it).
fn assert_no_stale_bytes(file: &Path) {
    use object::read::elf::{FileHeader, SectionHeader};
    let data = std::fs::read(file).unwrap();
    let header = object::elf::FileHeader64::<object::Endianness>::parse(&*data).unwrap();
    let e = header.endian().unwrap();
    let sections = header.sections(e, &*data).unwrap();
    let store = sections
        .iter()
        .find(|s| sections.section_name(e, s).unwrap() == b".fatpack")
        .expect("a store section");
    let at = store.sh_offset(e);
    let before = sections
        .iter()
        .filter(|s| s.sh_type(e) != object::elf::SHT_NOBITS && s.sh_offset(e) < at)
        .map(|s| s.sh_offset(e) + s.sh_size(e))
        .max()
        .unwrap();
    let pad = &data[before as usize..at as usize];
    assert!(pad.iter().all(|&b| b == 0), "{}: {pad:?}", file.display());
    assert_eq!(table_end(&data), data.len() as u64, "{}", file.display());
}

/// Where the section header table of the ELF file `data` ends.
fn table_end(data: &[u8]) -> u64 {
    use object::read::elf::FileHeader;
    let header = object::elf::FileHeader64::<object::Endianness>::parse(data).unwrap();
    let e = header.endian().unwrap();
    header.e_shoff(e) + u64::from(header.e_shnum(e)) * u64::from(header.e_shentsize(e))
}

/// What `eu-elflint --gnu-ld` says about `file`, as a set of messages.
fn elflint(file: &Path) -> BTreeSet<String> {
    let (_, out, err) = run(Command::new(tool("eu-elflint", "apt-get install elfutils"))
        .arg("--gnu-ld")
        .arg(file));
    let name = file.display().to_string();
    out.lines()
        .chain(err.lines())
        .map(|l| l.replace(&name, "FILE"))
        .filter(|l| !l.trim().is_empty() && l.trim() != "No errors")
        .collect()
}

fn route_line(err: &str) -> &str {
    err.lines()
        .find_map(|l| l.strip_prefix("fatpack:   route: "))
        .unwrap_or_else(|| panic!("no route line: {err}"))
}

/// The direct route's output against the copy route's, for one link.
fn same_as_copy(
    w: &Path,
    dir: &Path,
    name: &str,
    inputs: &[PathBuf],
    extra: &[&str],
    launch: bool,
) {
    let copy = dir.join(format!("{name}-copy"));
    let direct = dir.join(format!("{name}-direct"));
    let again = dir.join(format!("{name}-direct-again"));
    let err = link(w, "copy", &copy, inputs, extra);
    assert!(route_line(&err).starts_with("copy: "), "{name}: {err}");
    let err = link(w, "direct", &direct, inputs, extra);
    assert!(route_line(&err).starts_with("direct: "), "{name}: {err}");
    link(w, "direct", &again, inputs, extra);
    assert!(
        std::fs::read(&direct).unwrap() == std::fs::read(&again).unwrap(),
        "{name}: two direct links of the same inputs differ"
    );
    let r = inspect_json(&direct);
    assert_eq!(r["packed"]["digest_matches"], true, "{name}");
    // The same modules under the same names, the same blobs: the same store bytes.
    let store = section(&direct, ".fatpack");
    assert!(!store.is_empty(), "{name}");
    assert!(
        store == section(&copy, ".fatpack"),
        "{name}: the stores differ"
    );
    // Only stubs are left of the device code, and the file lost it.
    assert!(section(&direct, ".nv_fatbin").len() < 512, "{name}");
    let extra_lint: Vec<String> = elflint(&direct)
        .difference(&elflint(&copy))
        .cloned()
        .collect();
    assert!(extra_lint.is_empty(), "{name}: eu-elflint: {extra_lint:?}");
    if launch {
        assert_eq!(launch_log(&direct), launch_log(&copy), "{name}");
    }
}

#[test]
fn the_direct_route_registers_and_stores_what_the_copy_route_does() {
    crate::common::tool("ld.lld", "apt-get install lld");
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let main_o = c_object(
        dir.path(),
        "m",
        "#include <stdio.h>\nint launch_fill(int*);\nint main(int c, char** v){ if (c > 1) launch_fill(0); puts(\"fixture main ok\"); return 0; }\n",
    );
    let objs = fixture_objs();
    let cases: [(&str, Vec<PathBuf>, &[&str]); 6] = [
        ("pie", objs.clone(), &[]),
        ("no-pie", objs.clone(), &["-no-pie"]),
        ("lld", objs.clone(), &["-fuse-ld=lld"]),
        ("lld-no-pie", objs.clone(), &["-fuse-ld=lld", "-no-pie"]),
        (
            "archive",
            vec![main_o.clone(), fixture("libfixture.a")],
            &[],
        ),
        (
            "thin-archive",
            vec![main_o.clone(), fixture("libfixture_thin.a")],
            &[],
        ),
    ];
    for (name, inputs, extra) in &cases {
        same_as_copy(w.path(), dir.path(), name, inputs, extra, true);
    }
}

#[test]
fn the_direct_route_packs_a_shared_library() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let objs = [fixture("kernels.o"), fixture("other.o")];
    for (name, extra) in [("bfd", "-fuse-ld=bfd"), ("lld", "-fuse-ld=lld")] {
        same_as_copy(
            w.path(),
            dir.path(),
            &format!("lib{name}.so"),
            &objs,
            &["-shared", extra],
            false,
        );
        // A program on the library registers and launches its device code the same way.
        let mut logs = Vec::new();
        for route in ["copy", "direct"] {
            let so = dir.path().join(format!("lib{name}.so-{route}"));
            let exe = dir.path().join(format!("uses-{name}-{route}"));
            let libs = [fixture("main.o"), so];
            let rpath = format!("-Wl,-rpath,{}", dir.path().display());
            link(w.path(), "copy", &exe, &libs, &[&rpath]);
            logs.push(launch_log(&exe));
        }
        assert_eq!(logs[0], logs[1], "{name}");
    }
}

#[test]
fn where_the_direct_route_cannot_go_the_link_copies() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    // The line's own linker script: ld's default one, given with -T.
    let (_, verbose, _) = run(Command::new("ld").arg("--verbose"));
    let script: String = verbose
        .split("==================================================")
        .nth(1)
        .expect("ld --verbose prints its default script")
        .to_string();
    let script_path = dir.path().join("own.ld");
    std::fs::write(&script_path, script).unwrap();
    let t = format!("-Wl,-T,{}", script_path.display());
    for (name, extra, why) in [
        ("gold", "-fuse-ld=gold", "gold does not support INSERT"),
        ("mold", "-fuse-ld=mold", "mold does not read SECTIONS"),
        ("script", t.as_str(), "the line gives its own linker script"),
    ] {
        let exe = dir.path().join(name);
        let err = link(w.path(), "direct", &exe, &fixture_objs(), &[extra]);
        let line = route_line(&err);
        assert!(
            line.starts_with("copy: the direct route is not for this link: ") && line.contains(why),
            "{name}: {line}"
        );
        assert_eq!(
            inspect_json(&exe)["packed"]["digest_matches"],
            true,
            "{name}"
        );
        launch_log(&exe);
    }
    // A misspelt value is an error, as every --fatpack- option's bad value is.
    for (bad, want) in [
        (
            "route=fast",
            "--fatpack-route=fast: want `auto`, `direct` or `copy`",
        ),
        (
            "early-link=maybe",
            "--fatpack-early-link=maybe: want `auto`, `yes` or `no`",
        ),
    ] {
        let (code, _, err) = gxx(
            Some(w.path()),
            &dir.path().join("bad"),
            &fixture_objs(),
            &cuda_lib(),
            &[&format!("-Wl,--fatpack-{bad}")],
        );
        assert_ne!(code, 0, "{bad}");
        assert!(err.contains(want), "{err}");
    }
}

/// Two archive members whose containers are the same bytes, pulled in the other order than
/// they sit in the archive: the direct route tells them apart by the source file each
/// object names (the output's symbol table has it before each container's symbol), and
/// gives them the copy route's names. Members stripped of their local symbols (`strip -x`,
/// as NVIDIA's static libraries are) are told apart by where the linker put the global
/// functions they define. Stripped (`-s`), the output cannot tell, and they are named in the
/// archive's order: both names stand for the same code, so the program registers and
/// launches exactly what the copy route's does.
#[test]
fn byte_identical_containers_pulled_out_of_order_keep_their_code() {
    let nvcc = cuda_tool("nvcc");
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("k.cu"),
        "static __global__ void kern(int* p) { if (p) p[threadIdx.x] = 1; }\n\
         #ifdef NEEDS\nextern \"C\" int NEEDS();\n#endif\n\
         extern \"C\" int NAME() { kern<<<1, 1>>>(nullptr);\n\
         #ifdef NEEDS\n return NEEDS() + 1;\n#else\n return 1;\n#endif\n}\n",
    )
    .unwrap();
    // b.o defines fb; a.o defines fa and needs fb; the archive holds b.o first, so ld pulls
    // a.o (for main's fa) and then b.o.
    for (obj, defs) in [
        ("b.o", vec!["-DNAME=fb"]),
        ("a.o", vec!["-DNAME=fa", "-DNEEDS=fb"]),
    ] {
        let (code, _, err) = run(Command::new(&nvcc)
            .args(["-arch=sm_90", "-c", "k.cu", "-o", obj])
            .args(&defs)
            .current_dir(d));
        assert_eq!(code, 0, "{err}");
    }
    assert!(
        section(&d.join("a.o"), ".nv_fatbin") == section(&d.join("b.o"), ".nv_fatbin"),
        "nvcc gave the two objects different device code"
    );
    let (code, _, err) = run(Command::new("ar")
        .args(["rcs", "libdup.a", "b.o", "a.o"])
        .current_dir(d));
    assert_eq!(code, 0, "{err}");
    // The same members stripped of local symbols, as NVIDIA ships its static libraries: no
    // `fatbinData` to find the source file by.
    for o in ["a", "b"] {
        std::fs::copy(d.join(format!("{o}.o")), d.join(format!("{o}x.o"))).unwrap();
    }
    let (code, _, err) = run(Command::new("strip")
        .args(["-x", "ax.o", "bx.o"])
        .current_dir(d));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(Command::new("ar")
        .args(["rcs", "libdupx.a", "bx.o", "ax.o"])
        .current_dir(d));
    assert_eq!(code, 0, "{err}");
    let main_o = c_object(
        d,
        "m",
        "#include <stdio.h>\nint fa(void);\nint main(int c, char** v) { if (c > 1 && fa() == 2) puts(\"fixture main ok\"); else if (c == 1) puts(\"fixture main ok\"); return 0; }\n",
    );
    let mut names = Vec::new();
    let mut logs = Vec::new();
    for (lib, route, extra) in [
        ("libdup.a", "copy", None),
        ("libdup.a", "direct", None),
        ("libdup.a", "direct", Some("-Wl,-s")),
        ("libdupx.a", "copy", None),
        ("libdupx.a", "direct", None),
    ] {
        let inputs = [main_o.clone(), d.join(lib)];
        let exe = d.join(format!("{lib}-{route}{}", extra.unwrap_or("")));
        let err = link(w.path(), route, &exe, &inputs, extra.as_slice());
        assert!(route_line(&err).starts_with(route), "{err}");
        let r = inspect_json(&exe);
        assert_eq!(r["packed"]["digest_matches"], true, "{route}");
        let mods: Vec<String> = r["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["origin"].as_str().unwrap().to_string())
            .collect();
        names.push(mods);
        let run = crate::rt_harness::run(&exe, "go", Some("90"), &[]);
        assert_eq!(run.stdout, "fixture main ok\n", "{route}: {}", run.stderr);
        assert!(run.log.contains("launchkernel"), "{route}: {}", run.log);
        logs.push(run.log);
    }
    assert_eq!(
        names[0],
        ["libdup.a(a.o)#0", "libdup.a(b.o)#0"],
        "link order"
    );
    assert_eq!(names[1], names[0], "told apart by their source files");
    assert_eq!(
        names[2],
        ["libdup.a(b.o)#0", "libdup.a(a.o)#0"],
        "stripped: archive order"
    );
    assert_eq!(
        names[3],
        ["libdupx.a(ax.o)#0", "libdupx.a(bx.o)#0"],
        "link order"
    );
    assert_eq!(names[4], names[3], "told apart by where fa and fb went");
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[0], logs[2]);
    assert_eq!(logs[3], logs[4]);
}

/// The default route (`auto`) weighs what each route writes: the copy route copies the
/// inputs' other bytes, the direct route has the linker write their device code. The
/// fixtures are mostly device code: copied. The same objects with 1 MB of host data each
/// beside it: linked as given. Either way the program registers and launches the same.
#[test]
fn the_default_route_is_the_one_that_writes_less() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("host.bin");
    std::fs::write(
        &data,
        (0..1_000_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761) as u8)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let mut heavy = Vec::new();
    for o in fixture_objs() {
        let out = dir.path().join(o.file_name().unwrap());
        let (code, _, err) = run(Command::new("objcopy")
            .arg(format!("--add-section=.hostdata={}", data.display()))
            .arg("--set-section-flags=.hostdata=alloc,load,data,contents")
            .arg(&o)
            .arg(&out));
        assert_eq!(code, 0, "{err}");
        heavy.push(out);
    }
    let mut logs = Vec::new();
    for (name, inputs, want) in [
        (
            "fixtures",
            fixture_objs(),
            "copy: the inputs with device code hold more of it",
        ),
        ("host-heavy", heavy, "direct: "),
    ] {
        let exe = dir.path().join(name);
        let (code, _, err) = run(&mut fake_link(w.path(), &exe, &inputs));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(route_line(&err).starts_with(want), "{name}: {err}");
        logs.push(launch_log(&exe));
    }
    assert_eq!(logs[0], logs[1]);
}

/// The early link (`--fatpack-early-link`, started before the scan): the same bytes as the
/// link started after it, whatever becomes of it. Used where the scan leaves the direct route
/// open; stopped, with nothing of it left, where the scan sends the link down the copy route
/// or finds no device code at all.
#[test]
fn the_early_link_changes_no_byte() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let early_line = |err: &str| -> String {
        err.lines()
            .find_map(|l| l.strip_prefix("fatpack:   early link: "))
            .unwrap_or_else(|| panic!("no early-link line: {err}"))
            .to_string()
    };
    let host = c_object(dir.path(), "host", "int main(void) { return 0; }\n");
    let cases: [(&str, &str, Vec<PathBuf>, Option<&str>); 3] = [
        (
            "direct",
            "direct",
            fixture_objs(),
            Some("started before the scan, and used"),
        ),
        // The fixtures are mostly device code: `auto` copies them.
        (
            "auto",
            "auto",
            fixture_objs(),
            Some("stopped: the link takes the copy route"),
        ),
        // No device code: the line goes to the real linker as given.
        ("host", "auto", vec![host], None),
    ];
    for (name, route, inputs, said) in cases {
        let out = |early: &str| {
            let exe = dir.path().join(format!("{name}-{early}"));
            let (code, _, err) = run(fake_link(w.path(), &exe, &inputs)
                .arg(format!("-Wl,--fatpack-route={route}"))
                .arg(format!("-Wl,--fatpack-early-link={early}"))
                .env("TMPDIR", &tmp));
            assert_eq!(code, 0, "{name} {early}: {err}");
            (std::fs::read(&exe).unwrap(), err)
        };
        let (started, err) = out("yes");
        let (after, err_no) = out("no");
        assert!(
            started == after,
            "{name}: the early link changed the output"
        );
        if let Some(said) = said {
            assert_eq!(early_line(&err), said, "{name}");
            assert!(early_line(&err_no).starts_with("not started"), "{name}");
        } else {
            assert!(!err.contains("early link"), "{name}: {err}");
        }
        // Nothing left of a stopped link: no temp folder, here or in TMPDIR.
        for d in [dir.path(), tmp.as_path()] {
            let left: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".fatpack") || n.starts_with("fatpack"))
                .collect();
            assert!(left.is_empty(), "{name}: left in {}: {left:?}", d.display());
        }
    }
}

/// `--fatpack-early-link=auto` starts the link before the scan only where the line names
/// cudart and an archive of 16 MiB or more: a small program's objects (mostly device code,
/// so the copy route) are not linked twice; a line with a large archive is linked early, and
/// the scan leaves its route direct.
#[test]
fn auto_starts_the_link_early_only_beside_a_large_archive() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let cuda = cuda_lib();
    let early = |err: &str| -> String {
        err.lines()
            .find_map(|l| l.strip_prefix("fatpack:   early link: "))
            .unwrap_or_else(|| panic!("no early-link line: {err}"))
            .to_string()
    };
    let small = dir.path().join("small");
    let (code, _, err) = gxx(
        Some(w.path()),
        &small,
        &fixture_objs(),
        &cuda,
        &["-Wl,--fatpack-verbose"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(early(&err).starts_with("not started"), "{err}");
    // The fixture's kernels in an archive beside 16 MiB of other bytes.
    let pad = dir.path().join("pad.bin");
    std::fs::write(&pad, vec![0u8; 16 << 20]).unwrap();
    let lib = dir.path().join("libbig.a");
    let st = Command::new("ar")
        .arg("rcs")
        .arg(&lib)
        .arg(fixture("kernels.o"))
        .arg(fixture("other.o"))
        .arg(&pad)
        .status()
        .unwrap();
    assert!(st.success());
    let big = dir.path().join("big");
    let (code, _, err) = gxx(
        Some(w.path()),
        &big,
        &[fixture("main.o")],
        &cuda,
        &[
            "-Wl,--fatpack-verbose",
            &format!("-L{}", dir.path().display()),
            "-lbig",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(early(&err), "started before the scan, and used", "{err}");
}

/// After the real link, the output's headers are read once for all the steps that change it
/// (its store section, the store's segment, the slot, the build ID): on the copy route once;
/// on the direct route the cut reads them and checks what it wrote, and the store step goes
/// on from the headers the cut made.
#[test]
fn the_output_is_parsed_once_after_the_link() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    for (route, want) in [("copy", "once"), ("direct", "twice")] {
        let exe = dir.path().join(route);
        let (code, _, err) =
            run(fake_link(w.path(), &exe, &fixture_objs())
                .arg(format!("-Wl,--fatpack-route={route}")));
        assert_eq!(code, 0, "{route}: {err}");
        let line = err
            .lines()
            .find_map(|l| l.strip_prefix("fatpack:   output: its headers parsed "))
            .unwrap_or_else(|| panic!("{route}: no output line: {err}"));
        assert!(line.starts_with(want), "{route}: {line}");
        assert!(route_line(&err).starts_with(route), "{route}: {err}");
        // The steps after the link say where their time went, the cut's parts on the
        // direct route only.
        let parts = err
            .lines()
            .find_map(|l| l.strip_prefix("fatpack:   after the link, part by part: "))
            .unwrap_or_else(|| panic!("{route}: no parts line: {err}"));
        let names: Vec<&str> = parts
            .split(", ")
            .map(|p| p.rsplit_once(' ').expect(parts).0)
            .collect();
        let store = [
            "modules used",
            "store made ready",
            "store written",
            "digest and mapping",
        ];
        let cut = ["symbols", "plan", "compare", "cut"];
        let want: Vec<&str> = match route {
            "direct" => cut.iter().chain(&store).copied().collect(),
            _ => store.to_vec(),
        };
        assert_eq!(names, want, "{route}: {parts}");
        assert_no_stale_bytes(&exe);
        assert_eq!(inspect_json(&exe)["packed"]["digest_matches"], true);
    }
}

/// The direct route with the store in a side file: the cut's dead bytes, which no store is
/// written over, are cut from the binary, and the program runs from its side file.
#[test]
fn the_direct_route_with_a_side_file_leaves_no_dead_bytes() {
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("side");
    let (code, _, err) = run(fake_link(w.path(), &exe, &fixture_objs())
        .arg("-Wl,--fatpack-route=direct")
        .arg("-Wl,--fatpack-side-file"));
    assert_eq!(code, 0, "{err}");
    assert!(route_line(&err).starts_with("direct"), "{err}");
    let data = std::fs::read(&exe).unwrap();
    assert_eq!(
        table_end(&data),
        data.len() as u64,
        "dead bytes after the section table"
    );
    assert!(dir.path().join("side.fatpack").is_file());
    assert_eq!(inspect_json(&exe)["packed"]["digest_matches"], true);
    launch_log(&exe);
}
