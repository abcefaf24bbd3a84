//! `fatpack split` of a wheel with a packed library: a host wheel, one device wheel per
//! architecture and the project's own (small) wheel that installs them all, checked with the
//! installers that will read them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::prune_wheel::{lib_wheel, names_in};

/// A library with device code for sm_80, sm_86, sm_90, sm_100 (and PTX), linked through
/// fatpack ld and packed.
pub(crate) fn packed_library(dir: &Path) -> PathBuf {
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
    let (code, err) = split_into(&fat, &links);
    assert_eq!(code, 0, "{err}");
    (fat, links, err)
}

/// What `fatpack inspect --for CAP` says of `lib`: the entries a GPU of capability `cap`
/// loads (`module:arch`), and those of them whose pack is not installed.
pub(crate) fn kept(lib: &Path, cap: &str) -> (Vec<String>, Vec<String>) {
    let (code, out, err) = run(Command::new(fatpack_bin())
        .args(["inspect", "--json", "--for", cap])
        .arg(lib));
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let list = |k: &str| -> Vec<String> {
        doc[0]["would_keep"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    (list("kept"), list("not_installed"))
}

/// The packs installed beside the library in `target`, by the suffix after `libcut.so.`.
fn packs(target: &Path) -> Vec<String> {
    names_in(&target.join("cutfix"))
        .into_iter()
        .filter_map(|n| {
            n.strip_prefix("libcut.so.")
                .and_then(|r| r.strip_suffix(".fatpack"))
                .map(str::to_string)
        })
        .collect()
}

const EVERY_PACK: [&str; 5] = ["compute_90", "sm_75", "sm_80", "sm_86", "sm_90"];

/// The invariant, for one GPU: the library installed in `target` runs exactly the entries
/// the fat library runs on a GPU of capability `cap`, every one of them installed.
fn serves(target: &Path, fat_lib: &Path, cap: &str, cell: &str) {
    serves_lib(&target.join("cutfix/libcut.so"), fat_lib, cap, cell);
}

/// The invariant for one GPU and one installed library `lib`: it runs exactly the entries
/// the fat library runs on a GPU of capability `cap`, every one of them installed.
pub(crate) fn serves_lib(lib: &Path, fat_lib: &Path, cap: &str, cell: &str) {
    // A module without a name of its own is named after its file: compared without it.
    let unnamed = |path: &Path, v: Vec<String>| -> Vec<String> {
        let p = path.display().to_string();
        v.into_iter()
            .map(|e| {
                e.strip_prefix(&p)
                    .map_or(e.clone(), |r| format!("<file>{r}"))
            })
            .collect()
    };
    let want = unnamed(fat_lib, kept(fat_lib, cap).0);
    let (got, missing) = kept(lib, cap);
    let got = unnamed(lib, got);
    assert_eq!(
        got,
        want,
        "{cell}: {} on GPU {cap} runs other entries",
        lib.display()
    );
    assert!(
        missing.is_empty(),
        "{cell}: {} on GPU {cap} lacks {missing:?}",
        lib.display()
    );
}

#[test]
fn a_split_wheel_serves_every_gpu_through_pip_uv_and_variants() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (fat, links, err) = split_wheel(d);
    let fat_lib = d.join("libcut.so");
    assert_eq!(
        names_in(&links),
        [
            "cutfix-1.0-py3-none-linux_x86_64-compute90.whl",
            "cutfix-1.0-py3-none-linux_x86_64-sm75.whl",
            "cutfix-1.0-py3-none-linux_x86_64-sm80.sm86.whl",
            "cutfix-1.0-py3-none-linux_x86_64-sm86.whl",
            "cutfix-1.0-py3-none-linux_x86_64-sm90.whl",
            "cutfix-1.0-py3-none-linux_x86_64.whl",
            "cutfix_compute90-1.0-py3-none-linux_x86_64.whl",
            "cutfix_host-1.0-py3-none-linux_x86_64.whl",
            "cutfix_sm75-1.0-py3-none-linux_x86_64.whl",
            "cutfix_sm80-1.0-py3-none-linux_x86_64.whl",
            "cutfix_sm86-1.0-py3-none-linux_x86_64.whl",
            "cutfix_sm90-1.0-py3-none-linux_x86_64.whl",
        ]
    );
    assert!(
        err.contains("a GPU of compute capability 8.9 loads from sm86"),
        "{err}"
    );
    // Same input, same bytes.
    let again = d.join("again");
    let (code, err) = split_into(&fat, &again);
    assert_eq!(code, 0, "{err}");
    for n in names_in(&links) {
        assert_eq!(
            std::fs::read(links.join(&n)).unwrap(),
            std::fs::read(again.join(&n)).unwrap(),
            "{n} differs between two splits"
        );
    }
    // The host holds no device code of its own: its library is the split host part.
    let host_len = std::fs::metadata(links.join("cutfix_host-1.0-py3-none-linux_x86_64.whl"))
        .unwrap()
        .len();
    assert!(host_len < std::fs::metadata(&fat).unwrap().len());

    let idx = d.join("idx");
    fatpack_index(&links, &idx);
    let index_url = format!("file://{}/simple", idx.display());
    let venv = venv_with(d, &["pip>=25.3", "uv==0.13.10", "variantlib==0.2.2"]);
    // variantlib, PEP 825's reference resolver, over the index's variants.json: the same
    // pick as uv's on every GPU (the label names the device wheels it installs).
    let variants_json = idx.join("files/cutfix-1.0-variants.json");
    for (gpu, want) in [
        ("50", "fat"),
        ("61", "fat"),
        ("70", "fat"),
        ("75", "sm75"),
        ("80", "sm80.sm86"),
        ("86", "sm80.sm86"),
        ("89", "sm80.sm86"),
        ("90", "sm90"),
        ("100", "compute90"),
        ("120", "compute90"),
        ("121", "compute90"),
    ] {
        assert_eq!(
            crate::prune_wheel::resolve(&venv, &variants_json, gpu),
            want,
            "variantlib on {gpu}"
        );
    }
    let find_links = ["--no-index", "--find-links", links.to_str().unwrap()];
    let by_index = ["--index-url", index_url.as_str()];
    let install = |cell: &str, tool: &str, from: &[&str], reqs: &[&str], env: &[(&str, &str)]| {
        let target = d.join(format!("t-{}", cell.replace([' ', ',', '[', ']'], "_")));
        let mut c = match tool {
            "pip" => {
                let mut c = Command::new(venv.join("bin/pip"));
                c.args(["install", "-q", "--disable-pip-version-check"]);
                c
            }
            _ => uv_variant_install(&venv, &d.join("uv-cache")),
        };
        c.args(from).arg("--target").arg(&target).args(reqs);
        // The machine's own GPU (if any) never decides a cell: each forces its own.
        c.env_remove("NV_VARIANT_PROVIDER_FORCE_SM_ARCH")
            .env("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "13.0")
            .envs(env.iter().copied());
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 0, "{cell}: {err}");
        target
    };

    // Today's pip and uv: the project's name installs everything the fat wheel held; the
    // host's extras name device wheels; the host alone has no device code.
    for (cell, tool, from, reqs, want) in [
        (
            "pip find-links",
            "pip",
            &find_links[..],
            "cutfix",
            &EVERY_PACK[..],
        ),
        ("pip index", "pip", &by_index[..], "cutfix", &EVERY_PACK[..]),
        (
            "pip extra sm90",
            "pip",
            &find_links[..],
            "cutfix-host[sm90]",
            &["sm_90"][..],
        ),
        (
            "pip extras sm80,sm90",
            "pip",
            &by_index[..],
            "cutfix-host[sm80,sm90]",
            &["sm_80", "sm_90"][..],
        ),
        (
            "pip host alone",
            "pip",
            &find_links[..],
            "cutfix-host",
            &[][..],
        ),
        (
            "uv extra sm90",
            "uv",
            &find_links[..],
            "cutfix-host[sm90]",
            &["sm_90"][..],
        ),
        (
            "uv extras all",
            "uv",
            &find_links[..],
            "cutfix-host[all]",
            &EVERY_PACK[..],
        ),
    ] {
        let target = install(cell, tool, from, &[reqs], &[]);
        assert_eq!(packs(&target), want, "{cell}");
        if want.is_empty() {
            // What a GPU would load is listed, and listed as not installed.
            let (kept, missing) = kept(&target.join("cutfix/libcut.so"), "9.0");
            assert!(!kept.is_empty() && missing == kept, "{cell}: {missing:?}");
        }
        if want == EVERY_PACK {
            for cap in ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0", "12.1"] {
                serves(&target, &fat_lib, cap, cell);
            }
        }
    }
    let target = install(
        "pip extra sm90 on 9.0",
        "pip",
        &find_links,
        &["cutfix-host[sm90]"],
        &[],
    );
    serves(&target, &fat_lib, "9.0", "pip extra sm90");

    // uv's variant mode, its NVIDIA provider forced to each GPU (and to none): what it
    // picks by itself runs what the fat wheel runs there, and a GPU the build serves
    // gets only its own device wheels.
    for (cap, want) in [
        ("5.0", &EVERY_PACK[..]),
        ("6.1", &EVERY_PACK[..]),
        ("7.0", &EVERY_PACK[..]),
        ("7.5", &["sm_75"][..]),
        ("8.0", &["sm_80", "sm_86"][..]),
        ("8.6", &["sm_80", "sm_86"][..]),
        ("8.9", &["sm_80", "sm_86"][..]),
        ("9.0", &["sm_90"][..]),
        ("10.0", &["compute_90"][..]),
        ("12.0", &["compute_90"][..]),
        ("12.1", &["compute_90"][..]),
    ] {
        for (how, from) in [("index", &by_index[..]), ("find-links", &find_links[..])] {
            let cell = format!("uv variants {how} {cap}");
            let target = install(
                &cell,
                "uv",
                from,
                &["cutfix"],
                &[("NV_VARIANT_PROVIDER_FORCE_SM_ARCH", cap)],
            );
            let got = packs(&target);
            if how == "index" {
                assert_eq!(got, want, "{cell}");
            }
            serves(&target, &fat_lib, cap, &cell);
        }
    }
    // No GPU at all (the provider told no driver): everything, as the fat wheel.
    let target = install(
        "uv variants no GPU",
        "uv",
        &by_index,
        &["cutfix"],
        &[("NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION", "")],
    );
    assert_eq!(packs(&target), EVERY_PACK);
}

#[test]
fn a_damaged_or_unpacked_wheel_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = packed_library(d);
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    let fat = lib_wheel(&src, &lib, "1.0");
    // One byte of the library changed, RECORD kept: the member no longer matches it.
    let bad = d.join("bad");
    std::fs::create_dir(&bad).unwrap();
    let damaged = bad.join(fat.file_name().unwrap());
    let (code, _, err) = run(Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zipfile\n\
         src, dst = sys.argv[1], sys.argv[2]\n\
         with zipfile.ZipFile(src) as i, zipfile.ZipFile(dst, 'w') as o:\n\
         \x20   for m in i.infolist():\n\
         \x20       b = i.read(m)\n\
         \x20       if m.filename.endswith('.so'): b = b[:-1] + bytes([b[-1] ^ 1])\n\
         \x20       o.writestr(m, b)\n",
        )
        .arg(&fat)
        .arg(&damaged));
    assert_eq!(code, 0, "{err}");
    let plain = d.join("plain");
    std::fs::create_dir(&plain).unwrap();
    let unpacked = lib_wheel(&plain, &crate::prune_package::fat_library(d), "1.0");
    for (input, why) in [
        (&damaged, "does not match RECORD"),
        (&unpacked, "no binary in it is packed"),
    ] {
        let out = d.join("out");
        let (code, err) = split_into(input, &out);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(why) && err.contains("cutfix-1.0"), "{err}");
        let left = std::fs::read_dir(&out).map(|r| r.count()).unwrap_or(0);
        assert_eq!(left, 0, "{why}: files left in {}", out.display());
    }
}

/// A program split in a wheel and installed without the device wheel its GPU needs: its
/// error names that wheel and the command that installs it (the host wheel's install hint);
/// with that wheel installed, it runs.
#[test]
fn a_missing_device_wheel_is_named_with_its_install_command() {
    use crate::rt_harness::{build_app, run as run_app, StoreAt};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let app = build_app(StoreAt::Mapped, None);
    let src = d.join("src");
    std::fs::create_dir(&src).unwrap();
    // The program at the library's place in the wheel: split treats both alike.
    let fat = lib_wheel(&src, &app.exe, "1.0");
    let links = d.join("links");
    let (code, err) = split_into(&fat, &links);
    assert_eq!(code, 0, "{err}");
    let venv = venv_with(d, &["pip>=25.3"]);
    let install = |target: &Path, req: &str| {
        let (code, _, err) = run(Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check", "--no-index"])
            .arg("--find-links")
            .arg(&links)
            .arg("--target")
            .arg(target)
            .arg(req));
        assert_eq!(code, 0, "{err}");
        target.join("cutfix/libcut.so")
    };
    let exe = install(&d.join("host"), "cutfix-host");
    let hint = std::fs::read_to_string(d.join("host/cutfix/libcut.so.fatpack-install")).unwrap();
    assert!(
        hint.contains(".sm_90.fatpack\tcutfix-sm90\tpip install 'cutfix-host[sm90]==1.0'\n"),
        "{hint}"
    );
    let r = run_app(&exe, "launchA", Some("90"), &[]);
    assert_ne!(r.out("launchA").as_deref(), Some("0"), "{}", r.stdout);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("libcut.so.sm_90.fatpack"))
        .unwrap_or_else(|| panic!("no line names the pack:\n{}", r.stderr));
    assert!(
        line.contains("compute capability 9.0")
            && line.contains("it is in package cutfix-sm90: pip install 'cutfix-host[sm90]==1.0'"),
        "{line}"
    );
    let exe = install(&d.join("with-sm90"), "cutfix-host[sm90]");
    let r = run_app(&exe, "launchA", Some("90"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("0"));
}
