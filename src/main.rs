//! The `fatpack` command line.
//!
//! `main` is the C entry point, not Rust's: `fatpack ld` runs once per link, and in a small
//! link the process's start is a fair share of the whole. std's own start (what runs before
//! a Rust `fn main`) costs 0.1 ms on the dev machine, most of it reading `/proc/self/maps`
//! to find the main thread's stack guard; [`main`] does the rest of what it does itself.
#![no_main]

use std::ffi::{c_char, c_int};
use std::path::PathBuf;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fatpack",
    version,
    about = "Capability-aware fat-binary packager and linker wrapper for CUDA",
    max_term_width = 80,
    after_help = "Examples:\n  \
                  fatpack run -- cmake --build build\n  \
                  fatpack inspect build/libfoo.so\n  \
                  fatpack prune --for 9.0 build/libfoo.so -o libfoo-sm90.so"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the device code inside any file
    ///
    /// Objects, archives, shared libraries, executables, fatbins, cubins, stores, packed and
    /// split outputs. Exits 1 when something it reports is wrong (a store or pack that is not
    /// the binary's).
    #[command(after_help = "Examples:\n  \
        fatpack inspect build/libfoo.so\n  \
        fatpack inspect --kernels --json app > app.json\n  \
        fatpack inspect --for 9.0 torch-2.11.0-cp312-cp312-linux_x86_64.whl")]
    Inspect {
        /// Files to inspect.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// List kernel names (demangled) under each entry.
        #[arg(long)]
        kernels: bool,
        /// Print JSON (an array with one report per file) instead of a table.
        #[arg(long)]
        json: bool,
        /// Also say what `fatpack prune --for CAPS` would keep of each file and package
        /// (the same selection, nothing written).
        #[arg(long = "for", value_name = "CAPS", value_hint = clap::ValueHint::Other)]
        for_gpus: Option<String>,
    },
    /// Keep only the archs some GPUs run, without relinking
    ///
    /// In a packed output (its store), or in any object, archive, shared library,
    /// executable or fatbin (its fatbins); a folder, a wheel (written as a PEP 825 variant)
    /// or a conda package (depending on `cuda-arch`, CEP 46) has each of its files pruned.
    #[command(
        group(clap::ArgGroup::new("what").required(true).args(["keep", "for_gpus", "dead"])),
        override_usage = "fatpack prune <--for <CAPS>|--keep <ARCHS>|--dead> [OPTIONS]\n       \
                          <INPUT> --output <OUTPUT>",
        after_help = "Examples:\n  \
                      fatpack prune --for 9.0 libfoo.so -o libfoo-sm90.so\n  \
                      fatpack prune --for 8.0,9.0 /opt/app -o /opt/app-ampere-hopper\n  \
                      fatpack prune --for 9.0 torch-2.11.0-cp312-cp312-linux_x86_64.whl -o dist\n  \
                      fatpack prune --keep sm_90,compute_90 libfoo.a -o libfoo-sm90.a"
    )]
    Prune(PruneArgs),
    /// Compress a packed output's store again, without relinking
    ///
    /// At another zstd level: a release build links fast, then repacks at 19.
    #[command(after_help = "Examples:\n  \
        fatpack repack app -o app.small\n  \
        fatpack repack --release app -o app.release")]
    Repack {
        /// The packed binary (never modified).
        input: PathBuf,
        /// The new file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// zstd level, 1-22 (negative: the fast modes).
        #[arg(long, default_value_t = cubin_store::RELEASE_LEVEL, allow_negative_numbers = true)]
        level: i32,
        /// A release store: the entries of one GPU family in solid groups (one zstd frame
        /// each, module order), what they repeat stored once; a first load decodes its
        /// group up to the module it needs.
        #[arg(long)]
        release: bool,
        /// With --release: raw MiB per group (what a first load decodes at most; default 8:
        /// larger is smaller and slower to load).
        #[arg(long, value_name = "MIB", requires = "release", value_parser = clap::value_parser!(u64).range(1..=4095))]
        group_mib: Option<u64>,
        /// With --release: group by `family` (sm_80/86/89 together) or by `arch`.
        #[arg(long, value_name = "BY", requires = "release", value_parser = ["family", "arch"])]
        group_by: Option<String>,
    },
    /// Split a packed output, or a package of them, into host and per-GPU parts
    ///
    /// A binary: written into DIR with one pack per GPU architecture (and one for PTX);
    /// each machine then needs only its GPUs' packs, found next to the binary at run time.
    /// A binary that is not packed (a plain build, or one `fatpack ld` left to the real
    /// linker) is written whole, no packs. A wheel, conda or Debian package: a host
    /// package, one device package per architecture, the project's package requiring all
    /// (what installs when no GPU is named) and, for wheels and conda, variants an
    /// installer picks per GPU. A folder: DIR/host and one folder per architecture.
    #[command(after_help = "Examples:\n  \
        fatpack split app --into dist && ls dist   # app, app.sm_90.fatpack, ...\n  \
        fatpack split x-1.0-py3-none-linux_x86_64.whl --into dist   # pip install 'x-host[sm90]'\n  \
        fatpack split x-1.0-h0_0.conda --into channel/linux-64")]
    Split {
        /// The packed binary, the wheel, conda or Debian package, or the folder (never
        /// modified).
        input: PathBuf,
        /// The folder to write into (made if missing; for a folder's split, it must not
        /// exist).
        #[arg(long, value_name = "DIR")]
        into: PathBuf,
        /// A conda or Debian package: how hard the packages written are compressed (as prune's).
        #[arg(long, value_name = "fast|best", default_value = "fast", value_parser = parse_effort)]
        compression: fatpack::package::Effort,
    },
    /// Write package indexes for a fat wheel and its pruned variants
    ///
    /// OUT/simple/: a PEP 503 index of the fat wheels and their PEP 825 variant wheels, with
    /// each version's `{name}-{version}-variants.json` (pip installs the fat wheel; a
    /// variant-aware installer picks the variant for the GPU). OUT/LABEL/simple/: one index
    /// per local label (`prune --local-label`), which must never share an index with the fat
    /// wheel.
    #[command(after_help = "Example:\n  \
        fatpack index dist -o site\n  \
        pip install --index-url file://$PWD/site/sm90/simple torch")]
    Index {
        /// The folder of wheels (the fat ones and what `fatpack prune` wrote for them).
        wheels: PathBuf,
        /// The new folder to write the indexes into (must not exist).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Join a split binary and its packs back into one packed binary
    ///
    /// The packs are found next to it; the result is the same bytes as before the split.
    #[command(after_help = "Example:\n  \
        fatpack join dist/app -o app")]
    Join {
        /// The split host binary (never modified).
        input: PathBuf,
        /// The new file to write: the joined binary.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Write device code as files cuobjdump and nvdisasm read
    ///
    /// From any file fatpack reads (packed outputs and stores included): one `.cubin` or
    /// `.ptx` per entry, or with --fatbin one `.fatbin` per module.
    #[command(after_help = "Examples:\n  \
        fatpack extract app -o cubins && cuobjdump -sass cubins/*.cubin\n  \
        fatpack extract --arch sm_90 --fatbin libfoo.so -o fatbins")]
    Extract {
        /// The file to read (never modified).
        input: PathBuf,
        /// The folder to write into (made if missing).
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
        /// Only these targets: `sm_90,compute_90`, or CMake style `90`, `90a-real`. --keep
        /// is prune's word for it.
        #[arg(long, value_name = "ARCHS", visible_alias = "keep", value_hint = clap::ValueHint::Other)]
        arch: Option<String>,
        /// One uncompressed fatbin per module instead of one file per entry.
        #[arg(long)]
        fatbin: bool,
    },
    /// Run a build with fatpack as the linker of every compiler driver in it
    ///
    /// `fatpack run -- make -j8`, `fatpack run -- cmake --build build`: gcc, g++, clang and
    /// nvcc find fatpack's `ld`, `ld.bfd`, `ld.gold`, `ld.lld` and `ld.mold` first
    /// (COMPILER_PATH), with nothing in the build changed. Where the home cannot be written
    /// (a build sandbox) and FATPACK_CACHE_DIR is not set, the build's links share a cache
    /// folder of the run's own.
    #[command(after_help = "Examples:\n  \
        fatpack run -- cmake --build build\n  \
        fatpack run -- make -j8\n  \
        fatpack run -- pip wheel .")]
    Run {
        /// The command and its arguments.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true,
            value_name = "COMMAND"
        )]
        command: Vec<std::ffi::OsString>,
    },
    /// Print the man page (roff), or install it and the completions
    ///
    /// The wheel installs them. After `cargo install`, `fatpack man --install` writes
    /// share/man/man1/fatpack.1 and the bash, zsh and fish completions under the folder
    /// above fatpack's own (~/.cargo for ~/.cargo/bin/fatpack), where `man` and
    /// bash-completion look for the programs on PATH.
    #[command(after_help = "Examples:\n  \
        fatpack man | man -l -\n  \
        fatpack man --install")]
    Man {
        /// The page of this command (`fatpack-prune(1)` for `prune`) instead of fatpack's.
        #[arg(value_name = "COMMAND", conflicts_with = "install")]
        command: Option<String>,
        /// Install the man pages and completions under PREFIX/share instead of printing.
        #[arg(long)]
        install: bool,
        /// With --install: where (default: the folder above the one fatpack runs from).
        #[arg(long, value_name = "PREFIX", requires = "install")]
        prefix: Option<PathBuf>,
    },
    /// Print shell completions to standard output
    ///
    /// bash: `fatpack completions bash > ~/.local/share/bash-completion/completions/fatpack`
    /// (the wheel installs bash, zsh and fish completions).
    #[command(after_help = "Example:\n  \
        fatpack completions zsh > ~/.zfunc/_fatpack")]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Link like `ld`, packing all device code into a store
    ///
    /// Takes ordinary ld arguments; also runs when fatpack is invoked as `ld`, `ld.bfd`,
    /// `ld.gold`, `ld.lld` or `ld.mold`. Its own `--fatpack-*` options, listed below, are
    /// taken from among them and never passed on.
    ///
    /// A link that takes in less than 512 KiB of device code (its objects', and the archive
    /// members it pulls) goes to the real linker unchanged (the output is the real linker's,
    /// byte for byte): packing would
    /// add the runtime (about 180 KB) and save less (`bench/pack_threshold.sh`: a packed
    /// program of nvcc 13 `-arch=all` objects is the larger up to about 240 KB of device
    /// code). `--fatpack-mode=packed` or FATPACK_MODE=packed packs it anyway.
    #[command(after_help = "Examples:\n  \
        g++ -B/path/to/wrap -o app main.o kernels.o -lcudart   # wrap/ld -> fatpack\n  \
        fatpack ld -o app crt1.o main.o kernels.o -lcudart_static --fatpack-verbose")]
    Ld {
        /// Arguments for the linker, plus the `--fatpack-*` options above.
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            num_args = 0..,
            value_name = "LD_ARGS"
        )]
        args: Vec<std::ffi::OsString>,
    },
}

/// `fatpack prune`'s arguments.
#[derive(clap::Args)]
struct PruneArgs {
    /// Exact targets to keep: `sm_80,sm_90,compute_90`, or CMake style `80;90` /
    /// `80-real;90-virtual`. --arch is nvprune's and cuobjdump's word for it.
    #[arg(long, value_name = "ARCHS", visible_aliases = ["arch", "gpu-architecture"], value_hint = clap::ValueHint::Other)]
    keep: Option<String>,
    /// Keep, per module, what the runtime would run on GPUs of these compute capabilities:
    /// `8.9,9.0`, `89;90`, `sm_89`, `90a-real` (a/f variants and the PTX a GPU would JIT
    /// included); `compute_90` or `90-virtual` keeps the PTX a 9.0 GPU would JIT, for newer
    /// GPUs; `9.0+PTX` both.
    #[arg(long = "for", id = "for_gpus", value_name = "CAPS", value_hint = clap::ValueHint::Other)]
    for_gpus: Option<String>,
    /// Drop only the entries no GPU would ever load (shadowed in their module by a better
    /// one for every GPU that could run them): every GPU keeps running what it ran.
    #[arg(long)]
    dead: bool,
    /// With --keep: allow a module to be left with no entry at all (by default that is
    /// refused: its kernels could not run anywhere).
    #[arg(long, requires = "keep")]
    allow_empty: bool,
    /// A wheel: record the GPUs in the version's local label (`1.0+cu130.sm90`) instead
    /// of writing a PEP 817/825 variant wheel (`...-linux_x86_64-sm90.whl` with
    /// `variant.json`). For per-variant indexes only (`fatpack index`): pip ranks a
    /// local label above the plain version and `==1.0` matches it, so such a wheel
    /// beside the fat one is what every machine gets.
    #[arg(long)]
    local_label: bool,
    /// A conda or Debian package: how hard its rewritten archives are compressed, in the
    /// input's own codec. `fast` (default): zstd 12, xz 0, gzip 6 on every core, within
    /// about twice a wheel's time; `best`: the packaging tools' defaults (zstd 19, xz 6,
    /// gzip 9), 1-3% smaller and 3-5 times slower. Either gives the same bytes on every
    /// machine.
    #[arg(long, value_name = "fast|best", default_value = "fast", value_parser = parse_effort)]
    compression: fatpack::package::Effort,
    /// Print the report as JSON on standard output (for scripts), instead of lines on
    /// standard error.
    #[arg(long)]
    json: bool,
    /// A folder: replace OLD by NEW (the same length) in every file and symlink target,
    /// byte for byte, as Nix needs when an output is copied to its new store path.
    /// Repeatable.
    #[arg(long, value_name = "OLD=NEW")]
    replace_path: Vec<String>,
    /// The file, folder or package to prune (never modified).
    input: PathBuf,
    /// What to write: for a file, the new file; for a folder, the new folder (it must not
    /// exist); for a wheel, conda or Debian package, whose name carries its version and
    /// label, the folder to write it into (made if missing), or that exact name.
    #[arg(short, long)]
    output: PathBuf,
}

fn parse_effort(text: &str) -> Result<fatpack::package::Effort, String> {
    fatpack::package::Effort::parse(text).ok_or_else(|| format!("{text:?}: fast or best"))
}

fn inspect(
    files: &[PathBuf],
    kernels: bool,
    json: bool,
    for_gpus: Option<&str>,
) -> anyhow::Result<()> {
    let for_gpus = match for_gpus {
        Some(text) => Some((text, fatpack::selection::parse_capabilities(text)?)),
        None => None,
    };
    let request = fatpack::inspect::Request {
        kernels,
        json,
        for_gpus,
    };
    let found = fatpack::inspect::inspect_files(files, &request).context("serialising report")?;
    use std::io::Write;
    match std::io::stdout().lock().write_all(found.text.as_bytes()) {
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.context("writing to stdout")?,
    }
    let failures: Vec<String> = found
        .problems
        .into_iter()
        .map(|p| match p {
            fatpack::inspect::Problem::Failed(e) => message(&anyhow::Error::new(e)),
            fatpack::inspect::Problem::Found(text) => text,
        })
        .collect();
    match failures.len() {
        0 => Ok(()),
        1 => Err(anyhow::anyhow!("{}", failures[0])),
        n => {
            for f in &failures[..n - 1] {
                eprintln!("fatpack: error: {f}");
            }
            Err(anyhow::anyhow!("{}", failures[n - 1]))
        }
    }
}

fn extract(
    input: &std::path::Path,
    output: &std::path::Path,
    arch: Option<&str>,
    fatbin: bool,
) -> anyhow::Result<()> {
    let only = match arch {
        Some(a) => Some(
            fatpack::arch::parse_target_list(a)
                .with_context(|| format!("--arch {a}"))?
                .into_iter()
                .collect(),
        ),
        None => None,
    };
    let r = fatpack::extract::extract(input, output, only.as_ref(), fatbin)?;
    for f in &r.files {
        println!("{}", f.display());
    }
    if r.undecodable > 0 {
        eprintln!(
            "fatpack extract: {}: {} entries of kinds fatpack does not run were not written: \
             they do not decode (obfuscated NVVM IR, which cuobjdump cannot read either)",
            input.display(),
            r.undecodable
        );
    }
    Ok(())
}

fn prune(a: &PruneArgs) -> anyhow::Result<()> {
    let (input, output) = (a.input.as_path(), a.output.as_path());
    use fatpack::package::WheelForm;
    use fatpack::prune::Selection;
    let sel = match (&a.keep, &a.for_gpus) {
        (Some(k), _) => Selection::Keep {
            targets: fatpack::prune::parse_keep(k)?,
            allow_empty: a.allow_empty,
        },
        (None, Some(f)) => Selection::For(fatpack::prune::parse_capabilities(f)?),
        (None, None) if a.dead => Selection::Dead,
        (None, None) => return Err(UsageError("prune needs --keep, --for or --dead".into()).into()),
    };
    let form = match a.local_label {
        true => WheelForm::LocalLabel,
        false => WheelForm::Variant,
    };
    let relocate = fatpack::prune::Relocate::parse(&a.replace_path).map_err(UsageError)?;
    let opts = fatpack::package::Options {
        wheel_form: form,
        relocate,
        compression: a.compression,
    };
    let r = fatpack::package::prune(input, output, &sel, &opts)?;
    if a.json {
        let doc = fatpack::prune::report::json(&r, input, output);
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for line in fatpack::prune::report::lines(&r, input, output) {
            eprintln!("fatpack prune: {line}");
        }
    }
    Ok(())
}

fn index(wheels: &std::path::Path, output: &std::path::Path) -> anyhow::Result<()> {
    let r = fatpack::package::index(wheels, output)?;
    for (folder, files) in &r.indexes {
        eprintln!("fatpack index: {}/", output.join(folder).display());
        for f in files {
            eprintln!("fatpack index:   {f}");
        }
    }
    Ok(())
}

fn split(
    input: &std::path::Path,
    into: &std::path::Path,
    compression: fatpack::package::Effort,
) -> anyhow::Result<()> {
    use fatpack::package::split_package;
    if let Some(r) = split_package(input, into, compression)? {
        let wheel =
            fatpack::package::PackageKind::of(input) == Some(fatpack::package::PackageKind::Wheel);
        print_package_split(&r, wheel);
        return Ok(());
    }
    let r = fatpack::split::split(input, into)?;
    let host = match &r.side_file {
        Some(side) => format!("{} (manifest in {})", r.host.display(), side.display()),
        None => r.host.display().to_string(),
    };
    eprintln!("fatpack split: {host}: {} bytes", r.host_len);
    if r.unpacked {
        eprintln!(
            "fatpack split: {}: not packed (a plain build, or a link fatpack ld left to the real \
             linker, which it does under {} KiB of device code): written whole, every GPU's \
             code inside it, no packs; `fatpack prune --for` cuts it to one GPU's code",
            input.display(),
            fatpack::link::PACK_THRESHOLD >> 10
        );
    }
    for p in &r.packs {
        eprintln!(
            "fatpack split: {}: {} ({} blobs, {} bytes)",
            p.path.display(),
            p.kind.describe(),
            p.blobs,
            p.len
        );
    }
    print_loads(&r.needs);
    Ok(())
}

/// Split's lines saying, per compute capability, which packs (or device wheels) a GPU of
/// it loads from.
fn print_loads(loads: &[(u32, Vec<String>)]) {
    for (cap, from) in loads {
        eprintln!(
            "fatpack split: a GPU of compute capability {} loads from {}",
            fatpack_format::select::capability_string(*cap),
            from.join(", ")
        );
    }
}

/// `fatpack split` of a package: the packages written, and what each GPU installs.
fn print_package_split(r: &fatpack::package::split::PackageSplit, wheel: bool) {
    use fatpack::package::split::Role;
    let what = if wheel { "wheel" } else { "package" };
    for m in &r.split {
        eprintln!("fatpack split: {m}: host part and packs");
    }
    for m in &r.whole {
        eprintln!(
            "fatpack split: {m}: not packed, kept whole in the host {what} (its device code, \
             every GPU's, inside it)"
        );
    }
    for w in &r.packages {
        let role = match (&w.role, wheel) {
            (Role::All, true) => "host and every device wheel: `pip install` of the project".into(),
            (Role::All, false) => {
                "host and every device package: what installs where no GPU is named".into()
            }
            (Role::Variant(l), _) => format!("variant {l}: host and its GPUs' device {what}s"),
            (Role::Host, _) => "host: every file, packed binaries without their device code".into(),
            (Role::Device(l), true) => format!("device code, the host's extra [{l}]"),
            (Role::Device(l), false) => format!("device code ({l})"),
        };
        eprintln!(
            "fatpack split: {}: {} bytes, {role}",
            w.path.display(),
            w.len
        );
    }
    print_loads(&r.loads);
}

fn repack(
    input: &std::path::Path,
    output: &std::path::Path,
    opts: fatpack::repack::RepackOptions,
) -> anyhow::Result<()> {
    let r = fatpack::repack::repack(input, output, opts)?;
    let how = match opts.solid {
        Some(s) => format!(
            "in solid groups of up to {} MiB by {}",
            s.group_bytes >> 20,
            match s.grouping {
                fatpack::store::groups::Grouping::Family => "GPU family",
                fatpack::store::groups::Grouping::Arch => "arch",
            }
        ),
        None => "one frame per blob".into(),
    };
    eprintln!(
        "fatpack repack: {}: {} entries at zstd level {}, {how}; stored device code {} -> {} bytes",
        output.display(),
        r.entries,
        opts.level,
        r.stored_before,
        r.stored_after
    );
    Ok(())
}

fn join(input: &std::path::Path, output: &std::path::Path) -> anyhow::Result<()> {
    let r = fatpack::split::join(input, output)?;
    eprintln!(
        "fatpack join: {}: {} bytes from {} packs{}",
        r.output.display(),
        r.len,
        r.packs,
        r.side_file
            .map(|s| format!(" (store in {})", s.display()))
            .unwrap_or_default()
    );
    Ok(())
}

/// The error and its causes, each cause once: library errors already quote their source in
/// their own message, which `{:#}` would repeat.
fn message(e: &anyhow::Error) -> String {
    // An input that changed under the command explains whatever went wrong after it.
    if let Some(changed) = fatpack::inputs::changed_input() {
        return changed.to_string();
    }
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    // A temp file's name means nothing to the user: say which output it was.
    fatpack::commit::user_names(&msg)
}

/// A command's exit status (std's `ExitCode` can only be returned from a Rust `fn main`).
#[derive(Clone, Copy)]
struct Status(u8);

impl Status {
    const SUCCESS: Status = Status(0);
    const FAILURE: Status = Status(1);
}

fn exit(code: i32) -> Status {
    Status(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
}

fn ld(argv0: Option<&std::ffi::OsStr>, args: Vec<std::ffi::OsString>) -> Status {
    match fatpack::link::run(argv0, args) {
        Ok(code) => exit(code),
        Err(e) => {
            eprintln!("fatpack ld: error: {}", message(&anyhow::Error::new(e)));
            Status::FAILURE
        }
    }
}

/// The command line as clap knows it, with `fatpack ld`'s own options from their one table
/// (`fatpack help ld` and the man page print it).
fn cli() -> clap::Command {
    use fatpack::environment::{help, Reader};
    let top = Cli::command();
    let top_help = top
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default();
    let top_help = format!(
        "{top_help}\n\nExit status: {EXIT_STATUS}\n\nPrograms fatpack packed read, at run \
         time:\n{}",
        help(Reader::Program)
    );
    top.after_help(top_help).mut_subcommand("ld", |c| {
        let examples = c
            .get_after_help()
            .map(|h| h.to_string())
            .unwrap_or_default();
        c.after_long_help(format!(
            "{}\n{examples}",
            fatpack::link::options::options_help()
        ))
    })
}

/// What every command's exit status means (the top help and every man page say it).
const EXIT_STATUS: &str = "0 on success, 1 on an error (the message names the file and what \
    is wrong; nothing is written), 2 on a usage error. `fatpack ld` and `fatpack run` exit \
    with the real linker's or the command's own status.";

/// `text` as roff prose: backslashes and dashes escaped, no line read as a request.
fn roff_text(text: &str) -> String {
    text.replace('\\', "\\e")
        .replace('-', "\\-")
        .lines()
        .map(|l| match l.starts_with(['.', '\'']) {
            true => format!("\\&{l}\n"),
            false => format!("{l}\n"),
        })
        .collect()
}

/// The sections clap's page does not have: EXIT STATUS on every page, ENVIRONMENT (from
/// the one table of variables) on the pages of the commands that read them, inserted before
/// VERSION; the examples (after-help text that starts with them) under EXAMPLES.
fn man_sections(page: String, command: Option<&str>) -> String {
    use fatpack::environment::{Reader, VARIABLES};
    let mut extra = format!(".SH \"EXIT STATUS\"\n{}", roff_text(EXIT_STATUS));
    let readers: &[Reader] = match command {
        None => &[Reader::Link, Reader::Program],
        Some("ld" | "run") => &[Reader::Link],
        Some(_) => &[],
    };
    let vars: Vec<_> = VARIABLES
        .iter()
        .filter(|v| readers.contains(&v.reader))
        .collect();
    if !vars.is_empty() {
        extra += ".SH ENVIRONMENT\n";
        for v in vars {
            let reads = match v.reader {
                Reader::Program => " (read by programs fatpack packed, at run time)",
                _ => "",
            };
            extra += &format!(
                ".TP\n\\fB{}\\fR=\\fI{}\\fR\n{}",
                roff_text(v.name).trim_end(),
                roff_text(&v.value.to_string()).trim_end(),
                roff_text(&format!("{}{reads}", v.help))
            );
        }
    }
    // `ld`'s text after its options is its own options' table, then its examples.
    let page = page
        .replacen(".SH EXTRA\nExample", ".SH EXAMPLES\nExample", 1)
        .replacen(".SH EXTRA\n", ".SH \"FATPACK OPTIONS AND EXAMPLES\"\n", 1);
    match page.find(".SH VERSION") {
        Some(at) => format!("{}{extra}{}", &page[..at], &page[at..]),
        None => page + &extra,
    }
}

/// The man page (roff), from the CLI definition: fatpack(1), or with `command` that
/// command's own page, fatpack-COMMAND(1), which fatpack(1) names.
fn man_page(command: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let cmd = match command {
        // Its examples alone after the options: exit status and variables have sections.
        None => {
            let c = cli();
            let examples = c
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let examples = examples
                .split("\n\n")
                .next()
                .unwrap_or_default()
                .to_string();
            c.after_help(examples)
        }
        Some(name) => {
            let c = cli();
            let sub = c
                .find_subcommand(name)
                .filter(|_| name != "help")
                .ok_or_else(|| UsageError(format!("`{name}` is not a fatpack command")))?;
            // clap names are 'static; a page is rendered once per process.
            let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
            sub.clone()
                .name(leak(format!("fatpack-{name}")))
                .bin_name(leak(format!("fatpack {name}")))
        }
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut page)?;
    let page = String::from_utf8(page).context("clap's man page is not UTF-8")?;
    Ok(man_sections(page, command).into_bytes())
}

/// The commands that have a page of their own.
fn commands() -> Vec<String> {
    cli()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "help")
        .collect()
}

/// The completions for `shell`, from the CLI definition, with `fatpack ld`'s own options
/// from their one table (as options of `ld` here only: the parser takes them from among the
/// linker's arguments, wherever they are).
fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = cli().mut_subcommand("ld", |mut c| {
        for o in fatpack::link::options::OPTIONS {
            let long: &'static str = Box::leak(format!("fatpack-{}", o.name).into_boxed_str());
            let mut arg = clap::Arg::new(long).long(long).help(o.help);
            // A shell completes an option of words with its words.
            arg = match o.takes {
                fatpack::link::options::Takes::Switch => arg.action(clap::ArgAction::SetTrue),
                fatpack::link::options::Takes::Number { .. } => {
                    arg.value_name("N").num_args(1).require_equals(true)
                }
                fatpack::link::options::Takes::OneOf(words) => arg
                    .value_parser(clap::builder::PossibleValuesParser::new(
                        words.iter().copied(),
                    ))
                    .num_args(1)
                    .require_equals(true),
            };
            c = c.arg(arg);
        }
        c
    });
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut cmd, "fatpack", &mut text);
    text
}

/// `fatpack man --install [--prefix PREFIX]`: the man page and the completions under PREFIX/share,
/// written as every fatpack output is (staged, committed together or not at all).
fn install_docs(prefix: Option<&std::path::Path>) -> anyhow::Result<()> {
    use std::io::Write;
    let prefix = if let Some(p) = prefix {
        p.to_path_buf()
    } else {
        let exe = std::env::current_exe().context("finding fatpack's own path")?;
        exe.parent()
            .and_then(|bin| bin.parent())
            .map(std::path::Path::to_path_buf)
            .with_context(|| format!("{}: no folder above it to install into", exe.display()))?
    };
    let share = prefix.join("share");
    let mut files = vec![("man/man1/fatpack.1".to_owned(), man_page(None)?)];
    for name in commands() {
        files.push((format!("man/man1/fatpack-{name}.1"), man_page(Some(&name))?));
    }
    for (shell, path) in [
        (
            clap_complete::Shell::Bash,
            "bash-completion/completions/fatpack",
        ),
        (clap_complete::Shell::Zsh, "zsh/site-functions/_fatpack"),
        (
            clap_complete::Shell::Fish,
            "fish/vendor_completions.d/fatpack.fish",
        ),
    ] {
        files.push((path.to_owned(), completions(shell)));
    }
    let mut outs = fatpack::commit::Outputs::new(&[]);
    let mut staged = Vec::new();
    for (rel, bytes) in &files {
        let dest = share.join(rel);
        outs.folder(fatpack::commit::folder_of(&dest))?;
        let mut s = outs.file(&dest)?;
        s.named()
            .write_all(bytes)
            .with_context(|| format!("writing {}", dest.display()))?;
        staged.push(s);
    }
    outs.commit(staged)?;
    for (rel, _) in &files {
        println!("{}", share.join(rel).display());
    }
    Ok(())
}

/// `fatpack prune -arch sm_90` and `-arch=sm_90`, as nvprune and nvcc write them: one dash
/// before a long name, which clap reads as `-a -r -c -h`. They become `--arch`.
fn nvprune_spellings(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.first().is_none_or(|a| a != "prune") {
        return args;
    }
    args.into_iter()
        .map(|a| match a.to_str() {
            Some("-arch") => "--arch".into(),
            Some(s) if s.starts_with("-arch=") => format!("-{s}").into(),
            _ => a,
        })
        .collect()
}

/// The process's entry, as the C runtime calls it. What std's start would have done first
/// that matters here: the standard descriptors made sure to be open (a file opened later
/// must never become stdout), SIGPIPE ignored (a write to a closed pipe is an error, not the
/// end; children get it back by default, as std's `Command` resets it), a panic's exit status
/// (101); and at the end, the sweeps of old temps finished and stdout flushed
/// (`std::process::exit` runs std's clean-up). Args and
/// the environment come from glibc's start, as before.
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    open_standard_descriptors();
    // SAFETY: setting a signal's disposition to SIG_IGN has no other effect.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let status = std::panic::catch_unwind(fatpack_main).unwrap_or(Status(101));
    // A link that forked: its parent ends now, with this status (`fatpack::link::fork`).
    fatpack::link::fork::report(status.0);
    // Temp folders swept beside the work: done before the process ends.
    fatpack::commit::signals::finish_sweeps();
    std::process::exit(i32::from(status.0))
}

/// Opens /dev/null on any of descriptors 0, 1 and 2 that is closed, as std's start does.
fn open_standard_descriptors() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of three pollfd; a timeout of 0 only asks.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } < 0 {
        return;
    }
    for p in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
        // SAFETY: a NUL-terminated path; the new descriptor is the lowest free one, this one.
        let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if fd != p.fd {
            // Not the descriptor that was closed: better none than a wrong one.
            std::process::abort();
        }
    }
}

fn fatpack_main() -> Status {
    fatpack::link::mark_process_start();
    // Before anything opens a file: the jobserver's descriptors must still be make's.
    fatpack::parallel::init_jobserver();
    let mut argv = std::env::args_os();
    let argv0 = argv.next();
    // Invoked through an `ld` link (gcc -B<dir>, -fuse-ld): be the linker.
    let name = fatpack::ld::real::linker_name(argv0.as_deref());
    let base = argv0
        .as_deref()
        .map(std::path::Path::new)
        .and_then(|p| p.file_name());
    if base == Some(name.as_os_str()) {
        return ld(argv0.as_deref(), argv.collect());
    }
    // `fatpack ld ARGS`: every argument is ld's, `-h SONAME` and `--help` included, so the
    // subcommand is taken before clap sees (and would answer) any of them.
    let rest: Vec<std::ffi::OsString> = argv.collect();
    if rest.first().is_some_and(|a| a == "ld") {
        return ld(None, rest[1..].to_vec());
    }
    // `--version` also names the runtime packed links would use (embedded or FATPACK_RUNTIME).
    let version: &'static str = Box::leak(
        format!(
            "{}\nruntime: {}",
            env!("CARGO_PKG_VERSION"),
            fatpack::link::runtime::describe()
        )
        .into_boxed_str(),
    );
    let matches = cli()
        .version(version)
        .get_matches_from(argv0.iter().cloned().chain(nvprune_spellings(rest)));
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Inspect {
            files,
            kernels,
            json,
            for_gpus,
        } => inspect(&files, kernels, json, for_gpus.as_deref()),
        Command::Ld { args } => return ld(None, args),
        Command::Man {
            install: false,
            command,
            ..
        } => man_page(command.as_deref()).and_then(|out| {
            use std::io::Write;
            std::io::stdout()
                .write_all(&out)
                .context("writing the man page")
        }),
        Command::Man {
            install: true,
            prefix,
            ..
        } => install_docs(prefix.as_deref()),
        Command::Completions { shell } => {
            use std::io::Write;
            return match std::io::stdout().write_all(&completions(shell)) {
                Ok(()) => Status::SUCCESS,
                Err(e) => {
                    eprintln!("fatpack: error: writing the completions: {e}");
                    Status::FAILURE
                }
            };
        }
        Command::Run { command } => return run_command(&command),
        Command::Prune(args) => prune(&args),
        Command::Extract {
            input,
            output,
            arch,
            fatbin,
        } => extract(&input, &output, arch.as_deref(), fatbin),
        Command::Split {
            input,
            into,
            compression,
        } => split(&input, &into, compression),
        Command::Index { wheels, output } => index(&wheels, &output),
        Command::Repack {
            input,
            output,
            level,
            release,
            group_mib,
            group_by,
        } => repack_args(
            &input,
            &output,
            level,
            release,
            group_mib,
            group_by.as_deref(),
        ),
        Command::Join { input, output } => join(&input, &output),
    };
    finish(result)
}

/// The exit of a command that ran: 0, or the error said and 2 for a usage error (a value the
/// command line gave that means nothing, as clap's own are), 1 for any other.
fn finish(result: anyhow::Result<()>) -> Status {
    match result {
        Ok(()) => Status::SUCCESS,
        Err(e) => {
            fatpack::commit::signals::yield_to_signal();
            eprintln!("fatpack: error: {}", message(&e));
            use fatpack::selection::SelectionError;
            let selection = e.downcast_ref::<SelectionError>().or_else(|| {
                match e.downcast_ref::<fatpack::prune::PruneError>() {
                    Some(fatpack::prune::PruneError::Selection(s)) => Some(s),
                    _ => None,
                }
            });
            // A capability or target list that does not parse is a usage error.
            let usage = matches!(
                selection,
                Some(
                    SelectionError::Capability { .. }
                        | SelectionError::NoSuchCapability { .. }
                        | SelectionError::Keep(_)
                )
            ) || e.downcast_ref::<UsageError>().is_some();
            exit(if usage { 2 } else { 1 })
        }
    }
}

/// `fatpack run COMMAND`: the command's own exit status, or as a shell says a command it
/// cannot start: 127 not found, 126 found but not runnable.
fn run_command(command: &[std::ffi::OsString]) -> Status {
    match fatpack::run::run(command) {
        Ok(code) => exit(code),
        Err(e) => {
            let code = match &e {
                fatpack::run::RunError::Start { source, .. } => match source.raw_os_error() {
                    Some(libc::ENOENT) => 127,
                    Some(libc::EACCES | libc::ENOEXEC | libc::EISDIR) => 126,
                    _ => 1,
                },
                _ => 1,
            };
            eprintln!("fatpack: error: {}", message(&anyhow::Error::new(e)));
            exit(code)
        }
    }
}

/// `fatpack repack`'s options into what the repack takes.
fn repack_args(
    input: &std::path::Path,
    output: &std::path::Path,
    level: i32,
    release: bool,
    group_mib: Option<u64>,
    group_by: Option<&str>,
) -> anyhow::Result<()> {
    use fatpack::store::groups::{Grouping, Solid};
    let solid = release.then(|| Solid {
        grouping: match group_by {
            Some("arch") => Grouping::Arch,
            Some(_) => Grouping::Family,
            None => Solid::RELEASE.grouping,
        },
        group_bytes: group_mib.map_or(Solid::RELEASE.group_bytes, |m| m << 20),
    });
    repack(
        input,
        output,
        fatpack::repack::RepackOptions { level, solid },
    )
}

/// A command line whose values do not fit together (checked after clap's own parsing).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);
