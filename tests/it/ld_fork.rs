//! `--fatpack-fork`: a link whose work runs in a child, the command ending once the output is
//! in place (`fatpack::link::fork`). Whatever the process structure, the command must be
//! the same link as one process: the same bytes, ld's exit status and messages, and a
//! signal's end.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

/// `fatpack ld --fatpack-fork=FORK -o OUT OBJS` with cudart, packed, run directly (as the
/// build's parent sees it), `route` given.
fn fatpack_ld(fork: &str, route: &str, out: &Path, objs: &[PathBuf]) -> Command {
    let mut c = Command::new(fatpack_bin());
    c.arg("ld")
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .arg(format!("--fatpack-fork={fork}"))
        .arg(format!("--fatpack-route={route}"))
        .arg("-o")
        .arg(out)
        .args(objs)
        .arg(format!("-L{}", cuda_lib().display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt", "-lc"]);
    c
}

/// The names of the entries of `dir`.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Both routes, forked and not: the same bytes; `--fatpack-verbose` says which was done, and
/// its lines all come through the parent (the child says them before it reports).
#[test]
fn a_forked_link_writes_the_bytes_one_process_writes() {
    let (cuda, w) = (cuda_lib(), wrapper_dir());
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    for route in ["direct", "copy"] {
        let mut outs = Vec::new();
        for fork in ["yes", "no", "auto"] {
            let out = dir.path().join(format!("app-{route}-{fork}"));
            let (code, _, err) = run(Command::new("g++")
                .arg(format!("-B{}", w.path().display()))
                .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
                .env("TMPDIR", &tmp)
                .arg(format!("-Wl,--fatpack-fork={fork},--fatpack-route={route}"))
                .arg("-Wl,--fatpack-verbose")
                .arg("-o")
                .arg(&out)
                .args(fixture_objs())
                .arg(format!("-L{}", cuda.display()))
                .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
            assert_eq!(code, 0, "{route} {fork}: {err}");
            let said = match fork {
                "yes" => "process: the link ran in a child, and the command ended once the output was in place",
                "no" => "process: one process (--fatpack-fork or FATPACK_FORK: no)",
                _ => "MiB; forked from 64 MiB)",
            };
            assert!(err.contains(said), "{route} {fork}: {err}");
            // The verbose lines the child says after the clean-up: through the parent.
            assert!(err.contains("cleanup after the last"), "{err}");
            outs.push(std::fs::read(&out).unwrap());
        }
        assert!(outs[0] == outs[1] && outs[1] == outs[2], "{route}");
        let (code, out, err) = run(&mut Command::new(
            dir.path().join(format!("app-{route}-yes")),
        ));
        assert_eq!((code, out.as_str()), (0, "fixture main ok\n"), "{err}");
    }
    // Nothing of fatpack's left in TMPDIR or beside the outputs once the command ended.
    assert_eq!(entries(&tmp), Vec::<String>::new());
    let beside: Vec<String> = entries(dir.path())
        .into_iter()
        .filter(|n| n != "tmp" && !n.starts_with("app-"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

/// A failed link, forked: ld's exit status and messages, nothing left behind; and a link
/// not worth packing (no device code), forked and then handed to the real linker, is the
/// real linker's, failure and all.
#[test]
fn a_forked_link_fails_as_ld_does() {
    let (cuda, w) = (cuda_lib(), wrapper_dir());
    let dir = tempfile::tempdir().unwrap();
    // kernels.o alone has no main.
    let (code, _, err) = gxx(
        Some(w.path()),
        &dir.path().join("never"),
        &[fixture("kernels.o")],
        &cuda,
        &["-Wl,--fatpack-fork=yes"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("undefined reference to `main'"), "{err}");
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));

    let hello = c_object(
        dir.path(),
        "hello",
        "#include <stdio.h>\nint main(void){puts(\"hi\");return 0;}\n",
    );
    let alone = c_object(
        dir.path(),
        "alone",
        "int f(void);\nint g(void){return f();}\n",
    );
    for (obj, want) in [(&hello, 0), (&alone, 1)] {
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let (code, _, err) = run(Command::new("gcc")
            .arg(format!("-B{}", w.path().display()))
            .arg("-Wl,--fatpack-fork=yes")
            .arg("-o")
            .arg(&a)
            .arg(obj));
        let (plain, _, plain_err) = run(Command::new("gcc").arg("-o").arg(&b).arg(obj));
        assert_eq!((code, plain), (want, want), "{err}\n{plain_err}");
        if want == 0 {
            assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        } else {
            assert!(err.contains("undefined reference to `f'"), "{err}");
        }
    }
}

/// A signal to the command (the parent) reaches the child, which stops its real linker and
/// cleans up, and the command ends by that signal; a child killed outright ends the command
/// by the same signal.
#[test]
fn a_forked_link_passes_signals_on_and_ends_as_its_child_did() {
    // A real linker that hangs on the link itself.
    let SlowLinkDirs {
        dir: _dir,
        tmp,
        out: out_dir,
        slow,
        pids,
    } = slow_link_dirs();
    let start = |kill_parent: bool| {
        let mut c = fatpack_ld("yes", "direct", &out_dir.join("app"), &fixture_objs());
        c.env("TMPDIR", &tmp)
            .env("FATPACK_REAL_LD", &slow)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if kill_parent {
            c.env("KILL_PARENT", "1");
        }
        c.spawn().unwrap()
    };
    // The n-th real linker's pid, once it runs; its parent must not be the command: the
    // link runs in the command's child.
    let ld_pid = |n: usize, command: u32| -> i32 {
        let t0 = std::time::Instant::now();
        loop {
            let text = std::fs::read_to_string(&pids).unwrap_or_default();
            if let Some(l) = text.lines().nth(n) {
                let (pid, ppid) = l.split_once(' ').unwrap();
                assert_ne!(
                    ppid.parse::<u32>().unwrap(),
                    command,
                    "the link did not fork"
                );
                return pid.parse().unwrap();
            }
            assert!(t0.elapsed().as_secs() < 60, "the link never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    for (n, sig) in [libc::SIGTERM, libc::SIGINT].into_iter().enumerate() {
        let mut parent = start(false);
        let ld = ld_pid(n, parent.id());
        assert!(!entries(&tmp).is_empty());
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(parent.id() as i32, sig) };
        let status = parent.wait().unwrap();
        assert_eq!(status.signal(), Some(sig), "{status:?}");
        // The child stopped its linker and removed its temps before it ended.
        let t0 = std::time::Instant::now();
        while running(ld) && t0.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!running(ld), "the real linker was left running");
        assert_eq!(entries(&tmp), Vec::<String>::new(), "signal {sig}");
        assert_eq!(entries(&out_dir), Vec::<String>::new(), "signal {sig}");
    }
    let mut parent = start(true);
    let ld = ld_pid(2, parent.id());
    let status = parent.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    // SAFETY: SIGKILL to the `sleep` the orphaned fake linker became.
    unsafe { libc::kill(ld, libc::SIGKILL) };
}

/// `FATPACK_FORK` stands in for `--fatpack-fork` where the line gives none, the line wins,
/// and a value it does not know is an error naming the variable, before anything is written.
#[test]
fn fatpack_fork_in_the_environment() {
    let (cuda, w) = (cuda_lib(), wrapper_dir());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("app");
    let link = |env: &str, line: Option<&str>| {
        let mut extra = vec!["-Wl,--fatpack-verbose".to_string()];
        extra.extend(line.map(|f| format!("-Wl,--fatpack-fork={f}")));
        let mut c = Command::new("g++");
        c.arg(format!("-B{}", w.path().display()))
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .env("FATPACK_FORK", env)
            .args(&extra)
            .arg("-o")
            .arg(&out)
            .args(fixture_objs())
            .arg(format!("-L{}", cuda.display()))
            .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]);
        run(&mut c)
    };
    let forked = "process: the link ran in a child";
    let (code, _, err) = link("yes", None);
    assert!(code == 0 && err.contains(forked), "{err}");
    let (code, _, err) = link("no", None);
    assert!(
        code == 0 && err.contains("process: one process (--fatpack-fork or FATPACK_FORK: no)"),
        "{err}"
    );
    let (code, _, err) = link("no", Some("yes"));
    assert!(code == 0 && err.contains(forked), "{err}");
    std::fs::remove_file(&out).unwrap();
    let (code, _, err) = link("maybe", None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("FATPACK_FORK") && err.contains("maybe"),
        "{err}"
    );
    assert!(!out.exists());
}
