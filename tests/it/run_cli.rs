//! `fatpack run -- COMMAND`: every link a compiler driver does in the command goes through
//! fatpack (`-fuse-ld=mold` too), the command's exit code comes back, and the wrapper folder
//! is gone afterwards.

use std::process::Command;

use crate::common::{cuda_lib, fatpack_bin, fixture_objs, inspect_json, run, tool, PACK_ALWAYS};

#[test]
fn a_make_build_under_fatpack_run_links_through_fatpack() {
    tool("make", "apt-get install make");
    tool("ld.mold", "apt-get install mold");
    let dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let objs: Vec<String> = fixture_objs()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let link = format!(
        "-L{} -lcudart_static -ldl -lpthread -lrt",
        cuda_lib().display()
    );
    std::fs::write(
        dir.path().join("Makefile"),
        format!(
            "all: app app_mold\napp:\n\tg++ -o $@ {o} {link}\napp_mold:\n\tg++ -fuse-ld=mold -o $@ {o} {link}\n",
            o = objs.join(" ")
        ),
    )
    .unwrap();
    // A whole build asks for packing through the environment, as a user would for small
    // programs such as the fixtures.
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["run", "--", "make", "-s", "-j2"])
        .current_dir(dir.path())
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .env("TMPDIR", tmp.path()));
    assert_eq!(code, 0, "{err}");
    for exe in ["app", "app_mold"] {
        let r = inspect_json(&dir.path().join(exe));
        assert_eq!(r["packed"]["digest_matches"], true, "{exe}");
        assert_eq!(
            run(&mut Command::new(dir.path().join(exe))).1,
            "fixture main ok\n"
        );
    }
    let (_, comment, _) = run(Command::new("readelf")
        .args(["-p", ".comment"])
        .arg(dir.path().join("app_mold")));
    assert!(comment.contains("mold"), "{comment}");
    // The wrapper folder is gone.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    // The command's exit code, and a clear error for a command that does not exist.
    let (code, _, _) = run(Command::new(fatpack_bin()).args(["run", "--", "sh", "-c", "exit 7"]));
    assert_eq!(code, 7);
    let (code, _, err) = run(Command::new(fatpack_bin()).args(["run", "--", "/no/such/tool"]));
    assert_eq!(code, 127, "as a shell says a command is not found");
    assert!(err.contains("/no/such/tool: No such file"), "{err}");
}

/// `FATPACK_THREADS` caps the threads of a link's parallel steps; the output does not
/// depend on it.
#[test]
fn fatpack_threads_changes_no_byte_of_a_link() {
    let w = crate::common::wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let mut objs = fixture_objs();
    objs.extend(crate::common::big_objects(dir.path(), 4));
    let mut outs = Vec::new();
    for threads in ["1", "3", ""] {
        let exe = dir.path().join(format!("app{threads}"));
        let mut c = Command::new("g++");
        c.arg(format!("-B{}", w.path().display()))
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .arg("-o")
            .arg(&exe)
            .args(&objs)
            .arg(format!("-L{}", cuda_lib().display()))
            .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"])
            .env("FATPACK_THREADS", threads);
        let (code, _, err) = run(&mut c);
        assert_eq!(code, 0, "{err}");
        if threads.is_empty() {
            assert!(err.contains("FATPACK_THREADS= is not a number"), "{err}");
        }
        outs.push(std::fs::read(&exe).unwrap());
    }
    assert!(outs.windows(2).all(|p| p[0] == p[1]));
}

/// Help fits 80 columns everywhere, names real values, and documents the exit codes; the
/// CUDA tools' `--arch` spelling works for prune and prune's `--keep` for extract; a usage
/// error exits 2.
#[test]
fn help_fits_80_columns_and_spellings_match_the_cuda_tools() {
    let mut pages = vec![vec!["--help"]];
    for c in [
        "inspect", "prune", "repack", "split", "join", "extract", "run", "ld",
    ] {
        pages.push(vec!["help", c]);
    }
    for args in &pages {
        let (code, out, err) = run(Command::new(fatpack_bin()).args(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        for line in out.lines() {
            assert!(line.chars().count() <= 80, "{args:?}: {line}");
        }
        assert!(
            !out.contains("for_gpus") && !out.contains("<INTO>"),
            "{out}"
        );
    }
    let (_, top, _) = run(Command::new(fatpack_bin()).arg("--help"));
    assert!(
        top.contains("Exit status: 0") && top.contains("2 on a usage error"),
        "{top}"
    );
    let (_, ld, _) = run(Command::new(fatpack_bin()).args(["help", "ld"]));
    for opt in [
        "side-file",
        "level",
        "mode",
        "verbose",
        "dry-run",
        "save-temps",
    ] {
        assert!(ld.contains(&format!("--fatpack-{opt}")), "{opt}: {ld}");
    }
    let dir = tempfile::tempdir().unwrap();
    let k = crate::common::fixture("kernels.o");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--arch", "sm_90"])
        .arg(&k)
        .arg("-o")
        .arg(dir.path().join("k.o")));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["extract", "--keep", "sm_90"])
        .arg(&k)
        .arg("-o")
        .arg(dir.path().join("x")));
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(Command::new(fatpack_bin()).args(["prune", "--no-such-flag"]));
    assert_eq!(code, 2);
}

/// The man page and completions the wheel installs (wheel-data/) are what this fatpack
/// prints; FATPACK_BLESS=1 writes them again.
#[test]
fn the_wheels_man_page_and_completions_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wheel-data/data/share");
    // One page per command, as fatpack(1) names them (fatpack-prune(1), ...).
    let (_, top, _) = run(Command::new(fatpack_bin()).arg("--help"));
    let pages: Vec<(Vec<String>, String)> = commands_of(&top)
        .into_iter()
        .map(|c| {
            (
                vec!["man".to_string(), c.clone()],
                format!("man/man1/fatpack-{c}.1"),
            )
        })
        .collect();
    assert!(pages.len() >= 10, "{pages:?}");
    let (_, main_page, _) = run(Command::new(fatpack_bin()).arg("man"));
    for (_, file) in &pages {
        let name = file.trim_start_matches("man/man1/").trim_end_matches(".1");
        assert!(
            main_page.contains(&format!("{}(1)", name.replace('-', "\\-"))),
            "fatpack(1) does not name {name}(1)"
        );
    }
    let fixed: Vec<(Vec<String>, String)> = [
        (vec!["man"], "man/man1/fatpack.1"),
        (
            vec!["completions", "bash"],
            "bash-completion/completions/fatpack",
        ),
        (vec!["completions", "zsh"], "zsh/site-functions/_fatpack"),
        (
            vec!["completions", "fish"],
            "fish/vendor_completions.d/fatpack.fish",
        ),
    ]
    .into_iter()
    .map(|(a, f)| (a.into_iter().map(String::from).collect(), f.to_string()))
    .collect();
    for (args, file) in fixed.into_iter().chain(pages) {
        let out = Command::new(fatpack_bin()).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(!out.stdout.is_empty(), "{args:?}");
        let path = root.join(&file);
        if std::env::var_os("FATPACK_BLESS").is_some() {
            std::fs::write(&path, &out.stdout).unwrap();
        }
        assert!(
            std::fs::read(&path).ok().as_deref() == Some(&out.stdout[..]),
            "{} is not what `fatpack {}` prints: run the tests with FATPACK_BLESS=1",
            path.display(),
            args.join(" ")
        );
    }
}

/// Exit codes as shells and CLIs use them, and messages in the user's words: 2 for a value
/// on the command line that means nothing, 127/126 for a command `run` cannot find or
/// start, 1 for a failure, each saying what is wrong with which file.
#[test]
fn exit_codes_and_messages_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib = crate::common::fixture("libfixture.so");
    let fatpack = |args: &[&str]| run(Command::new(fatpack_bin()).args(args));
    let lib_s = lib.to_str().unwrap();
    let out = d.join("out");
    let out_s = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["prune", "--for", "9.x", lib_s, "-o", out_s],
            2,
            "want compute capabilities",
        ),
        (
            vec!["prune", "--for", "sm-90", lib_s, "-o", out_s],
            2,
            "did you mean 9.0 (sm_90)?",
        ),
        (
            vec!["prune", "--keep", "sm-90", lib_s, "-o", out_s],
            2,
            "is not an arch",
        ),
        (
            vec!["run", "fatpack-no-such-command"],
            127,
            "fatpack-no-such-command",
        ),
        (vec!["run", "/etc"], 126, "/etc"),
        (
            vec!["join", lib_s, "-o", out_s],
            1,
            "join works on what `fatpack split` made of a packed output",
        ),
        (
            vec![
                "prune",
                "--for",
                "9.0",
                lib_s,
                "-o",
                "/nonexistent-fatpack/dir/out",
            ],
            1,
            "its folder /nonexistent-fatpack/dir does not exist",
        ),
    ];
    for (args, want_code, want) in cases {
        let (code, _, err) = fatpack(&args);
        assert_eq!(code, want_code, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains(".fatpack-tmp"), "{args:?}: {err}");
    }
    assert!(!out.exists());
}

/// Every command's help ends with examples a user can copy, each a `fatpack` command line
/// of that command (or, for `ld`, a link through it).
#[test]
fn every_commands_help_has_examples() {
    let (_, top, _) = run(Command::new(fatpack_bin()).arg("--help"));
    let commands = commands_of(&top);
    assert!(commands.len() >= 10, "{commands:?}");
    assert!(top.contains("Examples:\n  fatpack run --"), "{top}");
    // What programs fatpack linked read at run time is in the first help a user sees.
    for var in ["FATPACK_LOG", "FATPACK_ARCH", "FATPACK_EAGER"] {
        assert!(top.contains(var), "`fatpack --help` does not name {var}");
    }
    for c in &commands {
        let (code, help, err) = run(Command::new(fatpack_bin()).args(["help", c]));
        assert_eq!(code, 0, "{c}: {err}");
        let examples: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Example"))
            .skip(1)
            .collect();
        assert!(
            !examples.is_empty(),
            "`fatpack help {c}` has no examples:\n{help}"
        );
        let own = format!("fatpack {c}");
        assert!(
            examples.iter().any(|l| l.contains(&own)) || c == "ld",
            "`fatpack help {c}`: no example runs {own}:\n{help}"
        );
    }
}

/// The commands `fatpack --help` lists (`help` aside).
fn commands_of(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line, not the wrapped rest of a description.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// A build whose home cannot hold the links' cache (a sandbox's) gets one for its duration,
/// inside `fatpack run`'s own folder (gone afterwards); one that can, or that names its own
/// `FATPACK_CACHE_DIR` (empty included), is left as it is.
#[test]
fn a_build_whose_home_cannot_be_written_gets_a_cache_for_its_links() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let not_a_dir = dir.path().join("home-is-a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let hello = dir.path().join("hello.c");
    std::fs::write(&hello, "int main(void) { return 0; }\n").unwrap();
    let script = format!(
        "gcc -o {out} {src} && echo \"cache=${{FATPACK_CACHE_DIR-unset}}\" && \
         ls \"$FATPACK_CACHE_DIR/linker-defaults\" | wc -l",
        out = dir.path().join("hello").display(),
        src = hello.display()
    );
    let fatpack_run = |home: &std::path::Path, cache: Option<&str>, script: &str| {
        let mut c = Command::new(fatpack_bin());
        c.args(["run", "--", "sh", "-c", script])
            .env("HOME", home)
            .env("TMPDIR", &tmp)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("FATPACK_CACHE_DIR");
        if let Some(v) = cache {
            c.env("FATPACK_CACHE_DIR", v);
        }
        run(&mut c)
    };
    let (code, out, err) = fatpack_run(&not_a_dir, None, &script);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let cache = lines[0].strip_prefix("cache=").unwrap();
    assert!(cache.starts_with(tmp.to_str().unwrap()), "{out}");
    assert_eq!(
        lines[1].trim(),
        "1",
        "the link's answer was not kept: {out}"
    );
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "left behind");
    // A home that can be written, and a FATPACK_CACHE_DIR given (empty: no cache): as is.
    let show = "echo \"[${FATPACK_CACHE_DIR-unset}]\"";
    let (_, out, _) = fatpack_run(dir.path(), None, show);
    assert_eq!(out, "[unset]\n");
    let (_, out, _) = fatpack_run(&not_a_dir, Some(""), show);
    assert_eq!(out, "[]\n");
}

/// Every man page has the sections a man page reader looks for: EXAMPLES (ld's with its own
/// options' table), EXIT STATUS, and, on the pages of the commands that read them,
/// ENVIRONMENT with every variable of the one table.
#[test]
fn man_pages_have_examples_exit_status_and_environment() {
    let page = |cmd: Option<&str>| {
        let mut c = Command::new(fatpack_bin());
        c.arg("man");
        if let Some(n) = cmd {
            c.arg(n);
        }
        let (code, out, err) = run(&mut c);
        assert_eq!(code, 0, "{err}");
        out
    };
    let commands = [
        "ld",
        "run",
        "inspect",
        "prune",
        "split",
        "join",
        "index",
        "repack",
        "extract",
        "man",
        "completions",
    ];
    for cmd in std::iter::once(None).chain(commands.iter().map(|c| Some(*c))) {
        let p = page(cmd);
        let examples = match cmd {
            Some("ld") => ".SH \"FATPACK OPTIONS AND EXAMPLES\"",
            _ => ".SH EXAMPLES",
        };
        assert!(p.contains(examples), "{cmd:?}: no {examples}");
        assert!(p.contains(".SH \"EXIT STATUS\"\n0 on success"), "{cmd:?}");
        let env = matches!(cmd, None | Some("ld" | "run"));
        assert_eq!(p.contains(".SH ENVIRONMENT"), env, "{cmd:?}");
        if env {
            for v in ["FATPACK_REAL_LD", "FATPACK_THREADS", "FATPACK_MODE"] {
                assert!(p.contains(&format!("\\fB{v}\\fR=")), "{cmd:?}: {v}");
            }
        }
        assert_eq!(
            p.contains("FATPACK_LOG"),
            cmd.is_none(),
            "{cmd:?}: the runtime's variables belong on fatpack(1)"
        );
    }
}
