//! Compiles a fixture afresh with the installed nvcc, so that a change in nvcc's output format
//! fails here rather than in a user's build: the model must read it, agree with cuobjdump,
//! round-trip it, and pack it.

use std::process::Command;

use crate::common::*;

#[test]
fn fresh_nvcc_output_is_read_packed_and_round_tripped() {
    let (nvcc, cuobjdump) = (cuda_tool("nvcc"), cuda_tool("cuobjdump"));
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("../src/kernels.cu");
    let mut objs = Vec::new();
    for (name, flags) in [
        ("default.o", vec![]),
        ("all.o", vec!["-Xfatbin=-compress-all"]),
        ("size.o", vec!["--compress-mode=size"]),
        ("rdc.o", vec!["-rdc=true"]),
    ] {
        let o = dir.path().join(name);
        let (code, _, err) = run(Command::new(&nvcc)
            .args([
                "-gencode",
                "arch=compute_75,code=sm_75",
                "-gencode",
                "arch=compute_90,code=[sm_90,compute_90]",
            ])
            .args(&flags)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&o));
        assert_eq!(code, 0, "nvcc {flags:?}: {err}");
        objs.push(o);
    }
    for o in &objs {
        let r = inspect_json(o);
        let ours: Vec<(String, String)> = r["modules"][0]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let kind = if e["kind"] == "ptx" { "PTX" } else { "ELF" };
                let arch = e["arch"].as_str().unwrap().replace("compute_", "sm_");
                (kind.to_string(), arch)
            })
            .collect();
        assert_eq!(ours, cuobjdump_list(&cuobjdump, o), "{}", o.display());
        // Three kernels, each in three entries (sm_75, sm_90, compute_90): counted once.
        assert_eq!(r["totals"]["kernels"], 3, "{}", o.display());
        let scanned = fatpack::inputs::scan(o).unwrap();
        for fb in scanned.sections.iter().flat_map(|s| &s.containers) {
            let (again, _) = fatpack::fatbin::parse_one(&fb.to_bytes(), 0).unwrap();
            assert_eq!(&again, fb);
        }
    }
    // nvcc itself as the link driver (-rdc: nvcc device-links into a temp object first),
    // through the wrapper: packed, reproducible run to run, and it runs.
    let cuda = cuda_lib();
    let w = wrapper_dir();
    // nvcc -rdc as the link driver, through the wrapper, run in `cwd`.
    let nvcc_link = |out: &std::path::Path, extra: &[&str], cwd: &std::path::Path| {
        let (code, _, err) = run(Command::new(&nvcc)
            .current_dir(cwd)
            .args([
                "-rdc=true",
                "-gencode",
                "arch=compute_75,code=sm_75",
                "-gencode",
                "arch=compute_90,code=[sm_90,compute_90]",
            ])
            .arg(format!("-Xcompiler=-B{}", w.path().display()))
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .args(extra)
            .arg(format!("-L{}", cuda.display()))
            .arg("-o")
            .arg(out)
            .arg(&objs[3])
            .arg(fixture("other.o"))
            .arg(fixture("main.o")));
        assert_eq!(code, 0, "nvcc link {extra:?}: {err}");
        err
    };
    let exe = dir.path().join("app");
    let mut builds = Vec::new();
    for _ in 0..2 {
        nvcc_link(&exe, &["-Xlinker", "--fatpack-route=copy"], dir.path());
        builds.push(std::fs::read(&exe).unwrap());
    }
    assert_eq!(builds[0], builds[1], "nvcc-driven packed links differ");
    let r = inspect_json(&exe);
    assert_eq!(r["packed"]["digest_matches"], true);
    let names: Vec<&str> = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["origin"].as_str().unwrap())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("app_dlink.o#0")),
        "{names:?}"
    );
    assert_eq!(run(&mut Command::new(&exe)).1, "fixture main ok\n");
    // The direct route (the inputs linked as given, nvcc's device-link object first, the
    // relocatable containers of `__nv_relfatbin` too): the same store. nvcc names its
    // device-link object after the output, so both are linked under one name.
    let store = |p: &std::path::Path| {
        use object::{Object, ObjectSection};
        let data = std::fs::read(p).unwrap();
        let f = object::File::parse(&*data).unwrap();
        f.section_by_name(".fatpack")
            .unwrap()
            .data()
            .unwrap()
            .to_vec()
    };
    let (copy, direct) = (dir.path().join("copy"), dir.path().join("direct"));
    let mut stores = Vec::new();
    for (folder, route) in [(&copy, "copy"), (&direct, "direct")] {
        std::fs::create_dir_all(folder).unwrap();
        let out = folder.join("app");
        let flag = format!("--fatpack-route={route}");
        let err = nvcc_link(
            &out,
            &["-Xlinker", &flag, "-Xlinker", "--fatpack-verbose"],
            folder,
        );
        assert!(
            err.contains(&format!("fatpack:   route: {route}: ")),
            "{err}"
        );
        assert_eq!(inspect_json(&out)["packed"]["digest_matches"], true);
        assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");
        stores.push(store(&out));
    }
    assert!(stores[0] == stores[1], "the direct route's store differs");
}
