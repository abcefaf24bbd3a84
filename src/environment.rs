//! Every `FATPACK_*` environment variable that fatpack, a program it linked, or fatpack's own
//! build reads: one table ([`VARIABLES`]), from which the top help, `fatpack help ld`,
//! `fatpack ld --help` and the man pages print them, and against which a test checks that no
//! variable is read that the table lacks (and that the README names each one a user sets).
//!
//! The names a program's runtime reads are defined in `fatpack_format::link` (the one crate
//! the runtime shares with the CLI); the rest are defined here, and code reads each through
//! its constant, never a string of its own.

use std::ffi::CStr;

use fatpack_format::link as abi;

/// Who reads a variable, which says where it is documented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// `fatpack ld` (and so every link under `fatpack run`).
    Link,
    /// A program or library fatpack packed, at run time (its runtime).
    Program,
    /// fatpack's own build (`build.rs`, building the runtime it carries).
    Build,
    /// fatpack itself between its own processes, or its tests: never set by hand.
    Internal,
}

/// One variable: its name, the value it takes, who reads it and what it does.
pub struct Variable {
    pub name: &'static str,
    pub value: Value,
    pub reader: Reader,
    pub help: &'static str,
}

/// The runtime reads its names with getenv before `main`, as C strings; the table needs them
/// as text.
const fn text(c: &'static CStr) -> &'static str {
    match c.to_str() {
        Ok(s) => s,
        Err(_) => panic!("an environment variable's name is ASCII"),
    }
}

pub const REAL_LD: &str = "FATPACK_REAL_LD";
pub const RUNTIME: &str = "FATPACK_RUNTIME";
pub const VERBOSE: &str = "FATPACK_VERBOSE";
pub const THREADS: &str = "FATPACK_THREADS";
pub const MODE: &str = "FATPACK_MODE";
pub const FORK: &str = "FATPACK_FORK";
pub const CACHE_DIR: &str = "FATPACK_CACHE_DIR";
pub const LD_DEPTH: &str = "FATPACK_LD_DEPTH";
pub const TRACE_WORKERS: &str = "FATPACK_TRACE_WORKERS";

/// What a variable is set to: a placeholder for the help (`N`, `DIR`), or one of these
/// words (printed `a|b|c`), the same words as the option it stands in for.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    Text(&'static str),
    OneOf(&'static [&'static str]),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Text(t) => f.write_str(t),
            Value::OneOf(words) => f.write_str(&words.join("|")),
        }
    }
}

/// The values of `FATPACK_MODE` and `--fatpack-mode`, written once (the first is the
/// default): `link::options::Mode` is made from them.
pub const MODE_VALUES: &[&str] = &["auto", "packed", "tail"];
/// The values of `FATPACK_FORK` and `--fatpack-fork` (`link::options::Fork`).
pub const FORK_VALUES: &[&str] = &["auto", "yes", "no"];

/// Every variable, grouped by reader in the order the help prints them.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: REAL_LD,
        value: Value::Text("PATH"),
        reader: Reader::Link,
        help: "the real linker (default: the one of fatpack's own name on PATH)",
    },
    Variable {
        name: THREADS,
        value: Value::Text("N"),
        reader: Reader::Link,
        help: "at most N threads per step (--fatpack-threads wins; make's jobserver too)",
    },
    Variable {
        name: MODE,
        value: Value::OneOf(MODE_VALUES),
        reader: Reader::Link,
        help: "the mode of every link whose line gives no --fatpack-mode",
    },
    Variable {
        name: FORK,
        value: Value::OneOf(FORK_VALUES),
        reader: Reader::Link,
        help: "--fatpack-fork of every link whose line gives none (no: one process)",
    },
    Variable {
        name: VERBOSE,
        value: Value::Text("1"),
        reader: Reader::Link,
        help: "as --fatpack-verbose, for every link",
    },
    Variable {
        name: RUNTIME,
        value: Value::Text("PATH"),
        reader: Reader::Link,
        help: "a runtime archive to link instead of the one fatpack carries",
    },
    Variable {
        name: CACHE_DIR,
        value: Value::Text("DIR"),
        reader: Reader::Link,
        help: "where what links learn of the linker and of inputs is kept (empty: none)",
    },
    Variable {
        name: text(abi::ENV_LOG),
        value: Value::Text("info|debug"),
        reader: Reader::Program,
        help: "log each choice: module, device, arch, bytes, time",
    },
    Variable {
        name: text(abi::ENV_ARCH),
        value: Value::Text("sm_80|compute_90|..."),
        reader: Reader::Program,
        help: "force that entry for every module",
    },
    Variable {
        name: text(abi::ENV_EAGER),
        value: Value::Text("1"),
        reader: Reader::Program,
        help: "load every module at start-up, not at first use",
    },
    Variable {
        name: text(abi::ENV_AHEAD),
        value: Value::Text("MIB"),
        reader: Reader::Program,
        help: "decode ahead of first use, once the driver is up: MIB MiB (32; 0: none)",
    },
    Variable {
        name: text(abi::ENV_DECODE),
        value: Value::Text("auto|runtime"),
        reader: Reader::Program,
        help: "runtime: decode every entry here, never handing the driver zstd frames",
    },
    Variable {
        name: "FATPACK_RT_EXTRA_TARGETS",
        value: Value::Text("TRIPLE,..."),
        reader: Reader::Build,
        help: "also carry the runtime for these Rust targets (for cross links)",
    },
    Variable {
        name: "FATPACK_RT_RUSTFLAGS",
        value: Value::Text("FLAGS"),
        reader: Reader::Build,
        help: "more rustc flags for the runtime, after fatpack's own",
    },
    Variable {
        name: "FATPACK_RT_CFLAGS",
        value: Value::Text("FLAGS"),
        reader: Reader::Build,
        help: "more C flags for the runtime's zstd, after fatpack's own",
    },
    Variable {
        name: "FATPACK_DYNAMIC",
        value: Value::Text("1"),
        reader: Reader::Build,
        help: "link fatpack against the shared C library, not as a static PIE",
    },
    Variable {
        name: "FATPACK_RT_LD",
        value: Value::Text("PATH"),
        reader: Reader::Build,
        help: "the ld that joins the runtime into one object",
    },
    Variable {
        name: "FATPACK_RT_OBJCOPY",
        value: Value::Text("PATH"),
        reader: Reader::Build,
        help: "the objcopy that localises the runtime's symbols",
    },
    Variable {
        name: LD_DEPTH,
        value: Value::Text("N"),
        reader: Reader::Internal,
        help: "set for the real linker fatpack runs, to stop wrappers calling each other",
    },
    Variable {
        name: TRACE_WORKERS,
        value: Value::Text("FILE"),
        reader: Reader::Internal,
        help: "the tests' record of each parallel step's threads",
    },
];

/// The variables `reader` reads, one `NAME=VALUE` and its help per line pair, indented as
/// clap indents options; lines under 80 columns.
pub fn help(reader: Reader) -> String {
    let mut out = String::new();
    for v in VARIABLES.iter().filter(|v| v.reader == reader) {
        out += &format!("  {}={}\n      {}\n", v.name, v.value, v.help);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_the_help_fits_80_columns() {
        let mut names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len());
        for r in [
            Reader::Link,
            Reader::Program,
            Reader::Build,
            Reader::Internal,
        ] {
            for l in help(r).lines() {
                assert!(l.len() < 80, "{l:?}");
                assert!(!l.is_empty());
            }
        }
    }
}
