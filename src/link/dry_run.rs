//! `--fatpack-dry-run`: what `fatpack ld` would do with this line, without writing anything:
//! the inputs it would rewrite, the real linker's command line, and what would follow it.
//! A mode of the link's own list of steps ([`super::steps::run`]): the same resolve and
//! scan run (only inputs are read), and the report stands in for the steps that write.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::options::{Mode, PackOptions};
use super::plan::Planned;
use super::script_copies::{replacements, Copied};
use super::session::Session;
use super::LinkError;
use crate::ld::{LinkLine, OutputKind};

/// `arg` as a shell would need it.
fn quoted(arg: &std::ffi::OsStr) -> String {
    let s = String::from_utf8_lossy(arg.as_bytes());
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=./,:+@%".contains(&b))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn command(real: &Path, argv: &[OsString]) -> String {
    std::iter::once(quoted(real.as_os_str()))
        .chain(argv.iter().map(|a| quoted(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--fatpack-dry-run` of a link fatpack does not pack (a partial link, tail mode): the real
/// linker's line.
pub(super) fn report_unpacked(
    real: &Path,
    line: &LinkLine,
    opts: &PackOptions,
) -> Result<i32, LinkError> {
    let output = line.output.display().to_string();
    let (what, append): (&str, Vec<OsString>) = if opts.mode == Mode::Tail {
        (
            "tail mode: the fatbin sections go after .bss by fatpack's script",
            vec!["-T".into(), "<fatpack>/fatbin-tail.ld".into()],
        )
    } else {
        ("partial link (-r): device code kept as it is", Vec::new())
    };
    let argv = line.render(&Default::default(), &[], &append)?;
    print(format!(
        "{output}: {what}\nwould run: {}\n",
        command(real, &argv)
    ));
    Ok(0)
}

/// `--fatpack-dry-run` of a packed link, once the link's own first steps (resolve, scan) have
/// run over `s`: the route, the inputs it would rewrite, the real linker's line and what
/// would follow it.
pub(super) fn report(s: &Session, planned: &[Planned]) -> Result<i32, LinkError> {
    let output = s.line.output.display().to_string();
    let mut out = String::new();
    if let Some(why) = super::worth_packing::left_unpacked(s, planned) {
        let argv = s.line.render(&Default::default(), &[], &[])?;
        out += &format!("{output}: {why}\nwould run: {}\n", command(&s.real, &argv));
        print(out);
        return Ok(0);
    }
    let direct = s.route_for(planned).map(|_| ());
    for p in planned {
        let containers: usize = p.sections.iter().map(|x| x.spans.len()).sum();
        out += &format!(
            "would {} {} ({containers} fatbin container{})\n",
            if direct.is_ok() {
                "link as given"
            } else {
                "rewrite"
            },
            p.path.display(),
            if containers == 1 { "" } else { "s" }
        );
    }
    // The names the copy route would give its copies (and the scripts naming them).
    let mut replace = Default::default();
    if direct.is_err() {
        let in_temps = |seq: usize, path: &Path| {
            let mut p = PathBuf::from("<fatpack>");
            p.push(super::plan::numbered(seq, path));
            p
        };
        let copied = planned.iter().enumerate().map(|(seq, p)| Copied {
            id: p.id,
            within: &p.within,
            copy: in_temps(seq, &p.path),
            original: &p.path,
        });
        let mut seq = planned.len();
        replace = replacements(&s.line, copied, |script, _| {
            seq += 1;
            Ok(in_temps(seq - 1, script))
        })?
        .replace;
    }
    let (prepend, mut append) = super::real_link::link_extras(
        "<fatpack>/fatpack-glue.o".into(),
        "<fatpack>/libfatpack_rt.a".into(),
        s.line.kind == OutputKind::SharedLibrary,
        format!("<temp beside {output}>").into(),
    );
    match &direct {
        Ok(()) => {
            out += "route: direct (the inputs linked as given, the device sections last)\n";
            append.splice(0..0, ["-T".into(), "<fatpack>/fatbin-tail.ld".into()]);
        }
        Err(why) => out += &format!("route: copy ({why})\n"),
    }
    let argv = s.line.render(&replace, &prepend, &append)?;
    out += &format!("would run: {}\n", command(&s.real, &argv));
    if direct.is_ok() {
        out += "then: each container in the output replaced by its module's stub and the \
                output cut short where they end\n";
    }
    out += &format!(
        "then: the store of the modules the link uses into {} ({}), its digest and the \
         build ID patched, the output renamed to {output}\n",
        if s.opts.side_file {
            format!("{output}.fatpack")
        } else {
            format!("{output}'s .fatpack section")
        },
        format_args!("zstd level {}", s.opts.level)
    );
    print(out);
    Ok(0)
}

/// The report, after the line that says nothing is written.
fn print(body: String) {
    let text = format!("fatpack ld --fatpack-dry-run: nothing is written\n{body}");
    let _ = std::io::stdout().write_all(text.as_bytes());
}
