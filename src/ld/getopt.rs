//! ld's `getopt_long_only` loop: long options with one or two dashes, unambiguous prefixes,
//! clustered short options, and ld's pre-scans of the raw argv.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use super::options::*;

pub(super) enum Match {
    Found(&'static LongOpt),
    Ambiguous,
    None,
}

/// glibc's long-option lookup: an exact name wins, else a unique prefix. Under
/// `getopt_long_only` any two prefix matches are ambiguous; ld's second table has no two
/// options with the same meaning, so the same rule serves both passes.
pub(super) fn match_long(tables: &[&'static [LongOpt]], name: &[u8]) -> Match {
    for t in tables {
        if let Some(opt) = t.iter().find(|opt| opt.name.as_bytes() == name) {
            return Match::Found(opt);
        }
    }
    let mut found = None;
    for t in tables {
        for opt in t.iter().filter(|opt| opt.name.as_bytes().starts_with(name)) {
            if found.is_some() {
                return Match::Ambiguous;
            }
            found = Some(opt);
        }
    }
    found.map_or(Match::None, Match::Found)
}

pub(super) struct OptEvent {
    pub(super) opt: Opt,
    pub(super) value: Option<OsString>,
}

/// What one argv element turned out to be, and how many elements it used.
pub(super) enum Step {
    Opts(Vec<OptEvent>, usize),
    Unknown,
}

pub(super) fn split_eq(body: &[u8]) -> (&[u8], Option<&[u8]>) {
    match body.iter().position(|&b| b == b'=') {
        Some(p) => (&body[..p], Some(&body[p + 1..])),
        None => (body, None),
    }
}

pub(super) fn finish_long(opt: &LongOpt, eq: Option<&[u8]>, view: &[OsString], i: usize) -> Step {
    let one = |value: Option<OsString>, used| {
        Step::Opts(
            vec![OptEvent {
                opt: opt.opt,
                value,
            }],
            used,
        )
    };
    match (opt.arg, eq) {
        (HasArg::No, Some(_)) => Step::Unknown,
        (_, Some(v)) => one(Some(OsString::from_vec(v.to_vec())), 1),
        (HasArg::Req, None) => match view.get(i + 1) {
            Some(v) => one(Some(v.clone()), 2),
            None => Step::Unknown,
        },
        (_, None) => one(None, 1),
    }
}

/// One step of ld's option loop at `view[i]`, which starts with `-` and is not `-` or `--`.
pub(super) fn getopt(view: &[OsString], i: usize, long: &[&'static [LongOpt]]) -> Step {
    let a = view[i].as_bytes();
    if let Some(body) = a.strip_prefix(b"--") {
        let (name, eq) = split_eq(body);
        if let Match::Found(opt) = match_long(long, name) {
            return finish_long(opt, eq, view, i);
        }
        return match match_long(&[REALLY_LONG], name) {
            Match::Found(opt) => finish_long(opt, eq, view, i),
            _ => Step::Unknown,
        };
    }
    let body = &a[1..];
    let short = short_opt(body[0]);
    if body.len() > 1 || short.is_none() {
        let (name, eq) = split_eq(body);
        match match_long(long, name) {
            Match::Found(opt) => return finish_long(opt, eq, view, i),
            // ld retries with getopt_long, which reads a single dash as short options and
            // knows none there: an error either way.
            Match::Ambiguous => return Step::Unknown,
            Match::None if short.is_none() => return Step::Unknown,
            Match::None => {}
        }
    }
    // A cluster of short options; one taking an argument ends it.
    let mut events = Vec::new();
    for (k, &c) in body.iter().enumerate() {
        let Some((arg, opt)) = short_opt(c) else {
            return Step::Unknown;
        };
        if arg == HasArg::Req {
            let rest = &body[k + 1..];
            if !rest.is_empty() {
                events.push(OptEvent {
                    opt,
                    value: Some(OsString::from_vec(rest.to_vec())),
                });
                return Step::Opts(events, 1);
            }
            return match view.get(i + 1) {
                Some(v) => {
                    events.push(OptEvent {
                        opt,
                        value: Some(v.clone()),
                    });
                    Step::Opts(events, 2)
                }
                None => Step::Unknown,
            };
        }
        events.push(OptEvent { opt, value: None });
    }
    Step::Opts(events, 1)
}

/// ld's pre-scan for the emulation (ldmain.c `get_emulation`), run on the raw expanded argv.
pub(super) fn prescan_emulation(args: &[OsString]) -> Option<OsString> {
    const IGNORED: &[&[u8]] = &[
        b"-mips1",
        b"-mips2",
        b"-mips3",
        b"-mips4",
        b"-mabi=32",
        b"-mabi=n32",
        b"-mabi=o64",
        b"-mabi=64",
        b"-m486",
    ];
    let mut emulation = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_bytes();
        if a == b"-m" {
            if let Some(next) = args.get(i + 1) {
                emulation = Some(next.clone());
                i += 1;
            }
        } else if a.starts_with(b"-m") && !IGNORED.contains(&a) {
            emulation = Some(OsString::from_vec(a[2..].to_vec()));
        }
        i += 1;
    }
    emulation
}

/// ld's pre-scan for the sysroot (ldmain.c `get_sysroot`): only `--sysroot=DIR` counts.
pub(super) fn prescan_sysroot(args: &[OsString]) -> Option<PathBuf> {
    args.iter()
        .rev()
        .find_map(|a| a.as_bytes().strip_prefix(b"--sysroot="))
        .map(|v| PathBuf::from(OsStr::from_bytes(v)))
}

/// ld rewrites these before its option loop: `-lNAME` becomes `--library=NAME` (so a library
/// named `ibrary` is not `--library`), and `-G` not followed by a number becomes `--shared`.
pub(super) fn rewrite_view(args: &[OsString]) -> Vec<OsString> {
    let mut view: Vec<OsString> = args.to_vec();
    for i in 0..view.len() {
        let a = args[i].as_bytes();
        if a == b"-G"
            && !args
                .get(i + 1)
                .is_some_and(|n| n.as_bytes().first().is_some_and(u8::is_ascii_digit))
        {
            view[i] = OsString::from("--shared");
        } else if a.len() > 2 && a.starts_with(b"-l") {
            let mut v = b"--library=".to_vec();
            v.extend_from_slice(&a[2..]);
            view[i] = OsString::from_vec(v);
        }
    }
    view
}
