//! The runtime archive a packed link adds: the one built into this fatpack (build.rs makes
//! it for the target fatpack itself is built for), or the one `FATPACK_RUNTIME` names.
//!
//! The embedded archive is written into the link's private temp folder (made 0700 by
//! tempfile, removed with it), after its bytes are checked against the digest build.rs
//! recorded; either archive's ELF machine must be the link's, so that a cross link gets a
//! one-line error instead of hundreds of `Relocations in generic ELF` from the real linker.

use std::path::{Path, PathBuf};

use object::read::archive::ArchiveFile;

use super::abi::{ENV_RUNTIME, RUNTIME_ARCHIVE};

/// The archive build.rs made (LTO'd, debug info stripped).
pub static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libfatpack_rt.a"));
/// blake3 of [`EMBEDDED`] as build.rs wrote it.
pub const EMBEDDED_BLAKE3: &str = env!("FATPACK_RT_BLAKE3");
/// The Rust target [`EMBEDDED`] was built for.
pub const EMBEDDED_TARGET: &str = env!("FATPACK_RT_TARGET");

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
        "the runtime archive inside this fatpack is damaged (blake3 {found}, built as \
         {EMBEDDED_BLAKE3}): reinstall fatpack"
    )]
    Damaged { found: String },
    #[error("{what}: not an ar archive of ELF objects, so not a fatpack runtime archive")]
    NotArchive { what: String },
    #[error(
        "{what} is for {runtime}, but this link is for {link}: set {ENV_RUNTIME} to a runtime \
         archive built for {link} (`cargo build --target <{link} triple>` of fatpack makes one), \
         or use --fatpack-mode=tail, which needs none"
    )]
    Machine {
        what: String,
        runtime: &'static str,
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
            Source::Embedded => format!("the runtime built into fatpack ({EMBEDDED_TARGET})"),
            Source::Path(p) => format!("{ENV_RUNTIME}={}", p.display()),
        }
    }

    /// The archive as a file the real linker can read: `FATPACK_RUNTIME` as it is, or the
    /// embedded one written (after its digest check) into `dir` under the name
    /// `--exclude-libs` matches. `link_machine` is the link's ELF `e_machine`.
    pub fn materialise(&self, dir: &Path, link_machine: u16) -> Result<PathBuf, RuntimeError> {
        let what = self.what();
        let (path, bytes);
        match self {
            Source::Embedded => {
                let found = blake3::hash(EMBEDDED).to_hex();
                if found.as_str() != EMBEDDED_BLAKE3 {
                    return Err(RuntimeError::Damaged {
                        found: found.to_string(),
                    });
                }
                path = dir.join(RUNTIME_ARCHIVE);
                bytes = std::borrow::Cow::Borrowed(EMBEDDED);
            }
            Source::Path(p) => {
                path = p.clone();
                bytes = std::borrow::Cow::Owned(std::fs::read(p).map_err(|source| {
                    RuntimeError::Io {
                        path: p.clone(),
                        source,
                    }
                })?);
            }
        }
        let machine =
            archive_machine(&bytes).ok_or_else(|| RuntimeError::NotArchive { what: what.clone() })?;
        if machine != link_machine {
            return Err(RuntimeError::Machine {
                what,
                runtime: machine_name(machine),
                link: machine_name(link_machine),
            });
        }
        if *self == Source::Embedded {
            std::fs::write(&path, &*bytes).map_err(|source| RuntimeError::Io {
                path: path.clone(),
                source,
            })?;
        }
        Ok(path)
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
    let embedded = format!(
        "embedded, {EMBEDDED_TARGET}, {} bytes, blake3 {}",
        EMBEDDED.len(),
        &EMBEDDED_BLAKE3[..16]
    );
    match Source::from_env() {
        Ok(Source::Embedded) => embedded,
        Ok(Source::Path(p)) => format!(
            "{ENV_RUNTIME}={} (overrides the {embedded} one)",
            p.display()
        ),
        Err(e) => format!("{e} (the {embedded} one is not used while it is set)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_archive_is_for_the_target_fatpack_was_built_for() {
        assert_eq!(
            blake3::hash(EMBEDDED).to_hex().as_str(),
            EMBEDDED_BLAKE3,
            "digest"
        );
        let m = archive_machine(EMBEDDED).expect("an ar archive of ELF objects");
        let want = if EMBEDDED_TARGET.starts_with("x86_64") {
            object::elf::EM_X86_64
        } else if EMBEDDED_TARGET.starts_with("aarch64") {
            object::elf::EM_AARCH64
        } else {
            m
        };
        assert_eq!(m, want);
    }

    #[test]
    fn a_foreign_machine_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let m = archive_machine(EMBEDDED).unwrap();
        let other = if m == object::elf::EM_AARCH64 {
            object::elf::EM_X86_64
        } else {
            object::elf::EM_AARCH64
        };
        let e = Source::Embedded.materialise(dir.path(), other).unwrap_err();
        assert!(matches!(e, RuntimeError::Machine { .. }), "{e}");
        assert!(e.to_string().contains("FATPACK_RUNTIME"), "{e}");
        assert!(!dir.path().join(RUNTIME_ARCHIVE).exists());
        let p = Source::Embedded.materialise(dir.path(), m).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), EMBEDDED);
        let not = dir.path().join("not.a");
        std::fs::write(&not, b"!<arch>\n").unwrap();
        let e = Source::Path(not).materialise(dir.path(), m).unwrap_err();
        assert!(matches!(e, RuntimeError::NotArchive { .. }), "{e}");
    }
}
