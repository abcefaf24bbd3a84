//! From an argv to the [`LinkLine`] model: ld's state machine over the options getopt
//! yields (`--whole-archive`, `-Bstatic`, `--as-needed`, groups, `--push-state`, `-b`).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::ops::Range;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use super::getopt::*;
use super::line::*;
use super::options::*;
use super::response::*;

/// The flags ld copies into each input (and saves with `--push-state`).
#[derive(Debug, Clone, Copy)]
pub(super) struct InputFlags {
    pub(super) dynamic: bool,
    pub(super) whole_archive: bool,
    pub(super) as_needed: bool,
}

/// Everything in force where an input appears.
pub(super) struct At {
    pub(super) flags: InputFlags,
    pub(super) group: Option<usize>,
    pub(super) format: Option<OsString>,
}

/// What the scan of a line carries from one option to the next.
struct ScanState {
    flags: InputFlags,
    pushed: Vec<InputFlags>,
    format: Option<OsString>,
    group_depth: usize,
    group_count: usize,
    y_dirs: Option<OsString>,
    version_printed: bool,
    print_output_format: bool,
}

impl ScanState {
    /// Where the next input stands.
    fn at(&self) -> At {
        at(self.flags, self.group_depth, self.group_count, &self.format)
    }
}

pub(super) fn at(
    flags: InputFlags,
    group_depth: usize,
    group_count: usize,
    format: &Option<OsString>,
) -> At {
    At {
        flags,
        group: (group_depth > 0).then(|| group_count - 1),
        format: format.clone(),
    }
}

pub(super) fn lossy(s: &OsStr) -> String {
    s.to_string_lossy().into_owned()
}

impl LinkLine {
    /// Parses an ld command line (without the program name). Reads response files; every
    /// other problem ld would report is left to ld (and noted in `diagnostics`).
    pub fn parse<I, S>(args: I) -> Result<LinkLine, ArgsError>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let original: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let mut ex = Expander {
            slots: Vec::new(),
            files: Vec::new(),
            chain: Vec::new(),
            count: 0,
        };
        let mut top_ranges = Vec::with_capacity(original.len());
        for (top, a) in original.iter().enumerate() {
            let start = ex.slots.len();
            ex.expand(a, top, false)?;
            top_ranges.push(start..ex.slots.len());
        }
        let expanded: Vec<OsString> = ex.slots.iter().map(|s| s.value.clone()).collect();
        let emulation = prescan_emulation(&expanded);
        let sysroot = prescan_sysroot(&expanded);
        let mut line = LinkLine {
            original,
            slots: ex.slots,
            top_ranges,
            response_files: ex.files,
            output: PathBuf::from("a.out"),
            output_given: false,
            kind: OutputKind::Executable,
            static_link: false,
            emulation,
            sysroot,
            library_dirs: Vec::new(),
            scripts: Vec::new(),
            inputs: Vec::new(),
            rpaths: Vec::new(),
            nostdlib: false,
            fatpack_args: Vec::new(),
            info: None,
            end_of_options: None,
            diagnostics: Vec::new(),
        };
        line.scan(&expanded);
        Ok(line)
    }

    fn scan(&mut self, expanded: &[OsString]) {
        let view = rewrite_view(expanded);
        let aarch64 = self
            .emulation
            .as_ref()
            .is_some_and(|e| e.as_bytes().starts_with(b"aarch64"));
        let long: Vec<&'static [LongOpt]> = if aarch64 {
            vec![LONG, LONG_AARCH64]
        } else {
            vec![LONG]
        };
        let mut st = ScanState {
            flags: InputFlags {
                dynamic: true,
                whole_archive: false,
                as_needed: false,
            },
            pushed: Vec::new(),
            format: None,
            group_depth: 0,
            group_count: 0,
            y_dirs: None,
            version_printed: false,
            print_output_format: false,
        };
        let mut i = 0;
        while i < view.len() {
            let a = view[i].as_bytes();
            if a == b"--" {
                // getopt stops here and ld never looks at what follows.
                self.end_of_options = Some(i);
                if i + 1 < view.len() {
                    self.diagnostics.push(format!(
                        "ld ignores the {} argument(s) after `--`",
                        view.len() - i - 1
                    ));
                }
                break;
            }
            if a.len() < 2 || a[0] != b'-' {
                self.push_input(InputKind::Path, view[i].clone(), i..i + 1, st.at());
                i += 1;
                continue;
            }
            if let Some(rest) = a.strip_prefix(FATPACK_PREFIX.as_bytes()) {
                let (name, value) = split_eq(rest);
                self.fatpack_args.push(FatpackArg {
                    name: String::from_utf8_lossy(name).into_owned(),
                    value: value.map(|v| OsString::from_vec(v.to_vec())),
                    span: i..i + 1,
                });
                i += 1;
                continue;
            }
            let (events, used) = match getopt(&view, i, &long) {
                Step::Opts(events, used) => (events, used),
                Step::Unknown => {
                    self.diagnostics
                        .push(format!("ld does not accept `{}`", lossy(&expanded[i])));
                    i += 1;
                    continue;
                }
            };
            let long_form = expanded[i].as_bytes().starts_with(b"--");
            for ev in events {
                self.apply(&mut st, ev, i..i + used, long_form);
            }
            i += used;
        }
        self.finish_scan(st);
    }

    /// What ld does at the end of its command line.
    fn finish_scan(&mut self, st: ScanState) {
        if st.group_depth > 0 {
            self.diagnostics
                .push("missing --end-group (ld adds one at the end)".into());
        }
        if let Some(y) = st.y_dirs {
            for d in y.as_bytes().split(|&b| b == b':').filter(|d| !d.is_empty()) {
                self.library_dirs.push(LibraryDir {
                    raw: OsString::from_vec(d.to_vec()),
                    from_y: true,
                });
            }
        }
        if self.info.is_none() && self.inputs.is_empty() {
            if st.version_printed {
                self.info = Some(InfoRequest::VersionNoInputs);
            } else if st.print_output_format {
                self.info = Some(InfoRequest::PrintOutputFormat);
            }
        }
    }

    /// One option of the line (at `span`; `long_form`: spelled `--...`), as ld applies it.
    fn apply(&mut self, st: &mut ScanState, ev: OptEvent, span: Range<usize>, long_form: bool) {
        let value = ev.value.unwrap_or_default();
        match ev.opt {
            Opt::Other | Opt::Emulation | Opt::Sysroot => {}
            Opt::Output => {
                self.output = PathBuf::from(value);
                self.output_given = true;
            }
            Opt::Library => {
                let (name, verbatim) = match value.as_bytes().strip_prefix(b":") {
                    Some(rest) => (OsString::from_vec(rest.to_vec()), true),
                    None => (value, false),
                };
                let kind = InputKind::Library {
                    verbatim,
                    long_form,
                };
                self.push_input(kind, name, span, st.at());
            }
            Opt::LibraryPath => self.library_dirs.push(LibraryDir {
                raw: value,
                from_y: false,
            }),
            Opt::Script | Opt::DefaultScript => self.scripts.push(ScriptArg {
                name: value,
                default_script: ev.opt == Opt::DefaultScript,
                library_dirs_before: self.library_dirs.len(),
                resolved: None,
                info: None,
            }),
            Opt::Format => st.format = Some(value),
            Opt::JustSymbols => {
                // ld's own test: a directory means -rpath.
                if fs::metadata(&value).is_ok_and(|m| !m.is_dir()) {
                    self.push_input(InputKind::JustSymbols, value, span, st.at());
                } else {
                    self.rpaths.push(value);
                }
            }
            Opt::Rpath => self.rpaths.push(value),
            Opt::SolarisPath => {
                let v = value.as_bytes();
                st.y_dirs = Some(OsString::from_vec(
                    v.strip_prefix(b"P,").unwrap_or(v).to_vec(),
                ));
            }
            Opt::Shared | Opt::Pie | Opt::NoPie | Opt::Relocatable => {
                self.set_output_kind(st, ev.opt)
            }
            Opt::Static => {
                self.static_link = true;
                st.flags.dynamic = false;
            }
            Opt::NonShared | Opt::Omagic | Opt::Nmagic => st.flags.dynamic = false,
            Opt::CallShared => st.flags.dynamic = true,
            Opt::ArchiveKeyword => match value.as_bytes() {
                b"archive" => st.flags.dynamic = false,
                b"shared" | b"default" => st.flags.dynamic = true,
                _ => self
                    .diagnostics
                    .push(format!("ld refuses `-a {}`", lossy(&value))),
            },
            Opt::WholeArchive => st.flags.whole_archive = true,
            Opt::NoWholeArchive => st.flags.whole_archive = false,
            Opt::AsNeeded => st.flags.as_needed = true,
            Opt::NoAsNeeded => st.flags.as_needed = false,
            Opt::StartGroup | Opt::EndGroup | Opt::PushState | Opt::PopState => {
                self.apply_grouping(st, ev.opt)
            }
            Opt::Version => self.set_exit_info(InfoRequest::Version),
            Opt::Help => self.set_exit_info(InfoRequest::Help),
            Opt::TargetHelp => self.set_exit_info(InfoRequest::TargetHelp),
            Opt::PrintSysroot => self.set_exit_info(InfoRequest::PrintSysroot),
            Opt::VersionShort | Opt::VersionEmul | Opt::Verbose => st.version_printed = true,
            Opt::PrintOutputFormat => st.print_output_format = true,
            Opt::NoStdLib => self.nostdlib = true,
            Opt::MriScript => self.diagnostics.push(format!(
                "MRI script {} is not read: inputs it loads are not listed",
                lossy(&value)
            )),
            Opt::RemapInputs => self
                .diagnostics
                .push("--remap-inputs is not modelled: inputs are listed unmapped".into()),
        }
    }

    /// `-shared`, `-pie`, `-no-pie`, `-r`.
    fn set_output_kind(&mut self, st: &mut ScanState, opt: Opt) {
        match opt {
            Opt::Shared | Opt::Pie => {
                if self.kind == OutputKind::Relocatable {
                    self.diagnostics
                        .push("ld refuses -r with -shared or -pie".into());
                } else if opt == Opt::Shared {
                    self.kind = OutputKind::SharedLibrary;
                } else {
                    self.kind = OutputKind::PieExecutable;
                }
            }
            Opt::NoPie => self.kind = OutputKind::Executable,
            _ => {
                if matches!(
                    self.kind,
                    OutputKind::SharedLibrary | OutputKind::PieExecutable
                ) {
                    self.diagnostics
                        .push("ld refuses -r with -shared or -pie".into());
                }
                self.kind = OutputKind::Relocatable;
                st.flags.dynamic = false;
            }
        }
    }

    /// `--start-group`, `--end-group`, `--push-state`, `--pop-state`.
    fn apply_grouping(&mut self, st: &mut ScanState, opt: Opt) {
        match opt {
            Opt::StartGroup => {
                if st.group_depth == 0 {
                    st.group_count += 1;
                }
                st.group_depth += 1;
            }
            Opt::EndGroup => {
                if st.group_depth == 0 {
                    self.diagnostics
                        .push("--end-group without --start-group".into());
                } else {
                    st.group_depth -= 1;
                }
            }
            Opt::PushState => st.pushed.push(st.flags),
            _ => match st.pushed.pop() {
                Some(f) => st.flags = f,
                None => self
                    .diagnostics
                    .push("--pop-state without --push-state".into()),
            },
        }
    }

    fn set_exit_info(&mut self, info: InfoRequest) {
        // ld exits on the first of these it meets.
        if self.info.is_none() {
            self.info = Some(info);
        }
    }

    fn push_input(&mut self, kind: InputKind, name: OsString, span: Range<usize>, at: At) {
        let slot = &self.slots[span.start];
        let id = InputId(self.inputs.len());
        self.inputs.push(Input {
            id,
            kind,
            name,
            whole_archive: at.flags.whole_archive,
            static_search: !at.flags.dynamic,
            as_needed: at.flags.as_needed,
            group: at.group,
            binary: at.format.as_ref().is_some_and(|f| f == "binary"),
            format: at.format,
            arg_index: span.start,
            response_file: slot.from_file.then_some(slot.top),
            resolved: None,
            file_kind: None,
            probe: None,
            script: None,
            span,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn s(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn buildargv_rules() {
        let got = split_response_text(b"a 'b c' \"d e\" f\\ g 'h\\'i' \"j\\\"k\" l\"m n\"o ''\n");
        assert_eq!(
            got,
            s(&["a", "b c", "d e", "f g", "h'i", "j\"k", "lm no", ""])
        );
        assert!(split_response_text(b" \n\t ").is_empty());
        assert_eq!(split_response_text(b"x\0y"), s(&["x"]));
        assert_eq!(split_response_text(b"trailing "), s(&["trailing"]));
    }

    #[test]
    fn quoting_round_trips() {
        let args = s(&[
            "plain",
            "with space",
            "q'uo\"te",
            "back\\slash",
            "",
            "tab\there",
        ]);
        let mut text = Vec::new();
        for a in &args {
            text.extend(quote_response_arg(a));
            text.push(b'\n');
        }
        assert_eq!(split_response_text(&text), args);
    }

    #[test]
    fn long_matching_follows_getopt() {
        assert!(
            matches!(match_long(&[LONG], b"whole"), Match::Found(o) if o.opt == Opt::WholeArchive)
        );
        assert!(matches!(match_long(&[LONG], b"as"), Match::Ambiguous));
        assert!(matches!(match_long(&[LONG], b"out"), Match::Found(o) if o.name == "out-implib"));
        assert!(
            matches!(match_long(&[LONG], b"sysroot"), Match::Found(o) if o.opt == Opt::Sysroot)
        );
        assert!(matches!(match_long(&[LONG], b"output"), Match::None));
    }

    #[test]
    fn view_rewrites() {
        let v = rewrite_view(&s(&["-G", "-G", "8", "-lfoo", "-l", "x"]));
        assert_eq!(v, s(&["--shared", "-G", "8", "--library=foo", "-l", "x"]));
    }

    #[test]
    fn path_arg_guards_dash_and_at() {
        assert_eq!(path_arg(Path::new("-x.o")), "./-x.o");
        assert_eq!(path_arg(Path::new("@x")), "./@x");
        assert_eq!(path_arg(Path::new("/a/-x")), "/a/-x");
    }
}
