//! The model of a GNU ld command line (what each argument means), and its rendering back
//! into an argv. Read the way ld reads it: response files expanded as libiberty does,
//! options tokenised as ld's `getopt_long_only` loop does (same tables, same dash rules, same
//! prefix matching), and the state that decides how each input is taken
//! (`--whole-archive`, `-Bstatic`, `--as-needed`, groups, `--push-state`, `-b binary`).
//!
//! The model keeps every argument it was built from, so that [`LinkLine::render`] can give
//! back the very same argv when nothing changes, or the same line with some inputs swapped.
//!
//! Response files: when a replaced input (or a `--fatpack-*` option) sits inside an `@file`,
//! that `@file` argument is re-emitted expanded, in place; every other `@file` stays as it
//! was. Expanded arguments need no quoting in an argv. A line that grows too long for
//! `execve` can be folded back into one response file with [`fold_into_response_file`].

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::ops::Range;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Options with this prefix belong to the wrapper: recorded, never passed to the real linker.
pub const FATPACK_PREFIX: &str = "--fatpack-";

/// libiberty stops after this many `@file`s (`iteration_limit`), which also ends loops there.
pub const MAX_RESPONSE_FILES: usize = 2000;

#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("response file {}: is a directory", path.display())]
    ResponseFileIsDirectory { path: PathBuf },
    #[error("response file {} includes itself (via {chain})", path.display())]
    ResponseFileLoop { path: PathBuf, chain: String },
    #[error("more than {limit} response files")]
    TooManyResponseFiles { limit: usize },
    #[error("no input #{0} in this link line")]
    UnknownInput(usize),
}

/// Index of an input in [`LinkLine::inputs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InputId(pub usize);

/// How an input was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputKind {
    /// A plain argument: `foo.o`, `/usr/lib/x86_64-linux-gnu/libc.so`.
    Path,
    /// `-lNAME`, `-l NAME`, `--library=NAME`, `--library NAME`; `verbatim` for the `:FILE`
    /// forms (`-l:libfoo.a`), whose `name` is then the file name without the colon.
    Library { verbatim: bool, long_form: bool },
    /// `-R FILE` / `--just-symbols=FILE` naming a regular file: its symbols only.
    JustSymbols,
}

pub use super::target::InputFileKind;

/// One entry of an `INPUT(...)` / `GROUP(...)` command in a linker script.
#[derive(Debug, Clone)]
pub struct ScriptEntry {
    /// As written (`-l` stripped for libraries, `:` too for verbatim ones).
    pub name: OsString,
    pub library: bool,
    pub verbatim: bool,
    pub as_needed: bool,
    pub in_group: bool,
    /// Where the entry is written in the script's text (a quoted name's quotes included).
    pub span: Range<usize>,
    /// Where ld would find it, if anywhere.
    pub resolved: Option<PathBuf>,
    /// What the search saw of the file it found (an implicit script's entries only).
    pub probe: Option<super::target::Probe>,
    /// The entry's own entries, where it is an implicit script too (`libncurses.so` naming
    /// `-ltinfo`, itself `INPUT(libtinfo.so.6)`).
    pub script: Option<Box<ScriptInfo>>,
}

/// What a linker script says about files and directories.
#[derive(Debug, Clone, Default)]
pub struct ScriptInfo {
    /// The script as read (a rewritten copy replaces entries in it).
    pub text: std::sync::Arc<[u8]>,
    pub entries: Vec<ScriptEntry>,
    /// `SEARCH_DIR(...)`, raw (`=` prefixes kept).
    pub search_dirs: Vec<OsString>,
    /// An `INSERT AFTER/BEFORE` script augments the default script instead of replacing it.
    pub has_insert: bool,
    /// `INCLUDE` files are not followed; their names are kept here.
    pub includes: Vec<OsString>,
}

/// One input of the link, in command-line order, with the state in force where it appears.
#[derive(Debug, Clone)]
pub struct Input {
    pub id: InputId,
    pub kind: InputKind,
    /// The path as written, or the library NAME.
    pub name: OsString,
    pub whole_archive: bool,
    /// `-Bstatic` (or `-static`, `-r`, `-N`, ...) in force: only `libNAME.a` is searched.
    pub static_search: bool,
    pub as_needed: bool,
    /// Index of the `--start-group ... --end-group` group this input is in.
    pub group: Option<usize>,
    /// The `-b` / `--format` target in force, if any.
    pub format: Option<OsString>,
    /// Inside `-b binary`: raw data, not ELF.
    pub binary: bool,
    /// Index of the first argument of this input in [`LinkLine::expanded_args`].
    pub arg_index: usize,
    /// Index in the original argv of the `@file` this input came from, if it did.
    pub response_file: Option<usize>,
    /// The file ld opens for it (filled in by `search::resolve`; plain paths as written).
    pub resolved: Option<PathBuf>,
    pub file_kind: Option<InputFileKind>,
    /// What the search saw of the resolved file (its metadata, its bytes when small, its
    /// ELF type), as for a script's entry ([`ScriptEntry::probe`]): the link's later steps
    /// ask the system no more (every stat is a trap in a VM, and a small link's own time is
    /// mostly such calls).
    pub probe: Option<super::target::Probe>,
    /// For an input that is a linker script.
    pub script: Option<ScriptInfo>,
    pub(super) span: Range<usize>,
}

impl Input {
    pub fn is_library(&self) -> bool {
        matches!(self.kind, InputKind::Library { .. })
    }

    /// A library input as the line spells it (`-lNAME`, `-l:FILE`), for messages.
    pub fn library_spelling(&self) -> Option<String> {
        match self.kind {
            InputKind::Library { verbatim, .. } => Some(format!(
                "-l{}{}",
                if verbatim { ":" } else { "" },
                self.name.to_string_lossy()
            )),
            _ => None,
        }
    }

    /// The resolved file's metadata, as the search saw it (a regular file only).
    pub fn meta(&self) -> Option<&std::fs::Metadata> {
        self.probe.as_ref()?.meta.as_ref()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Executable,
    PieExecutable,
    SharedLibrary,
    /// `-r`, `-i`, `--relocatable`, `-Ur`.
    Relocatable,
}

/// A `-T` / `--script` or `-dT` / `--default-script` argument.
#[derive(Debug, Clone)]
pub struct ScriptArg {
    pub name: OsString,
    /// `-dT`: replaces the default script rather than the whole script.
    pub default_script: bool,
    /// How many `-L` directories precede it (ld searches only those for a `-T` script).
    pub library_dirs_before: usize,
    pub resolved: Option<PathBuf>,
    pub info: Option<ScriptInfo>,
}

/// An `-L` directory (or one from `-Y P,dir:dir`), as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryDir {
    pub raw: OsString,
    /// From `-Y`: ld appends these after every `-L`.
    pub from_y: bool,
}

/// A `--fatpack-NAME[=VALUE]` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatpackArg {
    pub name: String,
    pub value: Option<OsString>,
    pub(super) span: Range<usize>,
}

/// Requests that need no link: the wrapper just hands the line to the real linker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoRequest {
    /// `--version` (ld exits at once).
    Version,
    Help,
    TargetHelp,
    PrintSysroot,
    /// `-v`, `-V` or `--verbose` and no input: ld prints and exits.
    VersionNoInputs,
    /// `--print-output-format` and no input.
    PrintOutputFormat,
}

/// A `@file` that was expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseFile {
    /// Index in the original argv of the top-level argument it came from.
    pub arg_index: usize,
    pub path: PathBuf,
    /// 0 for one named on the command line, 1 for one named inside that, ...
    pub depth: usize,
}

#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub(super) value: OsString,
    pub(super) top: usize,
    pub(super) from_file: bool,
}

/// A parsed ld command line (program name not included).
#[derive(Debug, Clone)]
pub struct LinkLine {
    pub(super) original: Vec<OsString>,
    pub(super) slots: Vec<Slot>,
    /// Range of `slots` each original argument expanded to.
    pub(super) top_ranges: Vec<Range<usize>>,
    pub response_files: Vec<ResponseFile>,
    pub output: PathBuf,
    /// Whether `-o` was given (else `a.out`).
    pub output_given: bool,
    pub kind: OutputKind,
    /// `-static` / `-non_shared` was given (`-Bstatic` / `-dn` only change input state).
    pub static_link: bool,
    /// `-m EMUL`, found the way ld's pre-scan finds it.
    pub emulation: Option<OsString>,
    /// `--sysroot=DIR` (ld honours only the joined form).
    pub sysroot: Option<PathBuf>,
    pub library_dirs: Vec<LibraryDir>,
    pub scripts: Vec<ScriptArg>,
    pub inputs: Vec<Input>,
    pub rpaths: Vec<OsString>,
    pub nostdlib: bool,
    pub fatpack_args: Vec<FatpackArg>,
    pub info: Option<InfoRequest>,
    /// Index in the expanded argv of a `--`: ld ignores everything after it.
    pub end_of_options: Option<usize>,
    /// Things ld would warn or fail about, and things this model does not follow.
    pub diagnostics: Vec<String>,
}

impl LinkLine {
    /// The argv as given (response files not expanded).
    pub fn original_args(&self) -> &[OsString] {
        &self.original
    }

    /// The argv as ld sees it after expanding response files.
    pub fn expanded_args(&self) -> Vec<OsString> {
        self.slots.iter().map(|s| s.value.clone()).collect()
    }

    pub fn input(&self, id: InputId) -> Option<&Input> {
        self.inputs.get(id.0)
    }

    /// The link needs no work from the wrapper: hand the line to the real linker.
    pub fn is_info_only(&self) -> bool {
        self.info.is_some()
    }

    /// The value of the last `--fatpack-NAME=VALUE`, or `Some("")` for a bare `--fatpack-NAME`.
    pub fn fatpack_value(&self, name: &str) -> Option<&OsStr> {
        self.fatpack_args
            .iter()
            .rev()
            .find(|f| f.name == name)
            .map(|f| f.value.as_deref().unwrap_or(OsStr::new("")))
    }

    /// Whether `--fatpack-NAME` (with or without a value) was given.
    pub fn fatpack_flag(&self, name: &str) -> bool {
        self.fatpack_args.iter().any(|f| f.name == name)
    }

    /// The line for the real linker: the original arguments, with each input in `replace`
    /// swapped for its path (an input written as two arguments, `-l foo`, becomes one; a
    /// `-R FILE` becomes `--just-symbols=PATH`), the `--fatpack-*` options dropped, `prepend`
    /// first and `append` last. A response file holding a changed argument is emitted
    /// expanded; the others stay `@file`. With nothing to change, this is the original argv,
    /// byte for byte.
    pub fn render(
        &self,
        replace: &BTreeMap<InputId, PathBuf>,
        prepend: &[OsString],
        append: &[OsString],
    ) -> Result<Vec<OsString>, ArgsError> {
        enum Action<'a> {
            Keep,
            Replace(&'a Path, bool),
            Drop,
        }
        let mut action: Vec<Action> = self.slots.iter().map(|_| Action::Keep).collect();
        for (id, path) in replace {
            let input = self.inputs.get(id.0).ok_or(ArgsError::UnknownInput(id.0))?;
            action[input.span.start] = Action::Replace(path, input.kind == InputKind::JustSymbols);
            for a in &mut action[input.span.start + 1..input.span.end] {
                *a = Action::Drop;
            }
        }
        for f in &self.fatpack_args {
            for s in f.span.clone() {
                action[s] = Action::Drop;
            }
        }
        let dirty: BTreeSet<usize> = action
            .iter()
            .enumerate()
            .filter(|(_, a)| !matches!(a, Action::Keep))
            .map(|(s, _)| self.slots[s].top)
            .collect();

        let mut out = prepend.to_vec();
        for (top, orig) in self.original.iter().enumerate() {
            if !dirty.contains(&top) {
                out.push(orig.clone());
                continue;
            }
            for s in self.top_ranges[top].clone() {
                match action[s] {
                    Action::Keep => out.push(self.slots[s].value.clone()),
                    // A just-symbols input must stay one: only its file changes.
                    Action::Replace(p, true) => {
                        let mut a = OsString::from("--just-symbols=");
                        a.push(p.as_os_str());
                        out.push(a);
                    }
                    Action::Replace(p, false) => out.push(path_arg(p)),
                    Action::Drop => {}
                }
            }
        }
        out.extend_from_slice(append);
        Ok(out)
    }
}

/// A path as a plain input argument: one starting with `-` or `@` would be read as an option
/// or a response file, so it gets a `./`.
pub fn path_arg(p: &Path) -> OsString {
    let b = p.as_os_str().as_bytes();
    if matches!(b.first(), Some(b'-') | Some(b'@')) {
        let mut v = b"./".to_vec();
        v.extend_from_slice(b);
        OsString::from_vec(v)
    } else {
        p.as_os_str().to_owned()
    }
}
