//! The store of the binary this runtime copy is linked into: found through the loaded
//! object's file, checked against the digest the glue object carries in memory.

use std::ffi::{c_int, c_void, CStr, OsStr};
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cubin_store::Store;

use fatpack_format::elf;
use fatpack_format::link::{DIGEST_SECTION, SIDE_FILE_SUFFIX, STORE_SECTION};

extern "C" {
    /// 32 bytes in the glue object's allocated section `.fatpack_digest`, hidden, patched
    /// by `fatpack ld` after the link. Hidden matters: each packed library must read its own.
    static __fatpack_store_digest: [u8; 32];
}

pub(crate) struct Image {
    pub store: Store<'static>,
    /// Where the store was found, for messages.
    pub origin: String,
}

static IMAGE: OnceLock<Result<Image, String>> = OnceLock::new();

/// Opened once per runtime copy; a failure is kept too (the file will not get better).
pub(crate) fn get() -> Result<&'static Image, &'static str> {
    IMAGE
        .get_or_init(|| {
            let r = open();
            match &r {
                Ok(i) => debug!("store: {} ({:?})", i.origin, i.store),
                Err(e) => debug!("store unusable: {e}"),
            }
            r
        })
        .as_ref()
        .map_err(String::as_str)
}

fn expected_digest() -> [u8; 32] {
    // SAFETY: the glue object defines the symbol as 32 bytes; volatile because the bytes
    // are patched in the file after compilation, so no compiler may assume the placeholder.
    unsafe { std::ptr::read_volatile(std::ptr::addr_of!(__fatpack_store_digest)) }
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The loaded object containing this function: (path to open, path for the side file).
fn locate_self() -> Result<(PathBuf, PathBuf), String> {
    struct Search {
        addr: usize,
        found: bool,
        name: Vec<u8>,
    }
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info; data is our Search.
        unsafe {
            let s = &mut *data.cast::<Search>();
            let info = &*info;
            for i in 0..usize::from(info.dlpi_phnum) {
                let ph = &*info.dlpi_phdr.add(i);
                if ph.p_type != libc::PT_LOAD {
                    continue;
                }
                let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                let end = start.wrapping_add(ph.p_memsz as usize);
                if (start..end).contains(&s.addr) {
                    s.found = true;
                    if !info.dlpi_name.is_null() {
                        s.name = CStr::from_ptr(info.dlpi_name).to_bytes().to_vec();
                    }
                    return 1;
                }
            }
            0
        }
    }
    let mut s = Search {
        addr: locate_self as *const () as usize,
        found: false,
        name: Vec::new(),
    };
    // SAFETY: cb only reads what dl_iterate_phdr hands it and writes to `s`.
    unsafe { libc::dl_iterate_phdr(Some(cb), (&mut s as *mut Search).cast()) };
    if !s.found {
        return Err("cannot find the loaded object that contains the fatpack runtime".into());
    }
    if s.name.is_empty() {
        // The main program: /proc/self/exe is the very inode that was executed; the side
        // file sits next to the path it resolves to.
        let exe = PathBuf::from("/proc/self/exe");
        let real = std::fs::read_link(&exe).unwrap_or_else(|_| exe.clone());
        return Ok((exe, real));
    }
    let p = PathBuf::from(OsStr::from_bytes(&s.name));
    if p.exists() {
        return Ok((p.clone(), p));
    }
    // A library opened by a relative path from another working directory: ask the kernel.
    match maps_path(s.addr) {
        Some(m) => Ok((m.clone(), m)),
        None => Ok((p.clone(), p)),
    }
}

/// The file mapped at `addr`, from /proc/self/maps.
fn maps_path(addr: usize) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    for line in maps.lines() {
        let mut f = line.splitn(6, ' ');
        let range = f.next()?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        if (a..b).contains(&addr) {
            let path = f.nth(4)?.trim_start();
            return path.starts_with('/').then(|| PathBuf::from(path));
        }
    }
    None
}

fn map(path: &Path) -> Result<&'static [u8], String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
        .len();
    if len == 0 {
        return Err(format!("{} is empty", path.display()));
    }
    // SAFETY: read-only private mapping. Replacing a binary by rename keeps this inode; an
    // in-place rewrite would be caught by the digest check or the store's own checksums.
    let m = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| format!("cannot map {}: {e}", path.display()))?;
    // Kept for the life of the process: the Store borrows it and modules load lazily.
    Ok(&Box::leak(Box::new(m))[..])
}

fn open() -> Result<Image, String> {
    let (path, side_base) = locate_self()?;
    let file = map(&path)?;
    let (bytes, origin) = match elf::find_section(file, STORE_SECTION)
        .map_err(|e| format!("{}: {e}", path.display()))?
    {
        Some(r) => (
            &file[r],
            format!("section {STORE_SECTION} of {}", side_base.display()),
        ),
        None => {
            let mut side = side_base.clone().into_os_string();
            side.push(SIDE_FILE_SUFFIX);
            let side = PathBuf::from(side);
            if !side.exists() {
                return Err(format!(
                    "no device code store: {} has no {STORE_SECTION} section and {} does not \
                     exist (was the side file not installed next to the binary?)",
                    side_base.display(),
                    side.display()
                ));
            }
            (map(&side)?, side.display().to_string())
        }
    };
    let store = Store::parse(bytes)
        .map_err(|e| format!("the device code store ({origin}) is damaged: {e}"))?;
    let want = expected_digest();
    if want == [0; 32] {
        return Err(format!(
            "{} of {} holds no store digest (the binary was not finished by fatpack ld)",
            DIGEST_SECTION,
            side_base.display()
        ));
    }
    let got = store.digest();
    if got != want {
        return Err(format!(
            "the device code store ({origin}) does not belong to this binary: digest {} \
             but the binary expects {} (stale or replaced store)",
            hex(&got),
            hex(&want)
        ));
    }
    Ok(Image { store, origin })
}
