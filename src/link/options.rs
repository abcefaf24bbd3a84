//! What the `--fatpack-*` options and the environment ask of a link.

use super::LinkError;

use crate::ld::LinkLine;

/// An enum of an option's words: the words (the first is the default) and the value each
/// names, in one list. `$names` may be a list the environment table shares.
macro_rules! choices {
    ($(#[$m:meta])* $name:ident = $names:expr => {
        $($(#[$vm:meta])* $v:ident),+ $(,)?
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* $v),+
        }

        impl $name {
            /// The words naming each value, in the order of the variants.
            pub const NAMES: &'static [&'static str] = $names;
            const ALL: &'static [$name] = &[$($name::$v),+];
        }

        impl Choice for $name {
            fn all() -> &'static [Self] {
                // One word per value, in one order: checked when the table is built.
                const _: () = assert!($name::NAMES.len() == $name::ALL.len());
                $name::ALL
            }
        }
    };
}

/// What [`choices!`] makes: the values of an option of words, in [`Takes::OneOf`]'s order.
trait Choice: Copy + 'static {
    fn all() -> &'static [Self];
}

choices! {
    /// How device code is kept out of the way of the host code's relocations.
    Mode = crate::environment::MODE_VALUES => {
        /// The default: packed where the inputs hold enough device code for packing to pay
        /// (`super::worth_packing`), else the line goes to the real linker unchanged.
        Auto,
        /// A store outside every loaded segment, and the runtime.
        Packed,
        /// No store, no runtime: the fatbin sections move past `.bss` (linker-scripts/).
        Tail,
    }
}

/// The tail-mode scripts, shipped inside the binary so that fatpack needs no data files: GNU
/// ld's places the fatbin after the large-model sections too; lld's after `.bss`.
pub const TAIL_SCRIPT: &str = include_str!("../../linker-scripts/fatbin-tail.ld");
pub const TAIL_SCRIPT_LLD: &str = include_str!("../../linker-scripts/fatbin-tail-lld.ld");

/// The level of `--fatpack-release` without `--fatpack-level` (`fatpack repack`'s default).
pub use cubin_store::RELEASE_LEVEL;

/// What a `--fatpack-*` option takes.
pub enum Takes {
    /// An on/off switch, which also takes `=yes`/`=no`.
    Switch,
    /// A whole number from `min` to `max`; `want` names it in an error.
    Number {
        min: u64,
        max: u64,
        want: &'static str,
    },
    /// One of these words; the first is the default.
    OneOf(&'static [&'static str]),
}

/// One `--fatpack-*` option, written once: its name after the prefix, what it takes, the
/// variable that stands in for it where the line does not give it, and what it does. The
/// parser ([`PackOptions::from_line`]), `fatpack help ld`, `fatpack ld --help`, the man page
/// and the completions are all made from these rows.
pub struct FatpackOption {
    pub name: &'static str,
    pub takes: Takes,
    pub env: Option<&'static str>,
    pub help: &'static str,
}

impl FatpackOption {
    /// What it takes, as the help spells it (`N`, `auto|packed|tail`); `None` for a switch.
    pub fn value(&self) -> Option<String> {
        match self.takes {
            Takes::Switch => None,
            Takes::Number { .. } => Some("N".into()),
            Takes::OneOf(words) => Some(words.join("|")),
        }
    }

    /// `--fatpack-NAME`.
    pub fn spelled(&self) -> String {
        format!("--fatpack-{}", self.name)
    }
}

const fn switch_option(name: &'static str, help: &'static str) -> FatpackOption {
    FatpackOption {
        name,
        takes: Takes::Switch,
        env: None,
        help,
    }
}

pub const SIDE_FILE: FatpackOption = switch_option(
    "side-file",
    "the store in <output>.fatpack beside the output, not inside it",
);
pub const VERBOSE: FatpackOption = switch_option(
    "verbose",
    "what was packed; time and memory per step (or FATPACK_VERBOSE=1)",
);
pub const LEVEL: FatpackOption = FatpackOption {
    name: "level",
    takes: Takes::Number {
        min: 1,
        max: 22,
        want: "a zstd level 1-22",
    },
    env: None,
    help: "zstd level 1-22 (default 9; NVIDIA's zstd frames kept as they are)",
};
pub const MODE: FatpackOption = FatpackOption {
    name: "mode",
    takes: Takes::OneOf(Mode::NAMES),
    env: Some(crate::environment::MODE),
    help: "auto: packed from 512 KiB of device code; packed: always; tail: after .bss",
};
pub const SAVE_TEMPS: FatpackOption = switch_option(
    "save-temps",
    "keep rewritten inputs and the ld line in <output>.fatpack-temps/",
);
pub const DRY_RUN: FatpackOption = switch_option(
    "dry-run",
    "print the rewrite and the real linker's line; write nothing",
);
pub const THREADS: FatpackOption = FatpackOption {
    name: "threads",
    takes: Takes::Number {
        min: 1,
        max: u32::MAX as u64,
        want: "a number of threads, 1 or more",
    },
    env: None,
    help: "at most N threads (or FATPACK_THREADS; under make, its jobserver)",
};
pub const RELEASE: FatpackOption = switch_option(
    "release",
    "a release store as `fatpack repack --release` writes (level 19)",
);
pub const ROUTE: FatpackOption = FatpackOption {
    name: "route",
    takes: Takes::OneOf(Route::NAMES),
    env: None,
    help: "direct: link inputs as given, stub the output; copy: link stubbed copies",
};
pub const EARLY_LINK: FatpackOption = FatpackOption {
    name: "early-link",
    takes: Takes::OneOf(EarlyLink::NAMES),
    env: None,
    help: "start the direct route's link before the scan has read the inputs",
};
pub const FORK: FatpackOption = FatpackOption {
    name: "fork",
    takes: Takes::OneOf(Fork::NAMES),
    env: Some(crate::environment::FORK),
    help: "end when the output is in place; a child frees memory (auto: 64 MiB in)",
};

/// Every `--fatpack-*` option `fatpack ld` takes, in the order the help prints them.
pub const OPTIONS: &[&FatpackOption] = &[
    &SIDE_FILE,
    &VERBOSE,
    &LEVEL,
    &MODE,
    &SAVE_TEMPS,
    &DRY_RUN,
    &THREADS,
    &RELEASE,
    &ROUTE,
    &EARLY_LINK,
    &FORK,
];

/// `--fatpack-NAME[=VALUE]` and what it does, per option, for the help and man page.
pub fn options_help() -> String {
    // Lines under 80 columns, each help under its option: clap wraps longer ones flush left.
    let mut out = String::from(
        "fatpack's own options (taken from among ld's arguments, never passed on;\n\
         on/off options also take =yes or =no):\n",
    );
    for o in OPTIONS {
        out += &help_lines(o);
    }
    out += "Environment (an option on the line wins over its variable):\n";
    out += &crate::environment::help(crate::environment::Reader::Link);
    out
}

/// One option's two help lines: how it is written, and what it does.
fn help_lines(o: &FatpackOption) -> String {
    match o.value() {
        Some(v) => format!("  {}={v}\n      {}\n", o.spelled(), o.help),
        None => format!("  {}\n      {}\n", o.spelled(), o.help),
    }
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
    /// has ([`Fork`], `super::fork`).
    pub fork: Fork,
}

choices! {
    /// Whether the link's work runs in a child process, so that the command ends as soon as the
    /// output is in place and the child's end (the kernel freeing what it mapped and allocated)
    /// is nobody's wait. The output is the same bytes either way.
    Fork = crate::environment::FORK_VALUES => {
        /// `auto` (the default): where the link reads objects and archives of
        /// [`super::fork::FORK_FROM`] bytes or more.
        Auto,
        /// `yes`: every link that reaches the scan.
        Yes,
        /// `no`: one process.
        No,
    }
}

choices! {
    /// Whether the direct route's real link starts before the scan has read the inputs, on the
    /// guess that it will find device code and leave the direct route open. The output is the
    /// same bytes either way; a wrong guess costs the CPU the stopped link used while the scan ran.
    EarlyLink = &["auto", "yes", "no"] => {
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
}

choices! {
    /// How a packed link keeps device code out of its output.
    Route = &["auto", "direct", "copy"] => {
        /// `auto` (the default): the route that writes less. Copying writes the inputs' other
        /// bytes (an archive is copied whole); linking them as given has the real linker write
        /// their device code too (and hold it, as plain ld does). So the direct route where the
        /// inputs with device code hold no more device code than other bytes (static CUDA
        /// libraries: H200, 0.88-1.28x plain ld over nine runs where copying is 1.05-1.24x,
        /// BENCHMARKS.md "Current figures"), else the copy
        /// route (objects that are mostly device code: on 2 CPUs, 4.8 s where the direct route
        /// takes 6.7 s, and ld's peak stays small). The choice depends on the inputs only.
        Auto,
        /// `direct`: the real linker links the inputs as given, the device sections placed last
        /// by the tail script, and the containers are then replaced by stubs in the output, which
        /// is cut short (`src/link/direct.rs`): nothing is copied before the link. Where it
        /// cannot be taken (gold, mold, a line with its own linker script, a layout the cut
        /// refuses) the link takes the copy route, and `--fatpack-verbose` says why.
        Direct,
        /// `copy`: the inputs with device code are copied with stubs in place of their
        /// containers, and the real linker links the copies. What gold and mold links take.
        Copy,
    }
}

impl PackOptions {
    pub(super) fn from_line(line: &LinkLine) -> Result<Self, LinkError> {
        // A misspelt option must not be ignored: the link would silently do something else.
        for f in &line.fatpack_args {
            if !OPTIONS.iter().any(|o| o.name == f.name) {
                let known: Vec<String> = OPTIONS.iter().map(|o| o.spelled()).collect();
                return Err(LinkError::Option(format!(
                    "unknown option --fatpack-{} (fatpack knows {})",
                    f.name,
                    known.join(", ")
                )));
            }
        }
        let verbose = switch(line, &VERBOSE)?
            || std::env::var_os(crate::environment::VERBOSE).is_some_and(|v| v != "0")
            || line
                .expanded_args()
                .iter()
                .any(|a| a == "-v" || a == "--verbose");
        let level = match number(line, &LEVEL)? {
            Some(l) => l as i32,
            None if switch(line, &RELEASE)? => RELEASE_LEVEL,
            None => cubin_store::DEFAULT_LEVEL,
        };
        Ok(PackOptions {
            mode: choice(line, &MODE)?,
            route: choice(line, &ROUTE)?,
            early_link: choice(line, &EARLY_LINK)?,
            fork: choice(line, &FORK)?,
            threads: number(line, &THREADS)?.map(|n| n as usize),
            side_file: switch(line, &SIDE_FILE)?,
            save_temps: switch(line, &SAVE_TEMPS)?,
            dry_run: switch(line, &DRY_RUN)?,
            verbose,
            level,
            frames: match line.fatpack_value(LEVEL.name) {
                None => cubin_store::FrameUse::Keep,
                Some(_) => cubin_store::FrameUse::Smaller,
            },
            release: switch(line, &RELEASE)?.then_some(crate::store::groups::Solid::RELEASE),
        })
    }
}

/// The number option `o` gives, if the line gives it: refused outside its range.
fn number(line: &LinkLine, o: &FatpackOption) -> Result<Option<u64>, LinkError> {
    let Takes::Number { min, max, want } = o.takes else {
        unreachable!("{} takes no number", o.spelled())
    };
    let Some(v) = line.fatpack_value(o.name) else {
        return Ok(None);
    };
    v.to_str()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|n| (min..=max).contains(n))
        .map(Some)
        .ok_or_else(|| {
            LinkError::Option(format!(
                "{}={}: want {want}",
                o.spelled(),
                v.to_string_lossy()
            ))
        })
}

/// The value option `o`'s word names (its first word when the line does not give it, or
/// its variable where the line gives none); any other word is an error listing them.
fn choice<T: Choice>(line: &LinkLine, o: &FatpackOption) -> Result<T, LinkError> {
    let Takes::OneOf(words) = o.takes else {
        unreachable!("{} takes no word", o.spelled())
    };
    let values: Vec<(&str, T)> = words
        .iter()
        .copied()
        .zip(T::all().iter().copied())
        .collect();
    let from_env = o.env.and_then(|var| Some((var, std::env::var_os(var)?)));
    match (line.fatpack_value(o.name), from_env) {
        (Some(given), _) => one_of(&o.spelled(), &given.to_string_lossy(), &values),
        // A whole build's links, under `fatpack run` or a Nix hook; the line wins.
        (None, Some((var, v))) if !v.is_empty() => one_of(var, &v.to_string_lossy(), &values),
        (None, _) => Ok(values[0].1),
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
fn switch(line: &LinkLine, o: &FatpackOption) -> Result<bool, LinkError> {
    let Some(value) = line.fatpack_value(o.name) else {
        return Ok(false);
    };
    match value.to_str() {
        Some("" | "yes" | "1" | "true" | "on") => Ok(true),
        Some("no" | "0" | "false" | "off") => Ok(false),
        _ => Err(LinkError::Option(format!(
            "{}={}: want yes or no (or none, for yes)",
            o.spelled(),
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
        let kib = super::super::worth_packing::PACK_THRESHOLD >> 10;
        assert!(
            MODE.help.contains(&format!("from {kib} KiB")),
            "{}",
            MODE.help
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
            let args = match o.takes {
                Takes::Number { min, max, .. } => vec![
                    (format!("{}={min}", o.spelled()), true),
                    (format!("{}={max}", o.spelled()), true),
                    (format!("{}={}", o.spelled(), max + 1), false),
                    (format!("{}={}", o.spelled(), min - 1), false),
                ],
                Takes::OneOf(words) => words
                    .iter()
                    .map(|w| (format!("{}={w}", o.spelled()), true))
                    .chain([(format!("{}=nonsense", o.spelled()), false)])
                    .collect(),
                Takes::Switch => vec![(o.spelled(), true)],
            };
            for (arg, ok) in args {
                assert_eq!(options(&[&arg]).is_ok(), ok, "{arg}");
            }
        }
        assert!(LEVEL
            .help
            .contains(&format!("default {}", cubin_store::DEFAULT_LEVEL)));
        assert!(RELEASE.help.contains(&format!("level {RELEASE_LEVEL}")));
        assert!(options(&["--fatpack-sidefile"]).is_err());
        // The first word is the default, and the defaults are the code's.
        let o = options(&[]).unwrap();
        assert_eq!((o.route, o.early_link), (Route::ALL[0], EarlyLink::ALL[0]));
        assert_eq!((Route::NAMES[0], Route::ALL[0]), ("auto", Route::Auto));
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

    /// What the design's row says of a new option holds: a row and a field. A row that is
    /// in no table (here, one of the link's own word lists and a variable) already parses,
    /// takes its variable where the line gives none, refuses a word it does not know by
    /// listing its words, and has its help lines.
    #[test]
    fn an_option_is_one_row() {
        const FAKE: FatpackOption = FatpackOption {
            name: "fake-choice",
            takes: Takes::OneOf(EarlyLink::NAMES),
            env: Some("NOT_SET_FAKE_CHOICE_VARIABLE"),
            help: "a row no table holds",
        };
        let line = |args: &[&str]| {
            let mut all = vec!["-o", "out", "a.o"];
            all.extend_from_slice(args);
            LinkLine::parse(all).unwrap()
        };
        assert_eq!(
            choice::<EarlyLink>(&line(&[]), &FAKE).unwrap(),
            EarlyLink::Auto
        );
        let given = line(&["--fatpack-fake-choice=no"]);
        assert_eq!(choice::<EarlyLink>(&given, &FAKE).unwrap(), EarlyLink::No);
        let err = choice::<EarlyLink>(&line(&["--fatpack-fake-choice=maybe"]), &FAKE)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--fatpack-fake-choice=maybe: want `auto`, `yes` or `no`"),
            "{err}"
        );
        assert_eq!(
            help_lines(&FAKE),
            "  --fatpack-fake-choice=auto|yes|no\n      a row no table holds\n"
        );
    }
}
