//! The runtime archive a packed link adds: the one built into this fatpack (build.rs makes
//! it for the target fatpack itself is built for), or the one `FATPACK_RUNTIME` names.
//!
//! The embedded archive is written into the link's private temp folder (made 0700 by
//! tempfile, removed with it), after its bytes are checked against the digest build.rs
//! recorded; either archive's ELF machine must be the link's, so that a cross link gets a
//! one-line error instead of hundreds of `Relocations in generic ELF` from the real linker.

use std::path::{Path, PathBuf};

use object::read::archive::ArchiveFile;

use super::abi::RUNTIME_ARCHIVE;
use crate::environment::RUNTIME as ENV_RUNTIME;

/// One runtime archive build.rs made (LTO'd, debug info stripped).
#[derive(Debug)]
pub struct Embedded {
    /// The Rust target it was built for.
    pub target: &'static str,
    /// blake3 of `bytes` as build.rs wrote them.
    pub blake3: &'static str,
    pub bytes: &'static [u8],
}

/// Every runtime this fatpack carries: the one for the target fatpack was built for first,
/// then those `FATPACK_RT_EXTRA_TARGETS` asked for at build time.
pub static EMBEDDED: &[Embedded] = include!(concat!(env!("OUT_DIR"), "/embedded_runtimes.rs"));

/// The runtime for the target fatpack itself was built for.
pub fn host() -> &'static Embedded {
    &EMBEDDED[0]
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{ENV_RUNTIME}={}: no such file", .0.display())]
    Missing(PathBuf),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the {target} runtime archive inside this fatpack is damaged (blake3 {found}, built \
         as {want}): reinstall fatpack"
    )]
    Damaged {
        target: &'static str,
        found: String,
        want: &'static str,
    },
    #[error("{what}: not an ar archive of ELF objects, so not a fatpack runtime archive")]
    NotArchive { what: String },
    #[error(
        "{what} is for {runtime}, but this link is for {link}: set {ENV_RUNTIME} to a runtime \
         archive built for {link}, or build fatpack with FATPACK_RT_EXTRA_TARGETS=<{link} Rust \
         target> so that it carries one, or use --fatpack-mode=tail, which needs none"
    )]
    Machine {
        what: String,
        runtime: String,
        link: &'static str,
    },
}

/// Where the archive of a link comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Embedded,
    /// `FATPACK_RUNTIME`.
    Path(PathBuf),
}

impl Source {
    /// `FATPACK_RUNTIME` if set (it must name a file), else the embedded archive.
    pub fn from_env() -> Result<Source, RuntimeError> {
        match std::env::var_os(ENV_RUNTIME) {
            Some(p) if !p.is_empty() => {
                let p = PathBuf::from(p);
                if p.is_file() {
                    Ok(Source::Path(p))
                } else {
                    Err(RuntimeError::Missing(p))
                }
            }
            _ => Ok(Source::Embedded),
        }
    }

    /// Which archive this is, for messages.
    pub fn what(&self) -> String {
        match self {
            Source::Embedded => {
                let targets: Vec<&str> = EMBEDDED.iter().map(|e| e.target).collect();
                format!("the runtime built into fatpack ({})", targets.join(", "))
            }
            Source::Path(p) => format!("{ENV_RUNTIME}={}", p.display()),
        }
    }

    /// The archive as a file the real linker can read: `FATPACK_RUNTIME` as it is, or the
    /// embedded one for the link's machine (`link_machine`, an ELF `e_machine`) written,
    /// after its digest check, into `dir` under the name `--exclude-libs` matches.
    pub fn materialise(&self, dir: &Path, link_machine: u16) -> Result<PathBuf, RuntimeError> {
        let link = machine_name(link_machine);
        match self {
            Source::Path(p) => {
                let bytes = std::fs::read(p).map_err(|source| RuntimeError::Io {
                    path: p.clone(),
                    source,
                })?;
                let machine = archive_machine(&bytes)
                    .ok_or_else(|| RuntimeError::NotArchive { what: self.what() })?;
                if machine != link_machine {
                    return Err(RuntimeError::Machine {
                        what: self.what(),
                        runtime: machine_name(machine).to_owned(),
                        link,
                    });
                }
                Ok(p.clone())
            }
            Source::Embedded => {
                let Some(e) = EMBEDDED
                    .iter()
                    .find(|e| archive_machine(e.bytes) == Some(link_machine))
                else {
                    let have: Vec<&str> = EMBEDDED
                        .iter()
                        .map(|e| archive_machine(e.bytes).map_or("?", machine_name))
                        .collect();
                    return Err(RuntimeError::Machine {
                        what: self.what(),
                        runtime: have.join(", "),
                        link,
                    });
                };
                let found = blake3::hash(e.bytes).to_hex();
                if found.as_str() != e.blake3 {
                    return Err(RuntimeError::Damaged {
                        target: e.target,
                        found: found.to_string(),
                        want: e.blake3,
                    });
                }
                let path = dir.join(RUNTIME_ARCHIVE);
                std::fs::write(&path, e.bytes).map_err(|source| RuntimeError::Io {
                    path: path.clone(),
                    source,
                })?;
                Ok(path)
            }
        }
    }
}

/// The ELF `e_machine` of the first ELF member of an `ar` archive.
pub fn archive_machine(data: &[u8]) -> Option<u16> {
    let ar = ArchiveFile::parse(data).ok()?;
    let m = ar.members().flatten().find(|m| !m.is_thin())?;
    crate::inputs::elf_machine(m.data(data).ok()?)
}

/// A person's name for an ELF machine.
pub fn machine_name(m: u16) -> &'static str {
    match m {
        object::elf::EM_X86_64 => "x86-64",
        object::elf::EM_AARCH64 => "aarch64",
        object::elf::EM_PPC64 => "ppc64",
        object::elf::EM_386 => "i386",
        object::elf::EM_ARM => "arm",
        object::elf::EM_RISCV => "riscv",
        _ => "another machine",
    }
}

/// What `fatpack --version` says about the runtime a packed link would use now.
pub fn describe() -> String {
    let embedded: Vec<String> = EMBEDDED
        .iter()
        .map(|e| {
            format!(
                "{} ({} bytes, blake3 {})",
                e.target,
                e.bytes.len(),
                &e.blake3[..16]
            )
        })
        .collect();
    let embedded = format!("embedded: {}", embedded.join(", "));
    match Source::from_env() {
        Ok(Source::Embedded) => embedded,
        Ok(Source::Path(p)) => format!("{ENV_RUNTIME}={} (overrides {embedded})", p.display()),
        Err(e) => format!("{e} (a packed link fails while it is set; {embedded})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_archives_are_intact_and_for_their_targets() {
        assert!(!EMBEDDED.is_empty());
        for e in EMBEDDED {
            assert_eq!(
                blake3::hash(e.bytes).to_hex().as_str(),
                e.blake3,
                "{}",
                e.target
            );
            let m = archive_machine(e.bytes).expect("an ar archive of ELF objects");
            let arch = e.target.split('-').next().unwrap();
            let want = match arch {
                "x86_64" => object::elf::EM_X86_64,
                "aarch64" => object::elf::EM_AARCH64,
                _ => m,
            };
            assert_eq!(m, want, "{}", e.target);
        }
        assert_eq!(host().target, EMBEDDED[0].target);
    }

    #[test]
    fn a_foreign_machine_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let m = archive_machine(host().bytes).unwrap();
        let e = Source::Embedded
            .materialise(dir.path(), object::elf::EM_RISCV)
            .unwrap_err();
        assert!(matches!(e, RuntimeError::Machine { .. }), "{e}");
        assert!(e.to_string().contains("FATPACK_RUNTIME"), "{e}");
        assert!(e.to_string().contains("for riscv"), "{e}");
        assert!(!dir.path().join(RUNTIME_ARCHIVE).exists());
        let p = Source::Embedded.materialise(dir.path(), m).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), host().bytes);
        // A named archive of the wrong machine, and a file that is no archive.
        let named = dir.path().join("named.a");
        std::fs::write(&named, host().bytes).unwrap();
        let e = Source::Path(named.clone())
            .materialise(dir.path(), object::elf::EM_RISCV)
            .unwrap_err();
        assert!(e.to_string().contains("FATPACK_RUNTIME="), "{e}");
        assert_eq!(
            Source::Path(named.clone())
                .materialise(dir.path(), m)
                .unwrap(),
            named
        );
        let not = dir.path().join("not.a");
        std::fs::write(&not, b"!<arch>\n").unwrap();
        let e = Source::Path(not).materialise(dir.path(), m).unwrap_err();
        assert!(matches!(e, RuntimeError::NotArchive { .. }), "{e}");
    }
}
