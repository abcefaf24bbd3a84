//! The ELF flavour a link produces, and whether an input file is for it (ld skips an
//! incompatible library and goes on searching).

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::inputs::magic::{magic, Magic};

/// What a resolved input file holds, by its first bytes (filled in by `search::resolve` from a [`Probe`]; the
/// link line holds it).
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

/// The ELF flavour the link produces, to skip libraries built for another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub class64: bool,
    pub big_endian: bool,
    pub machine: u16,
}

impl Target {
    /// From a BFD target name (`elf64-x86-64`, `elf64-littleaarch64`, ...); `None` if unknown.
    pub fn from_bfd_name(name: &str) -> Option<Target> {
        use object::elf::*;
        let t = |class64, big_endian, machine| {
            Some(Target {
                class64,
                big_endian,
                machine,
            })
        };
        let table: &[(&str, Option<Target>)] = &[
            ("elf64-x86-64", t(true, false, EM_X86_64)),
            ("elf32-x86-64", t(false, false, EM_X86_64)),
            ("elf32-i386", t(false, false, EM_386)),
            ("elf32-iamcu", t(false, false, EM_IAMCU)),
            ("elf64-littleaarch64", t(true, false, EM_AARCH64)),
            ("elf64-bigaarch64", t(true, true, EM_AARCH64)),
            ("elf32-littleaarch64", t(false, false, EM_AARCH64)),
            ("elf32-littlearm", t(false, false, EM_ARM)),
            ("elf32-bigarm", t(false, true, EM_ARM)),
            ("elf64-powerpcle", t(true, false, EM_PPC64)),
            ("elf64-powerpc", t(true, true, EM_PPC64)),
            ("elf32-powerpc", t(false, true, EM_PPC)),
            ("elf64-littleriscv", t(true, false, EM_RISCV)),
            ("elf32-littleriscv", t(false, false, EM_RISCV)),
            ("elf64-s390", t(true, true, EM_S390)),
        ];
        // Longest match first: `elf64-powerpcle` before `elf64-powerpc`; OS variants
        // (`elf64-x86-64-freebsd`) share their base's flavour.
        table
            .iter()
            .filter(|(n, _)| {
                name == *n
                    || name
                        .strip_prefix(n)
                        .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(n, _)| n.len())
            .and_then(|(_, t)| *t)
    }

    /// Whether an ELF file starting with `header` (at least 20 bytes) can go in this link.
    pub fn accepts(&self, header: &[u8]) -> bool {
        crate::elf::Ident::read(header).is_none_or(|i| {
            i.class64 == self.class64
                && i.big_endian == self.big_endian
                && i.machine == self.machine
        })
    }
}

/// Reads into `buf` from `at` until it is full or the file ends (positioned reads: no seek
/// between them).
fn read_prefix_at(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What one open of a file tells ld's search: whether it is a regular file, its kind by its
/// first bytes, the ELF header that decides whether ld takes it for a target (an archive's:
/// its first object member's), its metadata, and the whole file when it is small. A search
/// that tries a library and then takes its kind, or names a script twice (gcc names
/// `-lgcc_s` twice), reads each file once this way; the link's later steps take the
/// metadata and the small files' bytes from here (crt1.o, a user's object, `libc.so`) rather
/// than asking the system again.
#[derive(Debug, Clone)]
pub struct Probe {
    pub kind: InputFileKind,
    /// A regular file (ld takes it, whatever its bytes, unless it is ELF for another target).
    pub regular: bool,
    elf_header: Option<[u8; 20]>,
    /// The regular file's metadata.
    pub meta: Option<fs::Metadata>,
    /// The whole file, when it has at most [`SMALL_FILE`] bytes.
    pub whole: Option<Arc<[u8]>>,
}

/// The bytes a probe reads at most: enough for every magic, and the whole of the files on
/// every gcc line but the libraries (crt objects of 1-3 KB, `libc.so`, `libgcc_s.so`) and of
/// a small program's objects, and `libc_nonshared.a` (5 KB, named by `libc.so`). One read of
/// 8 KiB costs what one of 512 bytes does.
const SMALL_FILE: usize = 8192;

impl Probe {
    fn not_found(kind: InputFileKind) -> Probe {
        Probe {
            kind,
            regular: false,
            elf_header: None,
            meta: None,
            whole: None,
        }
    }

    /// Looks at `path` once. Only a regular file is opened: opening a FIFO could wait, and
    /// opening a device can do something (ld has no use for either).
    pub fn of(path: &Path) -> Probe {
        let meta = match fs::metadata(path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => return Probe::not_found(InputFileKind::Other),
            Err(_) => return Probe::not_found(InputFileKind::Missing),
        };
        let Ok(f) = File::open(path) else {
            return Probe::not_found(InputFileKind::Missing);
        };
        // As many bytes as the file has, up to SMALL_FILE: one read, none to find the end.
        let want = usize::try_from(meta.len()).map_or(SMALL_FILE, |l| l.min(SMALL_FILE));
        let mut buf = [0u8; SMALL_FILE];
        let Ok(n) = read_prefix_at(&f, &mut buf[..want], 0) else {
            return Probe::not_found(InputFileKind::Missing);
        };
        let head = &buf[..n];
        let kind = match magic(head) {
            Magic::Elf => InputFileKind::Elf,
            Magic::Archive => InputFileKind::Archive,
            Magic::ThinArchive => InputFileKind::ThinArchive,
            Magic::Bitcode => InputFileKind::Bitcode,
            Magic::Text => InputFileKind::Script,
            Magic::Fatbin | Magic::Store | Magic::Other => InputFileKind::Other,
        };
        let elf_header = match kind {
            InputFileKind::Elf if n >= 20 => head[..20].try_into().ok(),
            InputFileKind::Archive => first_member_header(&f, meta.len(), head).ok().flatten(),
            _ => None,
        };
        // Whole only if nothing was cut short: a file that grew since its stat is not.
        let whole = (meta.len() == n as u64).then(|| Arc::from(head));
        Probe {
            kind,
            regular: true,
            elf_header,
            meta: Some(meta),
            whole,
        }
    }

    /// The ELF file type (`e_type`) of an ELF file: a shared library (`ET_DYN`) holds no
    /// device code a link rewrites, whatever its size.
    pub fn elf_type(&self) -> Option<u16> {
        let h = self
            .elf_header
            .filter(|_| self.kind == InputFileKind::Elf)?;
        let bytes = [h[16], h[17]];
        match h[5] {
            1 => Some(u16::from_le_bytes(bytes)),
            2 => Some(u16::from_be_bytes(bytes)),
            _ => None,
        }
    }

    /// The text of a script small enough to have been read whole.
    pub fn small_script(&self) -> Option<&[u8]> {
        self.whole
            .as_deref()
            .filter(|_| self.kind == InputFileKind::Script)
    }

    /// Whether ld would take the file for this target (an unknown target takes everything;
    /// so does ld a file that is neither ELF nor an archive with an ELF member).
    pub fn compatible(&self, target: Option<&Target>) -> bool {
        match (target, &self.elf_header) {
            (Some(t), Some(h)) => t.accepts(h),
            _ => true,
        }
    }
}

/// The first 20 bytes of the first ELF member of a regular archive, read from `head` (its
/// first bytes) where they are in it.
fn first_member_header(f: &File, len: u64, head: &[u8]) -> io::Result<Option<[u8; 20]>> {
    let read_at = |buf: &mut [u8], pos: u64| -> io::Result<usize> {
        let start = usize::try_from(pos).unwrap_or(usize::MAX);
        match head.get(start..start.saturating_add(buf.len())) {
            Some(bytes) => {
                buf.copy_from_slice(bytes);
                Ok(buf.len())
            }
            None => read_prefix_at(f, buf, pos),
        }
    };
    let mut pos = 8u64;
    let mut hdr = [0u8; 60];
    while pos + 60 <= len {
        if read_at(&mut hdr, pos)? < 60 || &hdr[58..60] != b"`\n" {
            return Ok(None);
        }
        let size: u64 = std::str::from_utf8(&hdr[48..58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let name = &hdr[..16];
        // Symbol tables and the long-name table are not objects.
        let special =
            name.starts_with(b"/ ") || name.starts_with(b"//") || name.starts_with(b"/SYM64/");
        if !special && !name.starts_with(b"__.SYMDEF") {
            let mut m = [0u8; 20];
            if read_at(&mut m, pos + 60)? == 20 && m.starts_with(b"\x7fELF") {
                return Ok(Some(m));
            }
        }
        pos += 60 + size + (size & 1);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe keeps a small file whole (the scan reads it from there) and its metadata; a
    /// larger one only its kind and metadata; what is not there is Missing with neither.
    #[test]
    fn a_probe_keeps_small_files_whole() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.o");
        let mut bytes = b"\x7fELF\x02\x01\x01".to_vec();
        bytes.resize(1448, 7);
        fs::write(&small, &bytes).unwrap();
        let p = Probe::of(&small);
        assert_eq!(p.kind, InputFileKind::Elf);
        assert_eq!(p.whole.as_deref(), Some(&bytes[..]));
        assert_eq!(p.meta.as_ref().map(fs::Metadata::len), Some(1448));
        assert!(p.small_script().is_none());

        let large = dir.path().join("large.o");
        bytes.resize(SMALL_FILE + 1, 7);
        fs::write(&large, &bytes).unwrap();
        let p = Probe::of(&large);
        assert_eq!(p.kind, InputFileKind::Elf);
        assert!(p.whole.is_none());
        assert_eq!(
            p.meta.as_ref().map(fs::Metadata::len),
            Some(SMALL_FILE as u64 + 1)
        );

        let script = dir.path().join("libc.so");
        fs::write(&script, b"/* GNU ld script */\nGROUP ( /lib/libc.so.6 )\n").unwrap();
        assert!(Probe::of(&script)
            .small_script()
            .is_some_and(|t| t.starts_with(b"/* GNU")));

        let missing = Probe::of(&dir.path().join("none.o"));
        assert_eq!(missing.kind, InputFileKind::Missing);
        assert!(missing.meta.is_none() && missing.whole.is_none() && !missing.regular);
    }

    /// The probe tells a shared library from an object by its header (the scan passes shared
    /// libraries by), and an archive's first ELF member is read from the bytes the probe
    /// already has when they hold it, or from the file when they do not.
    #[test]
    fn the_probe_tells_shared_libraries_and_reads_archive_members() {
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvcc13");
        let so = Probe::of(&fixtures.join("libfixture.so"));
        assert_eq!(so.elf_type(), Some(object::elf::ET_DYN));
        let o = Probe::of(&fixtures.join("kernels.o"));
        assert_eq!(o.elf_type(), Some(object::elf::ET_REL));
        let a = Probe::of(&fixtures.join("libfixture.a"));
        assert_eq!((a.kind, a.elf_type()), (InputFileKind::Archive, None));
        let header = a.elf_header.expect("an archive's first member header");
        assert!(header.starts_with(b"\x7fELF"));
        // The same header when the member lies past the bytes read (a padded first member).
        let dir = tempfile::tempdir().unwrap();
        let mut ar = b"!<arch>\n".to_vec();
        let pad = vec![b'x'; SMALL_FILE];
        for (name, body) in [
            (&b"pad.txt/        "[..], &pad[..]),
            (b"m.o/            ", &header[..]),
        ] {
            ar.extend_from_slice(name);
            ar.extend_from_slice(
                format!("{:<12}{:<6}{:<6}{:<8}{:<10}`\n", 0, 0, 0, 644, body.len()).as_bytes(),
            );
            ar.extend_from_slice(body);
        }
        let far = dir.path().join("libfar.a");
        fs::write(&far, &ar).unwrap();
        assert_eq!(Probe::of(&far).elf_header, Some(header));
    }
}
