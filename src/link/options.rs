//! What the `--fatpack-*` options and the environment ask of a link.

use super::LinkError;

use crate::ld::LinkLine;

/// How device code is kept out of the way of the host code's relocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The default: packed where the inputs hold enough device code for packing to pay
    /// (`super::worth_packing`), else the line goes to the real linker unchanged.
    Auto,
    /// A store outside every loaded segment, and the runtime.
    Packed,
    /// No store, no runtime: the fatbin sections move past `.bss` (linker-scripts/).
    Tail,
}

/// The tail-mode scripts, shipped inside the binary so that fatpack needs no data files: GNU
/// ld's places the fatbin after the large-model sections too; lld's after `.bss`.
pub const TAIL_SCRIPT: &str = include_str!("../../linker-scripts/fatbin-tail.ld");
pub const TAIL_SCRIPT_LLD: &str = include_str!("../../linker-scripts/fatbin-tail-lld.ld");

/// The level of `--fatpack-release` without `--fatpack-level` (`fatpack repack`'s default).
pub use cubin_store::RELEASE_LEVEL;

/// One `--fatpack-*` option: its name after the prefix, the value it takes (`None`: an
/// on/off switch, which also takes `=yes`/`=no`), and what it does.
pub struct FatpackOption {
    pub name: &'static str,
    pub value: Option<&'static str>,
    pub help: &'static str,
}

/// Every `--fatpack-*` option `fatpack ld` takes: the one table the parser checks names
/// against and `fatpack help ld`, `fatpack ld --help` and the man page print.
pub const OPTIONS: &[FatpackOption] = &[
    FatpackOption {
        name: "side-file",
        value: None,
        help: "the store in <output>.fatpack beside the output, not inside it",
    },
    FatpackOption {
        name: "verbose",
        value: None,
        help: "what was packed; time and memory per step (or FATPACK_VERBOSE=1)",
    },
    FatpackOption {
        name: "level",
        value: Some("N"),
        help: "zstd level 1-22 (default 9; NVIDIA's zstd frames kept as they are)",
    },
    FatpackOption {
        name: "mode",
        value: Some("auto|packed|tail"),
        help: "auto: packed from 512 KiB of device code; packed: always; tail: after .bss",
    },
    FatpackOption {
        name: "save-temps",
        value: None,
        help: "keep rewritten inputs and the ld line in <output>.fatpack-temps/",
    },
    FatpackOption {
        name: "dry-run",
        value: None,
        help: "print the rewrite and the real linker's line; write nothing",
    },
    FatpackOption {
        name: "threads",
        value: Some("N"),
        help: "at most N threads (or FATPACK_THREADS; under make, its jobserver)",
    },
    FatpackOption {
        name: "release",
        value: None,
        help: "a release store as `fatpack repack --release` writes (level 19)",
    },
    FatpackOption {
        name: "route",
        value: Some("auto|direct|copy"),
        help: "direct: link inputs as given, stub the output; copy: link stubbed copies",
    },
    FatpackOption {
        name: "early-link",
        value: Some("auto|yes|no"),
        help: "start the direct route's link before the scan has read the inputs",
    },
    FatpackOption {
        name: "fork",
        value: Some("auto|yes|no"),
        help: "end when the output is in place; a child frees memory (auto: 64 MiB in)",
    },
];

/// `--fatpack-NAME[=VALUE]` and what it does, per option, for the help and man page.
pub fn options_help() -> String {
    // Lines under 80 columns, each help under its option: clap wraps longer ones flush left.
    let mut out = String::from(
        "fatpack's own options (taken from among ld's arguments, never passed on;\n\
         on/off options also take =yes or =no):\n",
    );
    for o in OPTIONS {
        match o.value {
            Some(v) => out += &format!("  --fatpack-{}={v}\n", o.name),
            None => out += &format!("  --fatpack-{}\n", o.name),
        }
        out += &format!("      {}\n", o.help);
    }
    out += "Environment (an option on the line wins over its variable):\n";
    out += &crate::environment::help(crate::environment::Reader::Link);
    out
}

/// What `--fatpack-*` options and the environment ask for.
#[derive(Debug, Clone)]
pub struct PackOptions {
    pub mode: Mode,
    pub side_file: bool,
    pub verbose: bool,
    pub level: i32,
    /// nvcc's zstd-compressed entries: without `--fatpack-level` their frames are kept as
    /// they are (nothing compressed again); a level given compresses them at it as well and
    /// keeps the smaller of the two.
    pub frames: cubin_store::FrameUse,
    /// `--fatpack-save-temps`: keep the rewritten inputs, glue, runtime and the real
    /// linker's command line (`ld.rsp`) in `<output>.fatpack-temps/`.
    pub save_temps: bool,
    /// `--fatpack-dry-run`: say what would be rewritten and run; write nothing.
    pub dry_run: bool,
    /// `--fatpack-threads=N`: at most N threads in each parallel step (None: the
    /// environment's or one per CPU).
    pub threads: Option<usize>,
    /// `--fatpack-release`: a release store (solid groups, what `fatpack repack --release`
    /// writes), at `--fatpack-level` or 19.
    pub release: Option<crate::store::groups::Solid>,
    /// `--fatpack-route=`: how the device code leaves the link ([`Route`]).
    pub route: Route,
    /// `--fatpack-early-link=`: whether the direct route's link starts before the scan
    /// ([`EarlyLink`]).
    pub early_link: EarlyLink,
    /// `--fatpack-fork=`: whether the link runs in a child that ends after the command
    /// has ([`Fork`], `super::handoff`).
    pub fork: Fork,
}

/// Whether the link's work runs in a child process, so that the command ends as soon as the
/// output is in place and the child's end (the kernel freeing what it mapped and allocated)
/// is nobody's wait. The output is the same bytes either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fork {
    /// `auto` (the default): where the link reads objects and archives of
    /// [`super::handoff::FORK_FROM`] bytes or more.
    Auto,
    /// `yes`: every link that reaches the scan.
    Yes,
    /// `no`: one process.
    No,
}

/// Whether the direct route's real link starts before the scan has read the inputs, on the
/// guess that it will find device code and leave the direct route open. The output is the
/// same bytes either way; a wrong guess costs the CPU the stopped link used while the scan ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyLink {
    /// `auto` (the default): where the line names cudart or cudadevrt, as nvcc's links and
    /// CMake's CUDA targets do, and an archive of 16 MiB or more (a static CUDA library,
    /// whose scan is worth overlapping; a small program's link started early would only be
    /// stopped: its objects are mostly device code, so its route is copy).
    Auto,
    /// `yes`: wherever the route may be direct.
    Yes,
    /// `no`: the link starts after the scan.
    No,
}

/// How a packed link keeps device code out of its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `copy`: the inputs with device code are copied with stubs in place of their
    /// containers, and the real linker links the copies. What gold and mold links take.
    Copy,
    /// `direct`: the real linker links the inputs as given, the device sections placed last
    /// by the tail script, and the containers are then replaced by stubs in the output, which
    /// is cut short (`src/link/direct.rs`): nothing is copied before the link. Where it
    /// cannot be taken (gold, mold, a line with its own linker script, a layout the cut
    /// refuses) the link takes the copy route, and `--fatpack-verbose` says why.
    Direct,
    /// `auto` (the default): the route that writes less. Copying writes the inputs' other
    /// bytes (an archive is copied whole); linking them as given has the real linker write
    /// their device code too (and hold it, as plain ld does). So the direct route where the
    /// inputs with device code hold no more device code than other bytes (static CUDA
    /// libraries: H200, 0.88-1.28x plain ld over nine runs where copying is 1.05-1.24x,
    /// BENCHMARKS.md "Current figures"), else the copy
    /// route (objects that are mostly device code: on 2 CPUs, 4.8 s where the direct route
    /// takes 6.7 s, and ld's peak stays small). The choice depends on the inputs only.
    Auto,
}

impl PackOptions {
    pub(super) fn from_line(line: &LinkLine) -> Result<Self, LinkError> {
        // A misspelt option must not be ignored: the link would silently do something else.
        for f in &line.fatpack_args {
            if !OPTIONS.iter().any(|o| o.name == f.name) {
                let known: Vec<String> = OPTIONS
                    .iter()
                    .map(|o| format!("--fatpack-{}", o.name))
                    .collect();
                return Err(LinkError::Option(format!(
                    "unknown option --fatpack-{} (fatpack knows {})",
                    f.name,
                    known.join(", ")
                )));
            }
        }
        let verbose = switch(line, "verbose")?
            || std::env::var_os(crate::environment::VERBOSE).is_some_and(|v| v != "0")
            || line
                .expanded_args()
                .iter()
                .any(|a| a == "-v" || a == "--verbose");
        let level = match line.fatpack_value("level") {
            Some(v) => v
                .to_str()
                .and_then(|s| s.parse().ok())
                .filter(|l| (1..=22).contains(l))
                .ok_or_else(|| {
                    LinkError::Option(format!(
                        "--fatpack-level={}: want a zstd level 1-22",
                        v.to_string_lossy()
                    ))
                })?,
            None if switch(line, "release")? => RELEASE_LEVEL,
            None => cubin_store::DEFAULT_LEVEL,
        };
        let mode = choice_or_env(
            line,
            "mode",
            crate::environment::MODE,
            &[
                ("auto", Mode::Auto),
                ("packed", Mode::Packed),
                ("tail", Mode::Tail),
            ],
        )?;
        let route = choice(
            line,
            "route",
            &[
                ("auto", Route::Auto),
                ("direct", Route::Direct),
                ("copy", Route::Copy),
            ],
        )?;
        let early_link = choice(
            line,
            "early-link",
            &[
                ("auto", EarlyLink::Auto),
                ("yes", EarlyLink::Yes),
                ("no", EarlyLink::No),
            ],
        )?;
        let fork = choice_or_env(
            line,
            "fork",
            crate::environment::FORK,
            &[("auto", Fork::Auto), ("yes", Fork::Yes), ("no", Fork::No)],
        )?;
        let threads = match line.fatpack_value("threads") {
            None => None,
            Some(v) => Some(
                v.to_str()
                    .and_then(|s| s.parse::<usize>().ok())
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| {
                        LinkError::Option(format!(
                            "--fatpack-threads={}: want a number of threads, 1 or more",
                            v.to_string_lossy()
                        ))
                    })?,
            ),
        };
        Ok(PackOptions {
            mode,
            route,
            early_link,
            fork,
            threads,
            side_file: switch(line, "side-file")?,
            save_temps: switch(line, "save-temps")?,
            dry_run: switch(line, "dry-run")?,
            verbose,
            level,
            frames: match line.fatpack_value("level") {
                None => cubin_store::FrameUse::Keep,
                Some(_) => cubin_store::FrameUse::Smaller,
            },
            release: switch(line, "release")?.then_some(crate::store::groups::Solid::RELEASE),
        })
    }
}

/// An option that names one of `values` (the first is the default, when it is not given);
/// any other value is an error listing them.
fn choice<T: Copy>(line: &LinkLine, name: &str, values: &[(&str, T)]) -> Result<T, LinkError> {
    match line.fatpack_value(name) {
        Some(given) => one_of(
            &format!("--fatpack-{name}"),
            &given.to_string_lossy(),
            values,
        ),
        None => Ok(values[0].1),
    }
}

/// [`choice`], where the environment variable `var` stands in for an option the line does
/// not give (a whole build's links, under `fatpack run` or a Nix hook); the line wins.
fn choice_or_env<T: Copy>(
    line: &LinkLine,
    name: &str,
    var: &str,
    values: &[(&str, T)],
) -> Result<T, LinkError> {
    match (line.fatpack_value(name), std::env::var_os(var)) {
        (None, Some(v)) if !v.is_empty() => one_of(var, &v.to_string_lossy(), values),
        _ => choice(line, name, values),
    }
}

/// The value of `values` that `given` names, else an error naming `what` and listing them.
fn one_of<T: Copy>(what: &str, given: &str, values: &[(&str, T)]) -> Result<T, LinkError> {
    match values.iter().find(|(v, _)| *v == given) {
        Some(&(_, t)) => Ok(t),
        None => {
            let names: Vec<String> = values.iter().map(|(v, _)| format!("`{v}`")).collect();
            let (last, rest) = names.split_last().expect("an option has values");
            let want = match rest {
                [] => last.clone(),
                _ => format!("{} or {last}", rest.join(", ")),
            };
            Err(LinkError::Option(format!("{what}={given}: want {want}")))
        }
    }
}

/// An on/off option: `--fatpack-NAME` or `=yes`/`=1`/`=true`/`=on` turn it on,
/// `=no`/`=0`/`=false`/`=off` off (the last one given wins, as with ld's own options); any
/// other value is an error, never silently taken for "on".
fn switch(line: &LinkLine, name: &str) -> Result<bool, LinkError> {
    let Some(value) = line.fatpack_value(name) else {
        return Ok(false);
    };
    match value.to_str() {
        Some("" | "yes" | "1" | "true" | "on") => Ok(true),
        Some("no" | "0" | "false" | "off") => Ok(false),
        _ => Err(LinkError::Option(format!(
            "--fatpack-{name}={}: want yes or no (or none, for yes)",
            value.to_string_lossy()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mode's help gives the threshold the code uses.
    #[test]
    fn the_mode_help_names_the_packing_threshold() {
        let mode = OPTIONS.iter().find(|o| o.name == "mode").unwrap();
        let kib = super::super::worth_packing::PACK_THRESHOLD >> 10;
        assert!(
            mode.help.contains(&format!("from {kib} KiB")),
            "{}",
            mode.help
        );
    }

    /// No line of the help is wider than clap's 80 columns (wider ones wrap flush left).
    #[test]
    fn the_options_help_fits_80_columns() {
        for l in options_help().lines() {
            assert!(l.len() <= 80, "{l}");
        }
    }

    /// The table's words agree with what the parser does: every option parses in the form
    /// the help gives (a value from its list), and the defaults it names are the code's.
    #[test]
    fn the_option_table_says_what_the_parser_takes() {
        for o in OPTIONS {
            let arg = match o.value {
                Some("N") if o.name == "level" => "--fatpack-level=5".to_string(),
                Some("N") => format!("--fatpack-{}=2", o.name),
                Some(list) => format!("--fatpack-{}={}", o.name, list.split('|').next().unwrap()),
                None => format!("--fatpack-{}", o.name),
            };
            assert!(options(&[&arg]).is_ok(), "{arg}");
        }
        let level = OPTIONS.iter().find(|o| o.name == "level").unwrap();
        assert!(level
            .help
            .contains(&format!("default {}", cubin_store::DEFAULT_LEVEL)));
        let release = OPTIONS.iter().find(|o| o.name == "release").unwrap();
        assert!(release.help.contains(&format!("level {RELEASE_LEVEL}")));
        assert!(options(&["--fatpack-sidefile"]).is_err());
    }

    fn options(args: &[&str]) -> Result<PackOptions, LinkError> {
        let mut all = vec!["-o", "out", "a.o"];
        all.extend_from_slice(args);
        PackOptions::from_line(&LinkLine::parse(all).unwrap())
    }

    #[test]
    fn switches_take_yes_and_no_and_refuse_anything_else() {
        let o = options(&["--fatpack-side-file", "--fatpack-dry-run=no"]).unwrap();
        assert!(o.side_file && !o.dry_run && !o.save_temps);
        for off in ["no", "0", "false", "off"] {
            let o = options(&[&format!("--fatpack-side-file={off}")]).unwrap();
            assert!(!o.side_file, "{off}");
        }
        let o = options(&["--fatpack-save-temps=no", "--fatpack-save-temps=yes"]).unwrap();
        assert!(o.save_temps, "the last one wins");
        let err = options(&["--fatpack-dry-run=maybe"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--fatpack-dry-run=maybe") && err.contains("yes or no"),
            "{err}"
        );
    }
}
