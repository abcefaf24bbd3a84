//! A GNU ld command line, read the way ld reads it: response files expanded as libiberty does,
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
use std::fs;
use std::io;
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

/// What a resolved input file holds, by its first bytes (filled in by `search::resolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFileKind {
    Elf,
    Archive,
    ThinArchive,
    /// Anything else that reads as text: ld takes it as an implicit linker script
    /// (`libc.so` is one).
    Script,
    /// LLVM bitcode, for an LTO plugin.
    Bitcode,
    /// Read raw, because it follows `-b binary`.
    Binary,
    /// Binary content of no known kind (ld would try it as a script and fail), or not a
    /// regular file.
    Other,
    Missing,
}

/// One entry of an `INPUT(...)` / `GROUP(...)` command in a linker script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptEntry {
    /// As written (`-l` stripped for libraries, `:` too for verbatim ones).
    pub name: OsString,
    pub library: bool,
    pub verbatim: bool,
    pub as_needed: bool,
    pub in_group: bool,
    /// Where ld would find it, if anywhere.
    pub resolved: Option<PathBuf>,
}

/// What a linker script says about files and directories.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptInfo {
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
    /// For an input that is a linker script.
    pub script: Option<ScriptInfo>,
    span: Range<usize>,
}

impl Input {
    pub fn is_library(&self) -> bool {
        matches!(self.kind, InputKind::Library { .. })
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
pub struct FatpackOption {
    pub name: String,
    pub value: Option<OsString>,
    span: Range<usize>,
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
struct Slot {
    value: OsString,
    top: usize,
    from_file: bool,
}

/// A parsed ld command line (program name not included).
#[derive(Debug, Clone)]
pub struct LinkLine {
    original: Vec<OsString>,
    slots: Vec<Slot>,
    /// Range of `slots` each original argument expanded to.
    top_ranges: Vec<Range<usize>>,
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
    pub fatpack_options: Vec<FatpackOption>,
    pub info: Option<InfoRequest>,
    /// Index in the expanded argv of a `--`: ld ignores everything after it.
    pub end_of_options: Option<usize>,
    /// Things ld would warn or fail about, and things this model does not follow.
    pub diagnostics: Vec<String>,
}

// ----------------------------------------------------------------------------------------
// Response files

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits response-file text into arguments exactly as libiberty's `buildargv` does:
/// whitespace separates, `'...'` and `"..."` group, a backslash takes the next byte as is
/// (inside quotes too). Text that is empty or all whitespace gives no argument; text after a
/// NUL byte is not seen (libiberty works on a C string).
pub fn split_response_text(text: &[u8]) -> Vec<OsString> {
    let text = match text.iter().position(|&b| b == 0) {
        Some(n) => &text[..n],
        None => text,
    };
    let mut out = Vec::new();
    if text.iter().all(|&b| is_space(b)) {
        return out;
    }
    let mut i = 0;
    loop {
        while i < text.len() && is_space(text[i]) {
            i += 1;
        }
        let (mut sq, mut dq, mut bs) = (false, false, false);
        let mut arg = Vec::new();
        while i < text.len() {
            let c = text[i];
            if is_space(c) && !sq && !dq && !bs {
                break;
            }
            if bs {
                bs = false;
                arg.push(c);
            } else if c == b'\\' {
                bs = true;
            } else if sq {
                if c == b'\'' {
                    sq = false;
                } else {
                    arg.push(c);
                }
            } else if dq {
                if c == b'"' {
                    dq = false;
                } else {
                    arg.push(c);
                }
            } else if c == b'\'' {
                sq = true;
            } else if c == b'"' {
                dq = true;
            } else {
                arg.push(c);
            }
            i += 1;
        }
        out.push(OsString::from_vec(arg));
        while i < text.len() && is_space(text[i]) {
            i += 1;
        }
        if i >= text.len() {
            break;
        }
    }
    out
}

/// One argument quoted for a response file, so that [`split_response_text`] gives it back.
pub fn quote_response_arg(arg: &OsStr) -> Vec<u8> {
    let b = arg.as_bytes();
    if b.is_empty() {
        // libiberty's writeargv writes nothing here, losing the argument; quotes keep it.
        return b"''".to_vec();
    }
    let mut out = Vec::with_capacity(b.len() + 2);
    for &c in b {
        if is_space(c) || matches!(c, b'\\' | b'\'' | b'"') {
            out.push(b'\\');
        }
        out.push(c);
    }
    out
}

/// Writes `args` to `path` as a response file, one per line.
pub fn write_response_file(path: &Path, args: &[OsString]) -> io::Result<()> {
    let mut text = Vec::new();
    for a in args {
        text.extend_from_slice(&quote_response_arg(a));
        text.push(b'\n');
    }
    fs::write(path, text)
}

/// If `args` add up to more than `limit` bytes, writes them to `<dir>/<name>` and returns the
/// single argument `@<dir>/<name>`; else returns them as they are. Linux refuses an `execve`
/// whose arguments pass about 2 MiB, or any one argument over 128 KiB.
pub fn fold_into_response_file(
    args: Vec<OsString>,
    dir: &Path,
    name: &str,
    limit: usize,
) -> io::Result<Vec<OsString>> {
    let total: usize = args.iter().map(|a| a.len() + 1).sum();
    if total <= limit {
        return Ok(args);
    }
    let path = dir.join(name);
    write_response_file(&path, &args)?;
    let mut at = OsString::from("@");
    at.push(path.as_os_str());
    Ok(vec![at])
}

struct Expander {
    slots: Vec<Slot>,
    files: Vec<ResponseFile>,
    chain: Vec<PathBuf>,
    count: usize,
}

impl Expander {
    /// libiberty's `expandargv`, recursively so that a loop can be named: an `@file` that
    /// cannot be read stays a literal argument; a directory is an error.
    fn expand(&mut self, arg: &OsStr, top: usize, from_file: bool) -> Result<(), ArgsError> {
        let b = arg.as_bytes();
        if b.first() != Some(&b'@') {
            self.slots.push(Slot {
                value: arg.to_owned(),
                top,
                from_file,
            });
            return Ok(());
        }
        let path = PathBuf::from(OsStr::from_bytes(&b[1..]));
        let literal = |s: &mut Self| {
            s.slots.push(Slot {
                value: arg.to_owned(),
                top,
                from_file,
            })
        };
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(_) => {
                literal(self);
                return Ok(());
            }
        };
        if meta.is_dir() {
            return Err(ArgsError::ResponseFileIsDirectory { path });
        }
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(_) => {
                literal(self);
                return Ok(());
            }
        };
        self.count += 1;
        if self.count >= MAX_RESPONSE_FILES {
            return Err(ArgsError::TooManyResponseFiles {
                limit: MAX_RESPONSE_FILES,
            });
        }
        let canon = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if self.chain.contains(&canon) {
            let chain = self
                .chain
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> ");
            return Err(ArgsError::ResponseFileLoop { path, chain });
        }
        self.files.push(ResponseFile {
            arg_index: top,
            path,
            depth: self.chain.len(),
        });
        self.chain.push(canon);
        for a in split_response_text(&text) {
            self.expand(&a, top, true)?;
        }
        self.chain.pop();
        Ok(())
    }
}

// ----------------------------------------------------------------------------------------
// Option tables: ld's own (ld/lexsup.c, ld/emultempl/elf.em, binutils 2.40), with the same
// names, argument kinds and dash rules, because prefix matching depends on the whole table.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HasArg {
    No,
    Req,
    Optional,
}

/// The options whose meaning this model needs; the rest are `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Other,
    Output,
    Library,
    LibraryPath,
    Script,
    DefaultScript,
    Emulation,
    Format,
    Sysroot,
    JustSymbols,
    SolarisPath,
    Shared,
    Pie,
    NoPie,
    Relocatable,
    Static,
    NonShared,
    CallShared,
    ArchiveKeyword,
    Omagic,
    Nmagic,
    WholeArchive,
    NoWholeArchive,
    AsNeeded,
    NoAsNeeded,
    StartGroup,
    EndGroup,
    PushState,
    PopState,
    Version,
    VersionShort,
    VersionEmul,
    Verbose,
    Help,
    TargetHelp,
    PrintSysroot,
    PrintOutputFormat,
    NoStdLib,
    MriScript,
    Rpath,
    RemapInputs,
}

struct LongOpt {
    name: &'static str,
    arg: HasArg,
    opt: Opt,
}

const fn o(name: &'static str, arg: HasArg, opt: Opt) -> LongOpt {
    LongOpt { name, arg, opt }
}

use HasArg::{No, Optional, Req};

/// ONE_DASH, TWO_DASHES and NO_HELP options: ld's `longopts`, matched with one dash or two.
const LONG: &[LongOpt] = &[
    o("dc", No, Opt::Other),
    o("dp", No, Opt::Other),
    o("dependency-file", Req, Opt::Other),
    o("force-group-allocation", No, Opt::Other),
    o("entry", Req, Opt::Other),
    o("export-dynamic", No, Opt::Other),
    o("no-export-dynamic", No, Opt::Other),
    o("enable-non-contiguous-regions", No, Opt::Other),
    o("enable-non-contiguous-regions-warnings", No, Opt::Other),
    o("disable-linker-version", No, Opt::Other),
    o("enable-linker-version", No, Opt::Other),
    o("EB", No, Opt::Other),
    o("EL", No, Opt::Other),
    o("auxiliary", Req, Opt::Other),
    o("filter", Req, Opt::Other),
    o("format", Req, Opt::Format),
    o("gpsize", Req, Opt::Other),
    o("soname", Req, Opt::Other),
    o("dynamic-linker", Req, Opt::Other),
    o("no-dynamic-linker", No, Opt::Other),
    o("library", Req, Opt::Library),
    o("library-path", Req, Opt::LibraryPath),
    o("sysroot=<DIRECTORY>", Req, Opt::Sysroot),
    o("print-map", No, Opt::Other),
    o("nmagic", No, Opt::Nmagic),
    o("out-implib", Req, Opt::Other),
    o("plugin", Req, Opt::Other),
    o("plugin-opt", Req, Opt::Other),
    o("plugin-save-temps", No, Opt::Other),
    o("flto", Optional, Opt::Other),
    o("flto-partition=", Req, Opt::Other),
    o("fuse-ld=", Req, Opt::Other),
    o("map-whole-files", Optional, Opt::Other),
    o("no-map-whole-files", Optional, Opt::Other),
    o("Qy", No, Opt::Other),
    o("emit-relocs", No, Opt::Other),
    o("relocatable", No, Opt::Relocatable),
    o("just-symbols", Req, Opt::JustSymbols),
    o("remap-inputs-file", Req, Opt::RemapInputs),
    o("remap-inputs", Req, Opt::RemapInputs),
    o("strip-all", No, Opt::Other),
    o("strip-debug", No, Opt::Other),
    o("strip-discarded", No, Opt::Other),
    o("no-strip-discarded", No, Opt::Other),
    o("trace", No, Opt::Other),
    o("script", Req, Opt::Script),
    o("default-script", Req, Opt::DefaultScript),
    o("dT", Req, Opt::DefaultScript),
    o("undefined", Req, Opt::Other),
    o("require-defined", Req, Opt::Other),
    o("unique", Optional, Opt::Other),
    o("Ur", No, Opt::Relocatable),
    o("version", No, Opt::Version),
    o("discard-all", No, Opt::Other),
    o("discard-locals", No, Opt::Other),
    o("discard-none", No, Opt::Other),
    o("trace-symbol", Req, Opt::Other),
    o("start-group", No, Opt::StartGroup),
    o("end-group", No, Opt::EndGroup),
    o("accept-unknown-input-arch", No, Opt::Other),
    o("no-accept-unknown-input-arch", No, Opt::Other),
    o("add-needed", No, Opt::Other),
    o("no-add-needed", No, Opt::Other),
    o("as-needed", No, Opt::AsNeeded),
    o("no-as-needed", No, Opt::NoAsNeeded),
    o("assert", Req, Opt::Other),
    o("Bdynamic", No, Opt::CallShared),
    o("dy", No, Opt::CallShared),
    o("call_shared", No, Opt::CallShared),
    o("Bstatic", No, Opt::NonShared),
    o("dn", No, Opt::NonShared),
    o("non_shared", No, Opt::Static),
    o("static", No, Opt::Static),
    o("Bno-symbolic", No, Opt::Other),
    o("Bsymbolic", No, Opt::Other),
    o("Bsymbolic-functions", No, Opt::Other),
    o("check-sections", No, Opt::Other),
    o("no-check-sections", No, Opt::Other),
    o("copy-dt-needed-entries", No, Opt::Other),
    o("no-copy-dt-needed-entries", No, Opt::Other),
    o("cref", No, Opt::Other),
    o("defsym", Req, Opt::Other),
    o("demangle", Optional, Opt::Other),
    o("disable-multiple-abs-defs", No, Opt::Other),
    o("embedded-relocs", No, Opt::Other),
    o("fatal-warnings", No, Opt::Other),
    o("no-fatal-warnings", No, Opt::Other),
    o("fini", Req, Opt::Other),
    o("force-exe-suffix", No, Opt::Other),
    o("gc-sections", No, Opt::Other),
    o("no-gc-sections", No, Opt::Other),
    o("print-gc-sections", No, Opt::Other),
    o("no-print-gc-sections", No, Opt::Other),
    o("gc-keep-exported", No, Opt::Other),
    o("hash-size=<NUMBER>", Req, Opt::Other),
    o("help", No, Opt::Help),
    o("init", Req, Opt::Other),
    o("Map", Req, Opt::Other),
    o("no-define-common", No, Opt::Other),
    o("no-demangle", No, Opt::Other),
    o("no-keep-memory", No, Opt::Other),
    o("no-undefined", No, Opt::Other),
    o("no-warnings", No, Opt::Other),
    o("allow-shlib-undefined", No, Opt::Other),
    o("no-allow-shlib-undefined", No, Opt::Other),
    o("allow-multiple-definition", No, Opt::Other),
    o("error-handling-script", Req, Opt::Other),
    o("no-undefined-version", No, Opt::Other),
    o("default-symver", No, Opt::Other),
    o("default-imported-symver", No, Opt::Other),
    o("no-warn-mismatch", No, Opt::Other),
    o("no-warn-search-mismatch", No, Opt::Other),
    o("no-whole-archive", No, Opt::NoWholeArchive),
    o("no-link-mapless", No, Opt::Other),
    o("noinhibit-exec", No, Opt::Other),
    o("noinhibit_exec", No, Opt::Other),
    o("nostdlib", No, Opt::NoStdLib),
    o("print-output-format", No, Opt::PrintOutputFormat),
    o("print-sysroot", No, Opt::PrintSysroot),
    o("qmagic", No, Opt::Other),
    o("reduce-memory-overheads", No, Opt::Other),
    o("max-cache-size=SIZE", Req, Opt::Other),
    o("relax", No, Opt::Other),
    o("no-relax", No, Opt::Other),
    o("retain-symbols-file", Req, Opt::Other),
    o("rpath", Req, Opt::Rpath),
    o("rpath-link", Req, Opt::Other),
    o("shared", No, Opt::Shared),
    o("Bshareable", No, Opt::Shared),
    o("pie", No, Opt::Pie),
    o("pic-executable", No, Opt::Pie),
    o("no-pie", No, Opt::NoPie),
    o("sort-common", Optional, Opt::Other),
    o("sort_common", No, Opt::Other),
    o("sort-section", Req, Opt::Other),
    o("section-ordering-file", Req, Opt::Other),
    o("spare-dynamic-tags", Req, Opt::Other),
    o("split-by-file", Optional, Opt::Other),
    o("split-by-reloc", Optional, Opt::Other),
    o("stats", Optional, Opt::Other),
    o("no-stats", Optional, Opt::Other),
    o("target-help", No, Opt::TargetHelp),
    o("task-link", Req, Opt::Relocatable),
    o("traditional-format", No, Opt::Other),
    o("section-start", Req, Opt::Other),
    o("image-base", Req, Opt::Other),
    o("Tbss", Req, Opt::Other),
    o("Tdata", Req, Opt::Other),
    o("Ttext", Req, Opt::Other),
    o("Ttext-segment", Req, Opt::Other),
    o("Trodata-segment", Req, Opt::Other),
    o("Tldata-segment", Req, Opt::Other),
    o("unresolved-symbols=<method>", Req, Opt::Other),
    o("verbose", Optional, Opt::Verbose),
    o("dll-verbose", No, Opt::Verbose),
    o("version-script", Req, Opt::Other),
    o("version-exports-section", Req, Opt::Other),
    o("dynamic-list-data", No, Opt::Other),
    o("dynamic-list-cpp-new", No, Opt::Other),
    o("dynamic-list-cpp-typeinfo", No, Opt::Other),
    o("dynamic-list", Req, Opt::Other),
    o("warn-common", No, Opt::Other),
    o("warn-constructors", No, Opt::Other),
    o("error-execstack", No, Opt::Other),
    o("no-error-execstack", No, Opt::Other),
    o("warn-execstack-objects", No, Opt::Other),
    o("warn-execstack", No, Opt::Other),
    o("no-warn-execstack", No, Opt::Other),
    o("error-rwx-segments", No, Opt::Other),
    o("no-error-rwx-segments", No, Opt::Other),
    o("warn-rwx-segments", No, Opt::Other),
    o("no-warn-rwx-segments", No, Opt::Other),
    o("warn-multiple-gp", No, Opt::Other),
    o("warn-once", No, Opt::Other),
    o("warn-section-align", No, Opt::Other),
    o("warn-textrel", No, Opt::Other),
    o("warn-shared-textrel", No, Opt::Other),
    o("warn-alternate-em", No, Opt::Other),
    o("warn-unresolved-symbols", No, Opt::Other),
    o("error-unresolved-symbols", No, Opt::Other),
    o("whole-archive", No, Opt::WholeArchive),
    o("link-mapless", No, Opt::Other),
    o("wrap", Req, Opt::Other),
    o("ignore-unresolved-symbol", Req, Opt::Other),
    o("push-state", No, Opt::PushState),
    o("pop-state", No, Opt::PopState),
    o("print-memory-usage", No, Opt::Other),
    o("orphan-handling", Req, Opt::Other),
    o("print-map-discarded", No, Opt::Other),
    o("no-print-map-discarded", No, Opt::Other),
    o("print-map-locals", No, Opt::Other),
    o("no-print-map-locals", No, Opt::Other),
    o("ctf-variables", No, Opt::Other),
    o("no-ctf-variables", No, Opt::Other),
    o("ctf-share-types=<method>", Req, Opt::Other),
    // ELF emulations (elf.em), appended to the same table.
    o("audit", Req, Opt::Other),
    o("Bgroup", No, Opt::Other),
    o("build-id", Optional, Opt::Other),
    o("package-metadata", Optional, Opt::Other),
    o("compress-debug-sections", Req, Opt::Other),
    o("depaudit", Req, Opt::Other),
    o("disable-new-dtags", No, Opt::Other),
    o("enable-new-dtags", No, Opt::Other),
    o("eh-frame-hdr", No, Opt::Other),
    o("no-eh-frame-hdr", No, Opt::Other),
    o("exclude-libs", Req, Opt::Other),
    o("hash-style", Req, Opt::Other),
    o("rosegment", No, Opt::Other),
    o("no-rosegment", No, Opt::Other),
    o("ld-generated-unwind-info", No, Opt::Other),
    o("no-ld-generated-unwind-info", No, Opt::Other),
];

/// Extra options of the aarch64 emulations (aarch64elf.em), used when `-m aarch64*`.
const LONG_AARCH64: &[LongOpt] = &[
    o("no-enum-size-warning", No, Opt::Other),
    o("no-wchar-size-warning", No, Opt::Other),
    o("pic-veneer", No, Opt::Other),
    o("stub-group-size", Req, Opt::Other),
    o("no-apply-dynamic-relocs", No, Opt::Other),
    o("fix-cortex-a53-835769", No, Opt::Other),
    o("fix-cortex-a53-843419", Optional, Opt::Other),
    o("bti-report", Optional, Opt::Other),
    o("force-bti", No, Opt::Other),
    o("pac-plt", No, Opt::Other),
    o("gcs", Optional, Opt::Other),
    o("gcs-report", Optional, Opt::Other),
    o("gcs-report-dynamic", Optional, Opt::Other),
];

/// EXACTLY_TWO_DASHES options: ld's `really_longopts`, tried only when the first pass fails,
/// and then with `getopt_long`, so never with a single dash (`-omagic` is `-o magic`).
const REALLY_LONG: &[LongOpt] = &[
    o("architecture", Req, Opt::Other),
    o("mri-script", Req, Opt::MriScript),
    o("omagic", No, Opt::Omagic),
    o("no-omagic", No, Opt::Other),
    o("output", Req, Opt::Output),
    o("undefined-version", No, Opt::Other),
    o("oformat", Req, Opt::Other),
    o("export-dynamic-symbol", Req, Opt::Other),
    o("export-dynamic-symbol-list", Req, Opt::Other),
];

/// ld's short options (lexsup.c plus elf.em's `z:P:`).
fn short_opt(c: u8) -> Option<(HasArg, Opt)> {
    Some(match c {
        b'a' => (Req, Opt::ArchiveKeyword),
        b'b' => (Req, Opt::Format),
        b'c' => (Req, Opt::MriScript),
        b'l' => (Req, Opt::Library),
        b'L' => (Req, Opt::LibraryPath),
        b'm' => (Req, Opt::Emulation),
        b'n' => (No, Opt::Nmagic),
        b'N' => (No, Opt::Omagic),
        b'o' => (Req, Opt::Output),
        b'r' | b'i' => (No, Opt::Relocatable),
        b'R' => (Req, Opt::JustSymbols),
        b'T' => (Req, Opt::Script),
        b'v' => (No, Opt::VersionShort),
        b'V' => (No, Opt::VersionEmul),
        b'Y' => (Req, Opt::SolarisPath),
        b'(' => (No, Opt::StartGroup),
        b')' => (No, Opt::EndGroup),
        b'A' | b'e' | b'f' | b'F' | b'G' | b'h' | b'I' | b'O' | b'u' | b'y' | b'z' | b'P' => {
            (Req, Opt::Other)
        }
        b'd' | b'E' | b'g' | b'M' | b'q' | b's' | b'S' | b't' | b'w' | b'x' | b'X' => {
            (No, Opt::Other)
        }
        _ => return None,
    })
}

enum Match {
    Found(&'static LongOpt),
    Ambiguous,
    None,
}

/// glibc's long-option lookup: an exact name wins, else a unique prefix. Under
/// `getopt_long_only` any two prefix matches are ambiguous; ld's second table has no two
/// options with the same meaning, so the same rule serves both passes.
fn match_long(tables: &[&'static [LongOpt]], name: &[u8]) -> Match {
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

struct OptEvent {
    opt: Opt,
    value: Option<OsString>,
}

/// What one argv element turned out to be, and how many elements it used.
enum Step {
    Opts(Vec<OptEvent>, usize),
    Unknown,
}

fn split_eq(body: &[u8]) -> (&[u8], Option<&[u8]>) {
    match body.iter().position(|&b| b == b'=') {
        Some(p) => (&body[..p], Some(&body[p + 1..])),
        None => (body, None),
    }
}

fn finish_long(opt: &LongOpt, eq: Option<&[u8]>, view: &[OsString], i: usize) -> Step {
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
fn getopt(view: &[OsString], i: usize, long: &[&'static [LongOpt]]) -> Step {
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
fn prescan_emulation(args: &[OsString]) -> Option<OsString> {
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
fn prescan_sysroot(args: &[OsString]) -> Option<PathBuf> {
    args.iter()
        .rev()
        .find_map(|a| a.as_bytes().strip_prefix(b"--sysroot="))
        .map(|v| PathBuf::from(OsStr::from_bytes(v)))
}

/// ld rewrites these before its option loop: `-lNAME` becomes `--library=NAME` (so a library
/// named `ibrary` is not `--library`), and `-G` not followed by a number becomes `--shared`.
fn rewrite_view(args: &[OsString]) -> Vec<OsString> {
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

/// The flags ld copies into each input (and saves with `--push-state`).
#[derive(Debug, Clone, Copy)]
struct InputFlags {
    dynamic: bool,
    whole_archive: bool,
    as_needed: bool,
}

/// Everything in force where an input appears.
struct At {
    flags: InputFlags,
    group: Option<usize>,
    format: Option<OsString>,
}

fn at(flags: InputFlags, group_depth: usize, group_count: usize, format: &Option<OsString>) -> At {
    At {
        flags,
        group: (group_depth > 0).then(|| group_count - 1),
        format: format.clone(),
    }
}

fn lossy(s: &OsStr) -> String {
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
            fatpack_options: Vec::new(),
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

        let mut flags = InputFlags {
            dynamic: true,
            whole_archive: false,
            as_needed: false,
        };
        let mut pushed: Vec<InputFlags> = Vec::new();
        let mut format: Option<OsString> = None;
        let mut group_depth = 0usize;
        let mut group_count = 0usize;
        let mut y_dirs: Option<OsString> = None;
        let mut version_printed = false;
        let mut print_output_format = false;

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
                let kind = InputKind::Path;
                self.push_input(
                    kind,
                    view[i].clone(),
                    i..i + 1,
                    at(flags, group_depth, group_count, &format),
                );
                i += 1;
                continue;
            }
            if let Some(rest) = a.strip_prefix(FATPACK_PREFIX.as_bytes()) {
                let (name, value) = split_eq(rest);
                self.fatpack_options.push(FatpackOption {
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
            let span = i..i + used;
            for ev in events {
                let value = ev.value.unwrap_or_default();
                match ev.opt {
                    Opt::Other | Opt::Emulation | Opt::Sysroot => {}
                    Opt::Output => {
                        self.output = PathBuf::from(value);
                        self.output_given = true;
                    }
                    Opt::Library => {
                        let long_form = expanded[i].as_bytes().starts_with(b"--");
                        let (name, verbatim) = match value.as_bytes().strip_prefix(b":") {
                            Some(rest) => (OsString::from_vec(rest.to_vec()), true),
                            None => (value, false),
                        };
                        let kind = InputKind::Library {
                            verbatim,
                            long_form,
                        };
                        self.push_input(
                            kind,
                            name,
                            span.clone(),
                            at(flags, group_depth, group_count, &format),
                        );
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
                    Opt::Format => format = Some(value),
                    Opt::JustSymbols => {
                        // ld's own test: a directory means -rpath.
                        if fs::metadata(&value).is_ok_and(|m| !m.is_dir()) {
                            let kind = InputKind::JustSymbols;
                            self.push_input(
                                kind,
                                value,
                                span.clone(),
                                at(flags, group_depth, group_count, &format),
                            );
                        } else {
                            self.rpaths.push(value);
                        }
                    }
                    Opt::Rpath => self.rpaths.push(value),
                    Opt::SolarisPath => {
                        let v = value.as_bytes();
                        y_dirs = Some(OsString::from_vec(
                            v.strip_prefix(b"P,").unwrap_or(v).to_vec(),
                        ));
                    }
                    Opt::Shared | Opt::Pie => {
                        if self.kind == OutputKind::Relocatable {
                            self.diagnostics
                                .push("ld refuses -r with -shared or -pie".into());
                        } else if ev.opt == Opt::Shared {
                            self.kind = OutputKind::SharedLibrary;
                        } else {
                            self.kind = OutputKind::PieExecutable;
                        }
                    }
                    Opt::NoPie => self.kind = OutputKind::Executable,
                    Opt::Relocatable => {
                        if matches!(
                            self.kind,
                            OutputKind::SharedLibrary | OutputKind::PieExecutable
                        ) {
                            self.diagnostics
                                .push("ld refuses -r with -shared or -pie".into());
                        }
                        self.kind = OutputKind::Relocatable;
                        flags.dynamic = false;
                    }
                    Opt::Static => {
                        self.static_link = true;
                        flags.dynamic = false;
                    }
                    Opt::NonShared | Opt::Omagic | Opt::Nmagic => flags.dynamic = false,
                    Opt::CallShared => flags.dynamic = true,
                    Opt::ArchiveKeyword => match value.as_bytes() {
                        b"archive" => flags.dynamic = false,
                        b"shared" | b"default" => flags.dynamic = true,
                        _ => self
                            .diagnostics
                            .push(format!("ld refuses `-a {}`", lossy(&value))),
                    },
                    Opt::WholeArchive => flags.whole_archive = true,
                    Opt::NoWholeArchive => flags.whole_archive = false,
                    Opt::AsNeeded => flags.as_needed = true,
                    Opt::NoAsNeeded => flags.as_needed = false,
                    Opt::StartGroup => {
                        if group_depth == 0 {
                            group_count += 1;
                        }
                        group_depth += 1;
                    }
                    Opt::EndGroup => {
                        if group_depth == 0 {
                            self.diagnostics
                                .push("--end-group without --start-group".into());
                        } else {
                            group_depth -= 1;
                        }
                    }
                    Opt::PushState => pushed.push(flags),
                    Opt::PopState => match pushed.pop() {
                        Some(f) => flags = f,
                        None => self
                            .diagnostics
                            .push("--pop-state without --push-state".into()),
                    },
                    Opt::Version => self.set_exit_info(InfoRequest::Version),
                    Opt::Help => self.set_exit_info(InfoRequest::Help),
                    Opt::TargetHelp => self.set_exit_info(InfoRequest::TargetHelp),
                    Opt::PrintSysroot => self.set_exit_info(InfoRequest::PrintSysroot),
                    Opt::VersionShort | Opt::VersionEmul | Opt::Verbose => version_printed = true,
                    Opt::PrintOutputFormat => print_output_format = true,
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
            i += used;
        }
        if group_depth > 0 {
            self.diagnostics
                .push("missing --end-group (ld adds one at the end)".into());
        }
        if let Some(y) = y_dirs {
            for d in y.as_bytes().split(|&b| b == b':').filter(|d| !d.is_empty()) {
                self.library_dirs.push(LibraryDir {
                    raw: OsString::from_vec(d.to_vec()),
                    from_y: true,
                });
            }
        }
        if self.info.is_none() && self.inputs.is_empty() {
            if version_printed {
                self.info = Some(InfoRequest::VersionNoInputs);
            } else if print_output_format {
                self.info = Some(InfoRequest::PrintOutputFormat);
            }
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
            script: None,
            span,
        });
    }

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
        self.fatpack_options
            .iter()
            .rev()
            .find(|f| f.name == name)
            .map(|f| f.value.as_deref().unwrap_or(OsStr::new("")))
    }

    /// Whether `--fatpack-NAME` (with or without a value) was given.
    pub fn fatpack_flag(&self, name: &str) -> bool {
        self.fatpack_options.iter().any(|f| f.name == name)
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
        for f in &self.fatpack_options {
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

#[cfg(test)]
mod tests {
    use super::*;

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
