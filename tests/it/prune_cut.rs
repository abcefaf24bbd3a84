//! `fatpack prune` of executables and shared libraries fatpack did not link: the freed
//! device code is cut out of the file (it shrinks), every loaded address stays, and the
//! result loads and runs, through every linker, PIE or not, with `-z separate-code` on and
//! off and with 4 KiB and 2 MiB segment alignment; a layout that cannot be cut keeps its
//! size and says why.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use object::{Object, ObjectSection, ObjectSymbol};

/// The allocated sections (name, address, size) other than the device code.
fn host_sections(file: &Path) -> Vec<(String, u64, u64)> {
    let data = std::fs::read(file).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.sections()
        .filter(|s| s.address() != 0 && s.name() != Ok(".nv_fatbin"))
        .map(|s| (s.name().unwrap().to_string(), s.address(), s.size()))
        .collect()
}

/// The archs of each module in `section` that its program loads itself, per `inspect`.
fn entries_in(file: &Path, section: &str) -> Vec<Vec<String>> {
    inspect_json(file)["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["section"] == section && m["loaded_by"] == "program")
        .map(|m| {
            m["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["arch"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

/// What `eu-elflint --gnu-ld` says about `file`, as a set of messages.
fn elflint(file: &Path) -> BTreeSet<String> {
    let (_, out, err) = run(Command::new(tool("eu-elflint", "apt-get install elfutils"))
        .arg("--gnu-ld")
        .arg(file));
    out.lines()
        .chain(err.lines())
        .map(|l| without_segment_numbers(&l.replace(&*file.to_string_lossy(), "FILE")))
        .collect()
}

/// `loadable segment [9] is ...` -> `loadable segment [] is ...`: the cut adds a segment, so
/// the same complaint about the same segment may carry another number.
fn without_segment_numbers(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("segment [") {
        let (head, tail) = rest.split_at(at + "segment [".len());
        out.push_str(head);
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// The device bytes a prune dropped, from its report.
fn dropped(report: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.split("device code ").nth(1))
        .and_then(|s| {
            let (a, b) = s.split_once(" -> ")?;
            Some(a.parse::<u64>().ok()? - b.split(' ').next()?.parse::<u64>().ok()?)
        })
        .expect("device code line")
}

/// Prunes `input` for 9.0 and checks the cut: smaller by about the dropped bytes (less than
/// two alignment units lost), the same host sections at the same addresses, no new
/// complaint from readelf or eu-elflint, only the kept entries listed. `in_place`: device
/// bytes dropped where they are (fatbins in the program's own data), which stay in the file.
fn prune_and_check(input: &Path, align: u64, in_place: u64, what: &str) -> PathBuf {
    let out = input.with_extension("sm90");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(input)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{what}: {err}");
    assert!(!err.contains("keeps its size"), "{what}: {err}");
    let (before, after) = (
        std::fs::metadata(input).unwrap().len(),
        std::fs::metadata(&out).unwrap().len(),
    );
    let gone = dropped(&err) - in_place;
    assert!(
        before - after + 2 * align > gone && before - after <= gone + in_place + align,
        "{what}: {before} -> {after} bytes, {gone} device bytes dropped"
    );
    assert_eq!(host_sections(input), host_sections(&out), "{what}");
    let (code, _, warnings) = run(Command::new("readelf").arg("-aW").arg(&out));
    assert_eq!(code, 0, "{what}");
    assert!(warnings.is_empty(), "{what}: readelf: {warnings}");
    let new: Vec<_> = elflint(&out).difference(&elflint(input)).cloned().collect();
    assert!(new.is_empty(), "{what}: eu-elflint: {new:?}");
    let listed = cuobjdump_list(&cuda_tool("cuobjdump"), &out);
    assert!(
        listed
            .iter()
            .all(|(k, a)| a == "sm_90" || (k == "PTX" && a == "sm_80")),
        "{what}: {listed:?}"
    );
    out
}

/// Executables (PIE and not) and a shared library with a program on it, through every
/// linker, with `-z separate-code` on and off: each pruned file runs.
#[test]
fn pruned_binaries_of_every_linker_shrink_and_run() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let big = big_objects(dir.path(), 3);
    let mut objs = fixture_objs();
    objs.extend(big.iter().cloned());
    for linker in ["bfd", "gold", "lld", "mold"] {
        tool(
            &format!("ld.{linker}"),
            &format!("apt-get install {linker}"),
        );
        // gold has one layout (code and read-only data in one segment) and no such option.
        let layouts: &[&str] = match linker {
            "gold" => &["default"],
            _ => &["separate-code", "noseparate-code"],
        };
        for &code_layout in layouts {
            let mut flags = vec![format!("-fuse-ld={linker}")];
            if code_layout != "default" {
                flags.push(format!("-Wl,-z,{code_layout}"));
            }
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            for pie in ["-pie", "-no-pie"] {
                let what = format!("{linker} {code_layout} {pie}");
                let exe = dir.path().join(format!("app-{linker}-{code_layout}{pie}"));
                let mut f = flags.clone();
                f.push(pie);
                let (code, _, err) = gxx(None, &exe, &objs, &cuda, &f);
                assert_eq!(code, 0, "{what}: {err}");
                let out = prune_and_check(&exe, 4096, 0, &what);
                assert_eq!(
                    run(&mut Command::new(&out)).1,
                    "fixture main ok\n",
                    "{what}"
                );
            }
            // The device code in a shared library; the program links the pruned one.
            let what = format!("{linker} {code_layout} -shared");
            let lib_dir = dir.path().join(format!("lib-{linker}-{code_layout}"));
            std::fs::create_dir(&lib_dir).unwrap();
            let lib = lib_dir.join("libcut.so");
            let lib_objs = objs[1..].to_vec();
            let mut f = flags.clone();
            f.push("-shared");
            let (code, _, err) = gxx(None, &lib, &lib_objs, &cuda, &f);
            assert_eq!(code, 0, "{what}: {err}");
            let pruned = prune_and_check(&lib, 4096, 0, &what);
            std::fs::rename(&pruned, &lib).unwrap();
            let exe = lib_dir.join("app");
            let (code, _, err) = run(Command::new("g++")
                .arg("-o")
                .arg(&exe)
                .arg(fixture("main.o"))
                .arg(format!("-L{}", lib_dir.display()))
                .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
                .arg("-lcut")
                .arg(format!("-L{}", cuda.display()))
                .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
            assert_eq!(code, 0, "{what}: {err}");
            assert_eq!(
                run(&mut Command::new(&exe)).1,
                "fixture main ok\n",
                "{what}"
            );
        }
    }
}

/// 2 MiB segment alignment (`-z max-page-size`, as cuSPARSE and cuFFT are linked): the cut
/// moves what follows by whole 2 MiB units. Too little freed code for one unit: the file
/// keeps its size, pruned in place, and says why.
#[test]
fn two_mib_alignment_cuts_whole_units_and_a_small_gain_falls_back_to_holes() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let mut objs = fixture_objs();
    objs.extend(big_objects(dir.path(), 32));
    let exe = dir.path().join("app2m");
    let flags = ["-Wl,-z,max-page-size=0x200000", "-Wl,-z,noseparate-code"];
    let (code, _, err) = gxx(None, &exe, &objs, &cuda, &flags);
    assert_eq!(code, 0, "{err}");
    let out = prune_and_check(&exe, 0x200000, 0, "2 MiB");
    assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");

    let small = dir.path().join("small2m");
    let (code, _, err) = gxx(None, &small, &fixture_objs(), &cuda, &flags);
    assert_eq!(code, 0, "{err}");
    let out = dir.path().join("small2m.sm90");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(&small)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("keeps its size") && err.contains("no whole alignment unit (0x200000"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&small).unwrap().len(),
        std::fs::metadata(&out).unwrap().len()
    );
    assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");
    let data = std::fs::read(&out).unwrap();
    let f = object::File::parse(&*data).unwrap();
    assert!(f.section_by_name(".nv_fatbin").is_some());
}

/// A C array holding `bytes`, 16-byte aligned, in `.data` (or the section `attrs` name).
fn c_array(name: &str, bytes: &[u8]) -> String {
    c_array_in(name, "", bytes)
}

fn c_array_in(name: &str, attrs: &str, bytes: &[u8]) -> String {
    let body: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
    format!(
        "__attribute__((aligned(16){attrs})) unsigned char {name}[{}] = {{{}}};\n",
        bytes.len(),
        body.join(",")
    )
}

/// Fatbins a library keeps in its own data and loads itself (as cuFFT does with 18,227 of
/// them in `.data`) are found, validated field by field (a lone magic is not taken for one),
/// reported as loaded by the program, and pruned where they are (code points at them) while
/// the library's `.nv_fatbin` is still cut out; one that no GPU listed runs is emptied.
#[test]
fn fatbins_in_a_librarys_own_data_are_found_and_pruned_where_they_are() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A container of sm_120 only, from real nvcc output.
    let af = d.join("af.fatbin");
    let (code, _, err) = run(Command::new("objcopy")
        .args(["-O", "binary", "--only-section=.nv_fatbin"])
        .arg(fixture("kernels_af.o"))
        .arg(&af));
    assert_eq!(code, 0, "{err}");
    let only120 = d.join("only120.fatbin");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--keep", "sm_120"])
        .arg(&af)
        .arg("-o")
        .arg(&only120));
    assert_eq!(code, 0, "{err}");
    let mut noise = 0xBA55_ED50u32.to_le_bytes().to_vec();
    noise.extend([1, 0, 16, 0, 200, 0, 0, 0, 0, 0, 0, 0]);
    noise.extend([7u8; 300]);
    let src = d.join("blobs.c");
    std::fs::write(
        &src,
        c_array("blob_all", &std::fs::read(fixture("kernels.fatbin")).unwrap())
            + &c_array("blob_120", &std::fs::read(&only120).unwrap())
            + &c_array("noise", &noise)
            // A fatbin in .nv_fatbin that no wrapper registers (cuSPARSE 12.6 has one at
            // the start of its .nv_fatbin, which its own code loads): it must not move.
            // Device code before another section (libtorch_nvshmem.so: __nv_relfatbin,
            // then .nvHRCE, then .nv_fatbin): the cut packs the last run, this stays.
            + &c_array_in(
                "relfat",
                ", section(\"__nv_relfatbin\")",
                &std::fs::read(fixture("kernels.fatbin")).unwrap(),
            )
            + &c_array_in("hrce", ", section(\".nvHRCE\")", &[1, 2, 3, 4])
            + &c_array_in(
                "pinned",
                ", section(\".nv_fatbin\")",
                &std::fs::read(fixture("kernels.fatbin")).unwrap(),
            )
            + "const unsigned char *blob(int i) { return i == 0 ? blob_all : i == 1 ? blob_120 : i == 2 ? pinned : i == 3 ? relfat : i == 4 ? hrce : noise; }\n",
    )
    .unwrap();
    let blobs = d.join("blobs.o");
    let (code, _, err) = run(Command::new("cc")
        .args(["-c", "-fPIC", "-O0"])
        .arg(&src)
        .arg("-o")
        .arg(&blobs));
    assert_eq!(code, 0, "{err}");
    // In the relocatable object too (static cuFFT keeps its fatbins in its objects'
    // `.ldata`): found, and pruned where they are.
    let blobs90 = d.join("blobs90.o");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(&blobs)
        .arg("-o")
        .arg(&blobs90));
    assert_eq!(code, 0, "{err}");
    assert_eq!(entries_in(&blobs, ".data").len(), 2);
    assert_eq!(
        entries_in(&blobs90, ".data"),
        [vec!["sm_90".to_string()], vec![]]
    );
    assert!(std::fs::metadata(&blobs90).unwrap().len() <= std::fs::metadata(&blobs).unwrap().len());
    let lib = d.join("libcut.so");
    // First, so that the pinned fatbin starts the library's .nv_fatbin.
    let mut objs = vec![blobs];
    objs.extend(fixture_objs()[1..].to_vec());
    objs.extend(big_objects(d, 3));
    let (code, _, err) = gxx(None, &lib, &objs, &cuda, &["-shared"]);
    assert_eq!(code, 0, "{err}");

    let sections = |f: &Path| -> Vec<(String, String, u64)> {
        inspect_json(f)["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["section"].as_str().unwrap().to_string(),
                    s["loaded_by"].as_str().unwrap().to_string(),
                    s["containers"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let before = sections(&lib);
    assert!(
        before.contains(&(".data".into(), "program".into(), 2)),
        "{before:?}"
    );
    assert!(
        before
            .iter()
            .any(|s| s.0 == ".nv_fatbin" && s.1 == "cudart"),
        "{before:?}"
    );
    // Dropped in place: kernels.fatbin but its sm_90 entry, and all of the sm_120 one (the
    // pinned container's dropped bytes are freed with the others).
    let in_place = 2 * (std::fs::read(fixture("kernels.fatbin")).unwrap().len() as u64 - 8500)
        + std::fs::read(&only120).unwrap().len() as u64
        - 32;
    let out = prune_and_check(&lib, 4096, in_place, "embedded");
    assert_eq!(
        sections(&out),
        before,
        "the same containers, where they were"
    );
    let data = entries_in(&out, ".data");
    assert_eq!(data, [vec!["sm_90".to_string()], vec![]]);
    // The arrays stay at their addresses: the program's pointers to them still hold.
    let f = std::fs::read(&out).unwrap();
    let obj = object::File::parse(&*f).unwrap();
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok("blob_all"))
        .expect("blob_all");
    let orig = std::fs::read(&lib).unwrap();
    let o = object::File::parse(&*orig).unwrap();
    let before_sym = o.symbols().find(|s| s.name() == Ok("blob_all")).unwrap();
    assert_eq!(sym.address(), before_sym.address());
    // The pinned fatbin is where the library's code looks for it, pruned to sm_90.
    let at = |f: &object::File, name: &str| {
        let s = f.symbols().find(|s| s.name() == Ok(name)).unwrap();
        let sec = f.section_by_name(".nv_fatbin").unwrap();
        assert!(s.address() >= sec.address(), "{name} not in .nv_fatbin");
        let (off, _) = sec.file_range().unwrap();
        (s.address(), (off + s.address() - sec.address()) as usize)
    };
    // So is the device code before .nvHRCE, pruned where it is.
    let relfat = obj
        .section_by_name("__nv_relfatbin")
        .expect("__nv_relfatbin");
    let hrce = obj.section_by_name(".nvHRCE").expect(".nvHRCE");
    assert!(
        relfat.address() < hrce.address(),
        "layout: __nv_relfatbin, .nvHRCE, ..."
    );
    assert_eq!(
        relfat.address(),
        o.section_by_name("__nv_relfatbin").unwrap().address()
    );
    let (fb, _) = fatpack::fatbin::parse_one(relfat.data().unwrap(), 0).unwrap();
    assert_eq!(fb.entries.len(), 1);
    let (addr, off) = at(&obj, "pinned");
    assert_eq!(addr, at(&o, "pinned").0);
    let (fb, _) = fatpack::fatbin::parse_one(&f[off..], 0).unwrap();
    let archs: Vec<String> = fb.entries.iter().map(|e| e.arch_name()).collect();
    assert_eq!(archs, ["sm_90"]);
}

/// Symbols that name a place inside a device section other than a container's start (its
/// end, the middle of a container) follow the cut: none is left past what the section now
/// holds (eu-elflint: "st_value out of bounds"), and a container's sized symbol takes the
/// pruned container's size.
#[test]
fn symbols_inside_device_sections_stay_inside() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut objs = fixture_objs();
    objs.extend(big_objects(d, 2));
    let exe = d.join("app");
    let (code, _, err) = gxx(None, &exe, &objs, &cuda_lib(), &[]);
    assert_eq!(code, 0, "{err}");
    let fatbin_size = |file: &Path| {
        let data = std::fs::read(file).unwrap();
        let f = object::File::parse(&*data).unwrap();
        f.section_by_name(".nv_fatbin").expect(".nv_fatbin").size()
    };
    let size = fatbin_size(&exe);
    let marked = d.join("marked");
    let (code, _, err) = run(Command::new("objcopy")
        .arg(format!(
            "--add-symbol=fatbin_end=.nv_fatbin:{size:#x},global,object"
        ))
        .arg(format!(
            "--add-symbol=fatbin_mid=.nv_fatbin:{:#x},local,object",
            size / 2
        ))
        .arg(&exe)
        .arg(&marked));
    assert_eq!(code, 0, "{err}");
    let out = prune_and_check(&marked, 4096, 0, "marked");
    assert!(fatbin_size(&out) < size);
    assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");
}

/// A `static const` C array holding `bytes` in `.cask_resource`, 8-byte aligned.
fn resource_array(name: &str, bytes: &[u8]) -> String {
    let body: Vec<String> = bytes.iter().map(|b| b.to_string()).collect();
    format!(
        "__attribute__((aligned(8), section(\".cask_resource\"))) static const unsigned char \
         {name}[{}] = {{{}}};\n",
        bytes.len(),
        body.join(",")
    )
}

/// The address and size of `section` in `file`.
fn section_at(file: &Path, section: &str) -> (u64, u64) {
    let data = std::fs::read(file).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f.section_by_name(section).expect(section);
    (s.address(), s.size())
}

/// A library's own data that holds fatbins among its other data, right after its
/// `.nv_fatbin` (cuBLASLt's `.cask_resource`), and that the library reaches only through
/// relocated pointers, moves with the device code: its containers shrink, the data between
/// them moves byte for byte, every pointer follows, and the file shrinks by what was
/// dropped. Where an instruction names an address in it, it stays where it is, pruned in
/// place, and the report says why and how many bytes stay.
#[test]
fn a_resource_section_reached_through_pointers_moves_with_the_device_code() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fatbin = std::fs::read(fixture("kernels.fatbin")).unwrap();
    let data: Vec<u8> = (0..3001u32).map(|i| (i * 7 % 251) as u8).collect();
    for (case, direct) in [
        ("pointers", ""),
        (
            "code",
            "const unsigned char *cask_direct(void) { return fb1; }\n",
        ),
    ] {
        let src = d.join(format!("cask_{case}.c"));
        std::fs::write(
            &src,
            "#include <stdio.h>\n#include <string.h>\n".to_string()
                + &resource_array("fb0", &fatbin)
                + &resource_array("data0", &data)
                + &resource_array("fb1", &fatbin)
                + &resource_array("data1", &data[..77])
                + "struct res { const unsigned char *p; unsigned long n; };\n\
                   const struct res cask_table[] = {{fb0, sizeof fb0}, {data0 + 3, sizeof data0 - 3},\n\
                   {fb1, sizeof fb1}, {data1, sizeof data1}};\n"
                + direct
                + "__attribute__((constructor)) static void check(void) {\n\
                   unsigned h = 2166136261u; int magic = 0;\n\
                   for (int i = 0; i < 4; i++) {\n\
                     const struct res *r = &cask_table[i];\n\
                     if (i % 2 == 0) magic += memcmp(r->p, \"\\x50\\xed\\x55\\xba\", 4) == 0;\n\
                     else for (unsigned long j = 0; j < r->n; j++) h = (h ^ r->p[j]) * 16777619u;\n\
                   }\n\
                   printf(\"cask: %d containers, data %08x\\n\", magic, h);\n\
                   }\n",
        )
        .unwrap();
        let obj = d.join(format!("cask_{case}.o"));
        let (code, _, err) = run(Command::new("cc")
            .args(["-c", "-fPIC", "-O2"])
            .arg(&src)
            .arg("-o")
            .arg(&obj));
        assert_eq!(code, 0, "{err}");
        // The fixture's objects first: their `.nv_fatbin` comes before `.cask_resource`.
        let mut objs = fixture_objs();
        objs.push(obj);
        let exe = d.join(format!("app_{case}"));
        let (code, _, err) = gxx(None, &exe, &objs, &cuda, &["-pie"]);
        assert_eq!(code, 0, "{err}");
        let (fat_at, fat_size) = section_at(&exe, ".nv_fatbin");
        let (cask_at, cask_size) = section_at(&exe, ".cask_resource");
        assert!(
            cask_at >= fat_at + fat_size && cask_at < fat_at + fat_size + 8,
            "layout: .nv_fatbin, then .cask_resource"
        );
        let ran = run(&mut Command::new(&exe)).1;
        assert!(ran.starts_with("cask: 2 containers, data "), "{ran}");

        let out = d.join(format!("app_{case}.sm90"));
        let (code, _, report) = run(Command::new(fatpack_bin())
            .args(["prune", "--for", "9.0"])
            .arg(&exe)
            .arg("-o")
            .arg(&out));
        assert_eq!(code, 0, "{case}: {report}");
        assert_eq!(run(&mut Command::new(&out)).1, ran, "{case}");
        assert_eq!(
            entries_in(&out, ".cask_resource"),
            [["sm_90"], ["sm_90"]],
            "{case}"
        );
        let (code, _, warnings) = run(Command::new("readelf").arg("-aW").arg(&out));
        assert!(
            code == 0 && warnings.is_empty(),
            "{case}: readelf: {warnings}"
        );
        let new: Vec<_> = elflint(&out).difference(&elflint(&exe)).cloned().collect();
        assert!(new.is_empty(), "{case}: eu-elflint: {new:?}");
        let (before, after) = (
            std::fs::metadata(&exe).unwrap().len(),
            std::fs::metadata(&out).unwrap().len(),
        );
        let gone = dropped(&report);
        let (new_at, new_size) = section_at(&out, ".cask_resource");
        let stays = report.contains("stays where it is");
        if direct.is_empty() {
            assert!(!stays, "{report}");
            assert!(
                new_at < cask_at && new_size < cask_size,
                "{new_at:#x} {new_size}"
            );
            assert!(
                before - after + 2 * 4096 > gone && before - after <= gone + 4096,
                "{before} -> {after} bytes, {gone} device bytes dropped"
            );
        } else {
            let text = report.replace("\nfatpack prune:  ", "");
            assert!(stays && text.contains("names an address in it"), "{report}");
            assert_eq!((new_at, new_size), (cask_at, cask_size));
            // Only the `.nv_fatbin` half of what was dropped leaves the file.
            assert!(
                before - after + 2 * 4096 > gone / 2 && before - after < gone,
                "{before} -> {after}"
            );
        }
    }
}
