//! Thread caps: under `make -jN` the GNU make jobserver bounds the threads of all fatpack
//! links together; `FATPACK_THREADS` and `--fatpack-threads` bound one link.
//!
//! Each link writes, with `FATPACK_TRACE_WORKERS`, one line per parallel step (its start,
//! end and thread count); each make recipe brackets its link with timestamps. A job counts
//! one busy thread while it lives (its own, make's token) or its step's threads while a
//! step runs; the tests add that up over time.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{
    big_objects, cuda_lib, fixture_objs, inspect_json, run, tool, wrapper_dir, PACK_ALWAYS,
};

/// One job's life and steps, in nanoseconds since the epoch.
struct Job {
    life: (u128, u128),
    steps: Vec<(u128, u128, usize)>,
}

/// Writes a Makefile of `links` link targets in `dir` and runs `make -jJOBS` with `env`;
/// each recipe line is `+... LINK_PREFIX g++ ...` (`+` passes make 4.3's jobserver to it).
fn make_links(
    dir: &Path,
    jobs: usize,
    links: usize,
    link_prefix: &str,
    env: &[(&str, &str)],
) -> Vec<Job> {
    tool("make", "apt-get install make");
    let wrap = wrapper_dir();
    let mut objs: Vec<PathBuf> = fixture_objs();
    objs.extend(big_objects(dir, 6));
    let objs: Vec<String> = objs.iter().map(|p| p.display().to_string()).collect();
    let names: Vec<String> = (0..links).map(|i| format!("app{i}")).collect();
    let mut mk = format!("all: {}\n", names.join(" "));
    for n in &names {
        mk += &format!(
            "{n}:\n\t+date +%s%N > life.$@; FATPACK_TRACE_WORKERS=trace.$@ {link_prefix}g++ -B{w} -o $@ {o} -L{cuda} -lcudart_static -ldl -lpthread -lrt && date +%s%N >> life.$@\n",
            w = wrap.path().display(),
            o = objs.join(" "),
            cuda = cuda_lib().display(),
        );
    }
    std::fs::write(dir.join("Makefile"), mk).unwrap();
    let mut c = Command::new("make");
    c.arg(format!("-j{jobs}"))
        .current_dir(dir)
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS");
    c.envs(env.iter().copied());
    let (code, _, err) = run(&mut c);
    assert_eq!(code, 0, "make: {err}");
    names
        .iter()
        .map(|n| {
            assert_eq!(
                inspect_json(&dir.join(n))["packed"]["digest_matches"],
                true,
                "{n}"
            );
            let life = std::fs::read_to_string(dir.join(format!("life.{n}"))).unwrap();
            let t: Vec<u128> = life.lines().map(|l| l.trim().parse().unwrap()).collect();
            let trace = std::fs::read_to_string(dir.join(format!("trace.{n}"))).unwrap();
            let steps: Vec<(u128, u128, usize)> = trace
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.split(' ').collect();
                    (
                        f[1].parse().unwrap(),
                        f[2].parse().unwrap(),
                        f[3].parse().unwrap(),
                    )
                })
                .collect();
            assert!(!steps.is_empty(), "{n}: no parallel step traced");
            Job {
                life: (t[0], t[1]),
                steps,
            }
        })
        .collect()
}

/// The most threads busy at once over all jobs: at each step start or job start, every
/// living job counts its running step's threads, or one.
fn most_busy(jobs: &[Job]) -> usize {
    let mut instants: Vec<u128> = jobs.iter().map(|j| j.life.0).collect();
    instants.extend(jobs.iter().flat_map(|j| j.steps.iter().map(|s| s.0)));
    instants
        .iter()
        .map(|&t| {
            jobs.iter()
                .filter(|j| j.life.0 <= t && t <= j.life.1)
                .map(|j| {
                    j.steps
                        .iter()
                        .filter(|s| s.0 <= t && t <= s.1)
                        .map(|s| s.2)
                        .max()
                        .unwrap_or(1)
                })
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn make_jobserver_bounds_the_threads_of_all_links_together() {
    // Alone under make -j4, a link takes the three free job slots: four threads.
    let dir = tempfile::tempdir().unwrap();
    let one = make_links(dir.path(), 4, 1, "", &[("FATPACK_THREADS", "8")]);
    let most = one[0].steps.iter().map(|s| s.2).max().unwrap();
    assert_eq!(most, 4, "a link alone under make -j4 should run 4 threads");

    // Eight links under make -j4, each allowed 4 threads: never more than 4 busy in all.
    let dir = tempfile::tempdir().unwrap();
    let eight = make_links(dir.path(), 4, 8, "", &[("FATPACK_THREADS", "4")]);
    let busy = most_busy(&eight);
    assert!(busy <= 4, "{busy} threads busy at once under make -j4");

    // The same without the jobserver (MAKEFLAGS removed for the links): each link runs
    // its 4 threads whatever else runs, which is what the jobserver prevents.
    let dir = tempfile::tempdir().unwrap();
    let free = make_links(
        dir.path(),
        4,
        8,
        "env -u MAKEFLAGS -u MFLAGS ",
        &[("FATPACK_THREADS", "4")],
    );
    assert!(free.iter().all(|j| j.steps.iter().any(|s| s.2 == 4)));
    assert!(
        most_busy(&free) > 4,
        "without a jobserver the links should oversubscribe"
    );
}

#[test]
fn fatpack_threads_one_gives_one_thread_per_link() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = make_links(
        dir.path(),
        4,
        8,
        "env -u MAKEFLAGS -u MFLAGS ",
        &[("FATPACK_THREADS", "1")],
    );
    for j in &jobs {
        assert!(j.steps.iter().all(|s| s.2 == 1));
    }
    assert!(most_busy(&jobs) <= 4);

    // --fatpack-threads wins over FATPACK_THREADS, and a bad value is an error.
    let w = wrapper_dir();
    let trace = dir.path().join("trace.option");
    let mut objs = fixture_objs();
    objs.extend(big_objects(dir.path(), 6));
    let exe = dir.path().join("opt");
    for (flag, want) in [
        ("-Wl,--fatpack-threads=2", Some(2)),
        ("-Wl,--fatpack-threads=0", None),
    ] {
        let _ = std::fs::remove_file(&trace);
        let (code, _, err) = run(Command::new("g++")
            .arg(format!("-B{}", w.path().display()))
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
            .arg(flag)
            .arg("-o")
            .arg(&exe)
            .args(&objs)
            .arg(format!("-L{}", cuda_lib().display()))
            .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"])
            .env("FATPACK_THREADS", "5")
            .env("FATPACK_TRACE_WORKERS", &trace));
        match want {
            Some(n) => {
                assert_eq!(code, 0, "{err}");
                let t = std::fs::read_to_string(&trace).unwrap();
                let counts: Vec<usize> = t
                    .lines()
                    .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
                    .collect();
                assert_eq!(counts.iter().max(), Some(&n), "{t}");
            }
            None => {
                assert_ne!(code, 0);
                assert!(
                    err.contains("--fatpack-threads=0: want a number of threads"),
                    "{err}"
                );
            }
        }
    }
}
