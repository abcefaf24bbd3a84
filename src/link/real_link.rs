//! The real linker's run: the rewritten line (the runtime first, the `--wrap`s, the output
//! into a temp file), what it prints and writes about files passed on naming the user's
//! files, and the plain line for links fatpack leaves alone.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use super::abi;
use super::account::current_rss_mib;
use super::session::{Linked, Linking, Rewritten, RuntimeFiles, Session, Work};
use super::LinkError;
use super::{cleanup, names};
use crate::error::io_at;
use crate::ld::{self, real as real_ld, LinkLine, OutputKind};

/// What a packed link adds before and after the user's arguments: the runtime first,
/// pulled in by -u, so that the libraries the driver adds later (libc, libgcc_s, cudart)
/// resolve what it needs; then the `--wrap`s, with `--exclude-libs` hiding the runtime inside
/// a shared library (an executable needs no hiding, and hiding there breaks links against
/// DSOs that reference cudart); and the output last (ld takes the last -o).
pub(super) fn link_extras(
    glue: OsString,
    runtime: OsString,
    shared: bool,
    output: OsString,
) -> (Vec<OsString>, Vec<OsString>) {
    let prepend = vec![
        "-u".into(),
        "__wrap___cudaRegisterFatBinary".into(),
        glue,
        runtime,
    ];
    let mut append: Vec<OsString> = abi::link_args(shared)
        .into_iter()
        .map(OsString::from)
        .collect();
    append.extend(["-o".into(), output]);
    (prepend, append)
}

/// The line as given, for the real linker: nothing to pack.
pub(super) fn plain_link(real: &Path, line: &LinkLine) -> Result<i32, LinkError> {
    Ok(real_ld::exit_code(real_ld::run(real, &plain_argv(line)?)?))
}

/// The real linker's arguments for the line as given (nothing replaced, nothing added).
pub(super) fn plain_argv(line: &LinkLine) -> Result<Vec<OsString>, LinkError> {
    Ok(line.render(&BTreeMap::new(), &[], &[])?)
}

/// Hands the C allocator's free memory back to the system before the real linker runs
/// beside this process: the rewritten archive members (hundreds of MB for static cuBLAS)
/// are freed by then, but glibc keeps freed heap memory mapped, and it would stay resident
/// for as long as ld runs.
pub(super) fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions; it only releases memory malloc holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Session {
    /// The real link of the rewritten line into a temp output beside the real one (so a
    /// failed link leaves nothing behind; ld creates the file itself, so it gets the modes a
    /// plain link would give it). Returns the real linker's exit code.
    pub(super) fn link(
        &mut self,
        r: &Rewritten,
        files: &RuntimeFiles,
    ) -> Result<(i32, Linked), LinkError> {
        let linking = self.start_link(r, files)?;
        self.finish_link(linking)
    }

    /// Starts the real link of the rewritten line into a temp output ([`Session::link`]).
    pub(super) fn start_link(
        &mut self,
        r: &Rewritten,
        files: &RuntimeFiles,
    ) -> Result<Linking, LinkError> {
        let special = crate::commit::special(&self.line.output);
        if special && self.opts.side_file {
            return Err(LinkError::Option(format!(
                "--fatpack-side-file needs a regular output file: {} is not one",
                self.line.output.display()
            )));
        }
        // Beside the output, so that committing is a rename; a device or FIFO (`-o
        // /dev/null`) is written into instead, and nothing is created next to it. An error
        // about the temp output (disk full while the store is mapped) names the user's.
        let staged = self.outs.made_by_linker(&self.line.output)?;
        let tmp_out = staged.path().to_path_buf();
        let user_names = names::UserNames::new(
            &r.copies,
            &tmp_out,
            &self.line.output,
            r.work.path(),
            &files.runtime,
        );
        let (prepend, mut append) = link_extras(
            files.glue.clone().into_os_string(),
            files.runtime.clone().into_os_string(),
            self.line.kind == OutputKind::SharedLibrary,
            tmp_out.clone().into_os_string(),
        );
        append.splice(0..0, r.extra.iter().cloned());
        let argv = self.line.render(&r.replace, &prepend, &append)?;
        if let Work::Kept(dir) = &r.work {
            // The real link's command line, writing into the temps folder: `ld @ld.rsp`.
            let kept_out = dir.join("out");
            let rerun: Vec<OsString> = argv
                .iter()
                .map(|a| {
                    if a.as_os_str() == tmp_out.as_os_str() {
                        kept_out.clone().into_os_string()
                    } else {
                        a.clone()
                    }
                })
                .collect();
            let rsp = dir.join("ld.rsp");
            ld::write_response_file(&rsp, &rerun).map_err(io_at(&rsp))?;
            eprintln!(
                "fatpack: {}: temps kept in {} (`{} @{}` reruns the real link)",
                self.line.output.display(),
                dir.display(),
                self.real.display(),
                rsp.display()
            );
        }
        give_back_free_memory();
        if self.opts.verbose {
            self.account.rss_during_link = current_rss_mib();
        }
        let running = cleanup::start_linker(|| real_ld::spawn_captured(&self.real, &argv))?;
        // As ld unlinks it when it opens its output; a side-file pair is replaced together.
        if !special && !self.opts.side_file {
            self.old_output.start(&self.line.output);
        }
        Ok(Linking {
            running,
            user_names,
            linked: Linked {
                staged,
                out: tmp_out,
                opened: None,
            },
        })
    }

    /// Waits for a link [`Session::start_link`] started; its exit code.
    pub(super) fn finish_link(&mut self, linking: Linking) -> Result<(i32, Linked), LinkError> {
        let Linking {
            running,
            user_names,
            linked,
        } = linking;
        // What ld says and writes about files is passed on naming the user's files.
        let out = cleanup::wait_linker(running)?;
        let status = out.status;
        use std::io::Write;
        let _ = std::io::stdout().write_all(&user_names.map(&out.stdout));
        let _ = std::io::stderr().write_all(&user_names.messages(&out.stderr));
        let (depfiles, maps) = names::reports(&self.line.expanded_args());
        for (files, fix) in [
            (
                &depfiles,
                &(|t: &[u8]| user_names.depfile(t)) as &dyn Fn(&[u8]) -> Vec<u8>,
            ),
            (&maps, &|t: &[u8]| user_names.map(t)),
        ] {
            for f in files.iter().filter(|f| f.is_file()) {
                let text = std::fs::read(f).map_err(io_at(f))?;
                std::fs::write(f, fix(&text)).map_err(io_at(f))?;
            }
        }
        let code = if status.success() {
            0
        } else {
            real_ld::exit_code(status)
        };
        Ok((code, linked))
    }
}
