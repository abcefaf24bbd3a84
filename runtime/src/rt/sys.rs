//! What the runtime needs from the C library, without Rust's std: locks, one-time
//! initialisation, thread flags, a clock, files and stderr, the environment, the dynamic
//! loader (the driver library, the loaded objects) and a helper thread. Every libc call of
//! the runtime is here (the no_std allocator and panic handler aside, in lib.rs); the C
//! entry points that cudart's callers reach are in abi.rs. std would add about 300 KB to
//! every packed output (its formatting and backtrace machinery come with its panic handler);
//! these wrappers are the few calls the runtime makes, each on glibc's own primitives.

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void, CStr};
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

use crate::prelude::*;

/// A mutex on `pthread_mutex_t`, usable in statics.
pub(crate) struct Mutex<T> {
    raw: UnsafeCell<libc::pthread_mutex_t>,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by the pthread mutex.
unsafe impl<T: Send> Send for Mutex<T> {}
// SAFETY: as above; a shared Mutex only hands out the data under the lock.
unsafe impl<T: Send> Sync for Mutex<T> {}

impl<T> Mutex<T> {
    pub(crate) const fn new(v: T) -> Self {
        Mutex {
            raw: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            data: UnsafeCell::new(v),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        // SAFETY: a statically initialised mutex, never moved while locked (guards borrow
        // it), never destroyed. A normal mutex cannot fail to lock except by deadlock.
        unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        MutexGuard { m: self }
    }
}

pub(crate) struct MutexGuard<'a, T> {
    m: &'a Mutex<T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.m.data.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and is borrowed mutably.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard locked it on this thread.
        unsafe { libc::pthread_mutex_unlock(self.m.raw.get()) };
    }
}

/// A reader-writer lock on `pthread_rwlock_t`, usable in statics.
pub(crate) struct RwLock<T> {
    raw: UnsafeCell<libc::pthread_rwlock_t>,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by the rwlock (shared for reads only).
unsafe impl<T: Send> Send for RwLock<T> {}
// SAFETY: readers get `&T` (T: Sync), the writer exclusive access.
unsafe impl<T: Send + Sync> Sync for RwLock<T> {}

impl<T> RwLock<T> {
    pub(crate) const fn new(v: T) -> Self {
        RwLock {
            raw: UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER),
            data: UnsafeCell::new(v),
        }
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        // SAFETY: statically initialised, never moved or destroyed.
        unsafe { libc::pthread_rwlock_rdlock(self.raw.get()) };
        ReadGuard { l: self }
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        // SAFETY: as for read.
        unsafe { libc::pthread_rwlock_wrlock(self.raw.get()) };
        WriteGuard { l: self }
    }
}

pub(crate) struct ReadGuard<'a, T> {
    l: &'a RwLock<T>,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock shared; writers are excluded.
        unsafe { &*self.l.data.get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: locked by this guard on this thread.
        unsafe { libc::pthread_rwlock_unlock(self.l.raw.get()) };
    }
}

pub(crate) struct WriteGuard<'a, T> {
    l: &'a RwLock<T>,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock exclusively.
        unsafe { &*self.l.data.get() }
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock exclusively, and is borrowed mutably.
        unsafe { &mut *self.l.data.get() }
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: locked by this guard on this thread.
        unsafe { libc::pthread_rwlock_unlock(self.l.raw.get()) };
    }
}

/// A value computed once, on first use, by whichever thread gets there first; the others
/// wait for it. (std's `OnceLock`.)
pub(crate) struct Once<T> {
    done: AtomicBool,
    lock: Mutex<()>,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value is written once under the lock before `done` is released, and only
// read after `done` is acquired.
unsafe impl<T: Send + Sync> Sync for Once<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Once<T> {}

impl<T> Once<T> {
    pub(crate) const fn new() -> Self {
        Once {
            done: AtomicBool::new(false),
            lock: Mutex::new(()),
            value: UnsafeCell::new(None),
        }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        if self.done.load(Ordering::Acquire) {
            // SAFETY: `done` is set only after the value was written, and never cleared.
            unsafe { (*self.value.get()).as_ref() }
        } else {
            None
        }
    }

    pub(crate) fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        let _g = self.lock.lock();
        if !self.done.load(Ordering::Acquire) {
            let v = f();
            // SAFETY: under the lock and before `done`: no reader can see the cell yet.
            unsafe { *self.value.get() = Some(v) };
            self.done.store(true, Ordering::Release);
        }
        // SAFETY: written above or by an earlier holder of the lock; never changed again.
        unsafe { (*self.value.get()).as_ref() }.unwrap_or_else(|| unreachable!())
    }
}

/// A per-thread word (a `pthread_key_t` made on first use): std's `thread_local!` for the
/// two flags the runtime keeps per thread.
pub(crate) struct ThreadWord {
    key: Once<libc::pthread_key_t>,
}

impl ThreadWord {
    pub(crate) const fn new() -> Self {
        ThreadWord { key: Once::new() }
    }

    fn key(&self) -> libc::pthread_key_t {
        *self.key.get_or_init(|| {
            let mut k: libc::pthread_key_t = 0;
            // SAFETY: creates a key with no destructor (the word is not a pointer to free).
            // Failing means the process ran out of keys; the word then reads as 0 on every
            // thread and writes are lost, which only costs the fast paths.
            unsafe { libc::pthread_key_create(&mut k, None) };
            k
        })
    }

    pub(crate) fn get(&self) -> usize {
        // SAFETY: a key created above; the stored value is a plain word.
        unsafe { libc::pthread_getspecific(self.key()) as usize }
    }

    pub(crate) fn set(&self, v: usize) {
        // SAFETY: as for get.
        unsafe { libc::pthread_setspecific(self.key(), v as *const c_void) };
    }
}

/// Insertion sort, for the runtime's few short lists (a module's chosen entries, the
/// capabilities present): core's sort code would be larger than all of it.
pub(crate) fn sort_small<T: Ord + Copy>(v: &mut [T]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && v[j - 1] > v[j] {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// Microseconds on the monotonic clock, for log lines.
pub(crate) fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the current time into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000) + ts.tv_nsec as u64 / 1000
}

/// Microseconds shown as milliseconds with two decimals, without pulling in float
/// formatting (about 20 KB of every output).
pub(crate) struct Millis(pub u64);

impl core::fmt::Display for Millis {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:02}", self.0 / 1000, self.0 % 1000 / 10)
    }
}

/// Writes all of `b` to stderr (one `write` unless interrupted or partial).
pub(crate) fn write_stderr(mut b: &[u8]) {
    while !b.is_empty() {
        // SAFETY: writes from a valid buffer of b.len() bytes.
        let n = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
        if n > 0 {
            b = &b[n as usize..];
        } else if n < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return;
        }
    }
}

fn errno() -> c_int {
    // SAFETY: glibc's thread-local errno.
    unsafe { *libc::__errno_location() }
}

/// `strerror` text of an errno value, as std's io::Error shows it.
pub(crate) fn os_error(code: c_int) -> String {
    let mut buf = [0u8; 128];
    // SAFETY: the GNU/XSI strerror_r writes a NUL-terminated message into buf; libc's
    // binding is the XSI one (returns 0 on success).
    let ok = unsafe { libc::strerror_r(code, buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let msg = if ok {
        CStr::from_bytes_until_nul(&buf)
            .map(|c| String::from_utf8_lossy(c.to_bytes()).into_owned())
            .unwrap_or_default()
    } else {
        String::new()
    };
    format!("{msg} (os error {code})")
}

/// A path as bytes, NUL-terminated for the C library.
fn c_path(path: &[u8]) -> Result<Vec<u8>, String> {
    if path.contains(&0) {
        return Err(format!("{}: path contains a NUL byte", show(path)));
    }
    let mut v = Vec::with_capacity(path.len() + 1);
    v.extend_from_slice(path);
    v.push(0);
    Ok(v)
}

/// A path for messages.
pub(crate) fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// An open file descriptor, closed when dropped.
pub(crate) struct Fd(c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Opens `path` read-only if it is a regular file, without blocking (a FIFO or a device in
/// its place must not hang or feed the process) and without becoming a controlling
/// terminal; close-on-exec.
pub(crate) fn open_regular(path: &[u8]) -> Result<Fd, String> {
    let c = c_path(path)?;
    // SAFETY: a NUL-terminated path; flags for a read-only open.
    let fd = unsafe {
        libc::open(
            c.as_ptr().cast(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = errno();
        return Err(if e == libc::ENOENT {
            format!("{} is missing", show(path))
        } else {
            format!("cannot open {}: {}", show(path), os_error(e))
        });
    }
    let fd = Fd(fd);
    let mode = fstat(&fd)
        .map_err(|e| format!("cannot stat {}: {e}", show(path)))?
        .st_mode;
    match mode & libc::S_IFMT {
        libc::S_IFREG => Ok(fd),
        libc::S_IFIFO => Err(format!("{} is a FIFO", show(path))),
        libc::S_IFDIR => Err(format!("{} is a directory", show(path))),
        _ => Err(format!("{} is not a regular file", show(path))),
    }
}

fn fstat(fd: &Fd) -> Result<libc::stat, String> {
    // SAFETY: an all-zero `stat` is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: an open descriptor and a stat buffer.
    if unsafe { libc::fstat(fd.0, &mut st) } != 0 {
        return Err(os_error(errno()));
    }
    Ok(st)
}

/// Maps the whole file read-only and private, for the life of the process (the store and
/// packs are read lazily, as modules load).
pub(crate) fn map(fd: &Fd, path: &[u8]) -> Result<&'static [u8], String> {
    let len = fstat(fd)
        .map_err(|e| format!("cannot stat {}: {e}", show(path)))?
        .st_size;
    let len = usize::try_from(len).map_err(|_| format!("{} has a bad size", show(path)))?;
    if len == 0 {
        return Err(format!("{} is empty", show(path)));
    }
    // SAFETY: a read-only private mapping of a regular file. What is read from it is copied
    // and verified before use (Store::parse, read_entry), so a rewrite in place cannot change
    // a decision; truncation would fault, as for any mapped binary.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            fd.0,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("cannot map {}: {}", show(path), os_error(errno())));
    }
    // SAFETY: `len` readable bytes at `p`, never unmapped.
    Ok(unsafe { core::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// The whole contents of a (small, e.g. /proc) file; None if it cannot be read.
pub(crate) fn read_file(path: &[u8]) -> Option<Vec<u8>> {
    read_file_max(path, usize::MAX)
}

/// [`read_file`], stopping after `max` bytes.
pub(crate) fn read_file_max(path: &[u8], max: usize) -> Option<Vec<u8>> {
    let c = c_path(path).ok()?;
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let fd = Fd(fd);
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if out.len() >= max {
            out.truncate(max);
            return Some(out);
        }
        // SAFETY: reads into a valid buffer.
        let n = unsafe { libc::read(fd.0, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return Some(out),
            n if n > 0 => out.extend_from_slice(&buf[..n as usize]),
            _ if errno() == libc::EINTR => {}
            _ => return None,
        }
    }
}

/// The target of a symbolic link.
pub(crate) fn read_link(path: &[u8]) -> Result<Vec<u8>, String> {
    let c = c_path(path)?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: a NUL-terminated path and a buffer of buf.len() bytes.
    let n = unsafe { libc::readlink(c.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(os_error(errno()));
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// The environment variable `name`, without allocating (usable from static constructors).
pub(crate) fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv returns null or a NUL-terminated string that lives as long as the
    // environment entry; nothing in this runtime modifies the environment.
    unsafe {
        let p = libc::getenv(name.as_ptr());
        (!p.is_null()).then(|| CStr::from_ptr(p).to_bytes())
    }
}

/// The last dynamic-loader error, as text.
pub(crate) fn dlerror() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated message.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// `dlopen(name, RTLD_NOW | RTLD_LOCAL)`: a handle, or null ([`dlerror`] says why).
pub(crate) fn dlopen(name: &CStr) -> *mut c_void {
    // SAFETY: plain dlopen of a library by soname.
    unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) }
}

/// `dlsym`: the address of `name` in `lib`, or null.
///
/// # Safety
/// `lib` must be a live handle from [`dlopen`].
pub(crate) unsafe fn dlsym(lib: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { libc::dlsym(lib, name.as_ptr()) }
}

/// Lets another thread run (a spinning waiter's back-off).
pub(crate) fn yield_now() {
    // SAFETY: no arguments.
    unsafe { libc::sched_yield() };
}

/// Sleeps while `word` holds `expected` (until a [`wake_all`] on it, or a spurious wake-up:
/// callers re-check). A futex holds no lock, so a fork can leave nothing half-held.
pub(crate) fn wait_while(word: &core::sync::atomic::AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT on a live, aligned 32-bit word, no timeout; the kernel only reads it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            core::ptr::null::<libc::timespec>(),
        )
    };
}

/// Wakes every thread in [`wait_while`] on `word`.
pub(crate) fn wake_all(word: &core::sync::atomic::AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned 32-bit word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        )
    };
}

/// This process's id (a fork's child has its own).
pub(crate) fn pid() -> i32 {
    // SAFETY: no arguments; cannot fail.
    unsafe { libc::getpid() }
}

/// A thread started on a C entry point, joined once.
pub(crate) struct Thread(libc::pthread_t);

impl Thread {
    /// Starts `entry(arg)`; None when no thread can be made.
    ///
    /// # Safety
    /// `arg` must stay valid for what `entry` does with it until [`Thread::join`] returns.
    pub(crate) unsafe fn spawn(
        entry: extern "C" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void,
    ) -> Option<Thread> {
        let mut tid: libc::pthread_t = 0;
        // SAFETY: default attributes; the caller keeps `arg` alive until the join.
        let made = unsafe { libc::pthread_create(&mut tid, core::ptr::null(), entry, arg) } == 0;
        made.then_some(Thread(tid))
    }

    /// Waits for the thread to return.
    pub(crate) fn join(self) {
        // SAFETY: a thread made by `spawn`, joined once (this consumes it).
        unsafe { libc::pthread_join(self.0, core::ptr::null_mut()) };
    }
}

/// A loaded object (the program or a library): where its loadable segments are in memory
/// and the name the loader gave it.
pub(crate) struct LoadedObject {
    /// `dlpi_name`: empty for the main program.
    pub(crate) name: Vec<u8>,
    /// `[start, end)` of each `PT_LOAD`, load bias applied.
    pub(crate) loads: Vec<(usize, usize)>,
    /// The address it was found by.
    pub(crate) addr: usize,
}

/// The loaded object whose segments contain `addr` (`dl_iterate_phdr`).
pub(crate) fn object_containing(addr: usize) -> Option<LoadedObject> {
    struct Search {
        addr: usize,
        found: Option<LoadedObject>,
    }
    unsafe extern "C" fn cb(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info with dlpi_phnum headers; data is our
        // Search.
        unsafe {
            let s = &mut *data.cast::<Search>();
            let info = &*info;
            let mut loads = Vec::new();
            for i in 0..usize::from(info.dlpi_phnum) {
                let ph = &*info.dlpi_phdr.add(i);
                if ph.p_type == libc::PT_LOAD {
                    let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
                    loads.push((start, start.wrapping_add(ph.p_memsz as usize)));
                }
            }
            if !loads.iter().any(|&(a, b)| (a..b).contains(&s.addr)) {
                return 0;
            }
            let name = if info.dlpi_name.is_null() {
                Vec::new()
            } else {
                CStr::from_ptr(info.dlpi_name).to_bytes().to_vec()
            };
            s.found = Some(LoadedObject {
                name,
                loads,
                addr: s.addr,
            });
            1
        }
    }
    let mut s = Search { addr, found: None };
    // SAFETY: cb only reads what dl_iterate_phdr hands it and writes to `s`.
    unsafe { libc::dl_iterate_phdr(Some(cb), (&mut s as *mut Search).cast()) };
    s.found
}
