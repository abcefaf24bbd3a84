//! The newcomer's walkthrough (docs/walkthrough.md) and the README's first screen, run as
//! written: every `sh` block of the walkthrough, in order, in one shell, from a copy of the
//! clone's root (its entries linked, so nothing is written into the checkout), with
//! `cargo install` putting fatpack under a scratch `CARGO_INSTALL_ROOT` first on `PATH`.
//! Every command of the README's first screen is one of the walkthrough's, or one of the
//! two set-up commands (`scripts/test.sh` is the test command itself, and it runs
//! `scripts/demo.sh`).

use std::path::Path;
use std::process::Command;

use crate::common::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `sh` code blocks of a markdown text, in order.
fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```sh") => current = Some(String::new()),
            (Some(_), "```") => blocks.push(current.take().expect("in a block")),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    // A block the text ends in (a screen's worth of lines) counts too.
    blocks.extend(current);
    blocks
}

/// The commands of `blocks`, one per line, comments and blank lines left out.
fn commands(blocks: &[String]) -> Vec<String> {
    blocks
        .iter()
        .flat_map(|b| b.lines())
        .map(|l| l.split(" #").next().unwrap_or_default().trim().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_walkthrough_runs_as_written() {
    let text = std::fs::read_to_string(root().join("docs/walkthrough.md")).unwrap();
    let script = sh_blocks(&text).join("");
    assert!(
        script.contains("cargo install --locked --path ."),
        "{script}"
    );
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("clone");
    std::fs::create_dir(&w).unwrap();
    for e in std::fs::read_dir(root()).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path(), w.join(e.file_name())).unwrap();
    }
    let bin = dir.path().join("cargo-root/bin");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let (code, out, err) = run(Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&w)
        .env("CARGO_INSTALL_ROOT", dir.path().join("cargo-root"))
        .env("PATH", path)
        .env_remove("FATPACK_RUNTIME"));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        bin.join("fatpack").exists(),
        "cargo install put no fatpack in bin/"
    );
    // The program ran three times: as built by default (its links left to the real
    // linker: small kernels), packed, and installed and pruned; it says `ok` (with a GPU,
    // after checking every result against the CPU; without one, `ok (no GPU)`).
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok")).count(),
        3,
        "{out}\n{err}"
    );
    for (what, archs) in [
        (
            "build/libvecops.so",
            &["sm_75", "sm_80", "sm_86", "sm_90"][..],
        ),
        ("libvecops-sm90.so", &["sm_90"][..]),
        ("stage-sm90/lib/libvecops.so", &["sm_90"][..]),
    ] {
        let r = inspect_json(&w.join(what));
        let got: std::collections::BTreeSet<&str> = r["per_arch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["arch"].as_str().unwrap())
            .filter(|a| a.starts_with("sm_") || what.contains("sm90"))
            .collect();
        assert_eq!(got.into_iter().collect::<Vec<_>>(), archs, "{what}");
    }
    let split: Vec<String> = std::fs::read_dir(w.join("split"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(split.iter().any(|n| n == "vecops_demo"), "{split:?}");
    assert!(split.iter().any(|n| n.contains("sm_90")), "{split:?}");
}

#[test]
fn the_readmes_first_screen_holds_what_a_user_needs_and_its_commands_run() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let first: String = readme.lines().take(30).collect::<Vec<_>>().join("\n");
    for needed in [
        "2 GiB",
        "cargo install",
        "fatpack run --",
        "fatpack inspect",
        "fatpack prune --for 9.0",
    ] {
        assert!(
            first.contains(needed),
            "the README's first 30 lines lack {needed:?}"
        );
    }
    let walk = std::fs::read_to_string(root().join("docs/walkthrough.md")).unwrap();
    let run = commands(&sh_blocks(&walk));
    let setup = ["bash scripts/demo.sh", "bash scripts/test.sh"];
    let shown = commands(&sh_blocks(&first));
    assert!(shown.len() >= 6, "{shown:?}");
    for c in &shown {
        assert!(
            run.contains(c) || setup.contains(&c.as_str()),
            "the README's first screen shows `{c}`, which neither the walkthrough nor the \
             set-up runs"
        );
    }
    for s in setup {
        assert!(shown.iter().any(|c| c == s), "the first screen lacks `{s}`");
    }
    let test = std::fs::read_to_string(root().join("scripts/test.sh")).unwrap();
    assert!(
        test.lines().any(|l| l.trim() == "bash scripts/demo.sh"),
        "the test command does not run the demo"
    );
}
