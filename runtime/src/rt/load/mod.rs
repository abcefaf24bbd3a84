//! Loading one module: choose per device, decompress the choices, register with cudart and
//! replay what nvcc's code registered under the fake handle.

#[allow(unused_imports)]
use crate::prelude::*;
use core::ffi::c_void;

use cubin_store::{Codec, EntryKind, EntryView, Store};

mod handoff;

use super::container::{self, Aligned};
use super::driver::{self, Device};
use super::image::{self, Image, ReadError};
use super::{
    abi, lock, CudaError, FatbinWrapper, Handle, Inner, Module, CUDART_LOCK,
    CUDA_ERROR_INVALID_KERNEL_IMAGE, CUDA_ERROR_NO_KERNEL_IMAGE_FOR_DEVICE, WRAPPER_MAGIC,
};
use fatpack_format::arch::EntryId;
use fatpack_format::fatbin::{EntryInput, PayloadForm};
use fatpack_format::select::{self, capability_string};
use handoff::Handoff;

/// What cudart holds for a loaded module: its handle and the memory it points into.
pub(crate) struct Loaded {
    pub handle: Handle,
    pub(super) _wrapper: Box<FatbinWrapper>,
    pub(super) _main: Aligned,
    pub(super) _prelinked: Vec<Aligned>,
    pub(super) _array: Vec<*const c_void>,
}

pub(crate) enum Outcome {
    Loaded(Loaded),
    /// No driver or no device: nothing can be chosen; let cudart report it.
    Deferred,
    Failed(LoadError),
}

/// Why a module cannot be loaded. [`LoadError::code`] is the table in docs/RUNTIME.md
/// ("Errors"): what the call that triggered the load returns.
#[derive(Debug)]
pub(crate) enum LoadError {
    /// `FATPACK_ARCH` is not an arch name.
    ForcedArch(String),
    /// No device of the process can run any entry of the module (each device was already
    /// reported, with the capabilities and what the module has).
    NoDeviceFits,
    /// The stub in the binary cannot be read.
    Stub(String),
    /// No store, or a damaged, truncated or foreign one (digest mismatch, unpatched slot).
    Store(String),
    /// The store lacks the module, a blob fails its digest, or an entry's kept header
    /// contradicts it.
    Module(String),
}

impl LoadError {
    pub(crate) fn code(&self) -> CudaError {
        match self {
            LoadError::ForcedArch(_) | LoadError::NoDeviceFits => {
                CUDA_ERROR_NO_KERNEL_IMAGE_FOR_DEVICE
            }
            LoadError::Stub(_) | LoadError::Store(_) | LoadError::Module(_) => {
                CUDA_ERROR_INVALID_KERNEL_IMAGE
            }
        }
    }

    /// The message, printed once per module (None: it was reported as it was found).
    fn message(&self) -> Option<&str> {
        match self {
            LoadError::NoDeviceFits => None,
            LoadError::ForcedArch(m)
            | LoadError::Stub(m)
            | LoadError::Store(m)
            | LoadError::Module(m) => Some(m),
        }
    }
}

/// Longest prelinked array walked (a runaway guard; real links have one per TU).
const MAX_PRELINKED: usize = 1 << 20;

/// `FATPACK_ARCH`, parsed. Err: the value is not an arch name.
pub(super) fn forced_arch() -> Result<Option<EntryId>, String> {
    let Some(v) = super::log::env(fatpack_format::link::ENV_ARCH) else {
        return Ok(None);
    };
    let v = core::str::from_utf8(v).unwrap_or_default().trim_ascii();
    if v.is_empty() {
        return Ok(None);
    }
    EntryId::parse(v).map(Some).ok_or_else(|| {
        format!(
            "FATPACK_ARCH=\"{v}\" is not an arch name (expected e.g. sm_80, sm_90a, compute_90)"
        )
    })
}

/// A container of stored frames ([`Plan::handoff`]) and where each entry's lie in it.
pub(super) type Handed = (Aligned, Vec<core::ops::Range<usize>>);

/// One store module and the entry chosen for each distinct capability.
pub(super) struct Plan {
    name: String,
    entries: Vec<EntryView<'static>>,
    cands: Vec<EntryId>,
    /// (capability, chosen index into `entries`), one per distinct capability.
    per_cap: Vec<(u32, Option<usize>)>,
}

impl Plan {
    pub(super) fn new(
        store: &'static Store<'static>,
        origin: &str,
        name: &str,
        caps: &[u32],
        forced: Option<&EntryId>,
    ) -> Result<Plan, String> {
        let module = store.module_by_name(name).ok_or_else(|| {
            format!("module \"{name}\" is not in the device code store ({origin}); stale store?")
        })?;
        let entries: Vec<EntryView<'static>> = module.entries().collect();
        let cands: Vec<EntryId> = entries
            .iter()
            .map(|e| EntryId::new(e.kind(), e.arch(), e.variant()))
            .collect();
        let per_cap = caps
            .iter()
            .map(|&cap| (cap, select::choose(cap, &cands, forced)))
            .collect();
        Ok(Plan {
            name: name.to_owned(),
            entries,
            cands,
            per_cap,
        })
    }

    fn choice(&self, cap: u32) -> Option<usize> {
        self.per_cap
            .iter()
            .find(|(c, _)| *c == cap)
            .and_then(|(_, i)| *i)
    }

    pub(super) fn is_sass(&self, cap: u32) -> bool {
        self.choice(cap)
            .is_some_and(|i| self.cands[i].kind == EntryKind::Sass)
    }

    /// Entry `i`'s decoded length.
    pub(super) fn raw_len(&self, i: usize) -> u64 {
        self.entries[i].raw_len()
    }

    /// Whether entry `i`'s stored bytes can be read without a one-time set-up first.
    pub(super) fn mapped(&self, image: &Image, i: usize) -> bool {
        image.is_mapped(&self.entries[i])
    }

    /// The chosen entries for `caps`, each once, in store order.
    pub(super) fn chosen(&self, caps: &[u32]) -> Vec<usize> {
        let mut v: Vec<usize> = caps.iter().filter_map(|&c| self.choice(c)).collect();
        super::sys::sort_small(&mut v);
        v.dedup();
        v
    }

    fn available(&self) -> String {
        select::list(&self.cands)
    }

    /// Decompresses the chosen entries (digest-checked) straight into one container. A
    /// device-linked module with nothing for any device (all JIT) still gets its smallest
    /// entry, so cudart sees a container shaped like nvcc's rather than an empty one.
    /// `given`: each chosen entry's stored bytes as already copied (what [`Plan::handoff`]
    /// handed the driver: those bytes are the ones checked), else they are read from the
    /// store or its packs.
    pub(super) fn build(
        &self,
        image: &Image,
        caps: &[u32],
        given: Option<&[&[u8]]>,
        bytes: &mut u64,
    ) -> Result<Aligned, String> {
        let mut chosen = self.chosen(caps);
        if chosen.is_empty() {
            chosen.extend((0..self.entries.len()).min_by_key(|&i| self.entries[i].raw_len()));
        }
        let name = &self.name;
        // An entry without its original header (not what fatpack ld writes) needs its payload
        // to make one: read it first, into memory of its own.
        let mut early: Vec<Vec<u8>> = Vec::new();
        let given_at = |k: usize| given.and_then(|g| g.get(k).copied());
        for (k, &i) in chosen.iter().enumerate() {
            let e = &self.entries[i];
            let mut v = Vec::new();
            if e.attrs().is_empty() {
                let n = usize::try_from(e.raw_len())
                    .map_err(|_| format!("module \"{name}\": an entry is larger than memory"))?;
                v.resize(n, 0);
                image
                    .read_entry_into(e, given_at(k), &mut v)
                    .map_err(|err| self.read_error(i, caps, err))?;
            }
            early.push(v);
        }
        let inputs: Vec<EntryInput<'_>> = chosen
            .iter()
            .zip(&early)
            .map(|(&i, v)| EntryInput {
                candidate: self.cands[i],
                attrs: self.entries[i].attrs(),
                payload: v,
            })
            .collect();
        let forms = chosen
            .iter()
            .map(|&i| {
                usize::try_from(self.entries[i].raw_len()).map(|len| PayloadForm::Plain { len })
            })
            .collect::<Result<Vec<PayloadForm>, _>>()
            .map_err(|_| format!("module \"{name}\": an entry is larger than memory"))?;
        let (mut buf, ranges) = container::empty_container(&inputs, &forms)
            .map_err(|e| format!("module \"{name}\": {e}"))?;
        for (k, ((&i, r), v)) in chosen.iter().zip(ranges).zip(&early).enumerate() {
            let e = &self.entries[i];
            let out = &mut buf.as_bytes_mut()[r];
            if e.attrs().is_empty() {
                out.copy_from_slice(v);
            } else {
                image
                    .read_entry_into(e, given_at(k), out)
                    .map_err(|err| self.read_error(i, caps, err))?;
            }
            // The label decides which GPU gets these bytes: a cubin must say the same.
            if e.kind() == EntryKind::Sass {
                if let Some(sm) = fatpack_format::elf::cubin_sm(out) {
                    if sm != e.arch() {
                        return Err(format!(
                            "module \"{name}\": the entry stored as {} holds a cubin for sm_{sm}",
                            e.arch_name()
                        ));
                    }
                }
            }
            *bytes += out.len() as u64;
        }
        Ok(buf)
    }

    /// The chosen entries as the store keeps them, for a driver that decodes nvcc's
    /// compressed entries: a zstd frame goes in flagged as nvcc 13 flags its compressed
    /// entries, stored raw content goes in as it is. None when some chosen entry is kept
    /// otherwise (with the store's dictionary, in a solid group, or with no stored header to
    /// flag) or nothing is chosen; else the container and where each entry's stored bytes lie
    /// in it. Nothing is decoded or checked here: the caller checks those very bytes
    /// ([`Plan::build`]) before any kernel of the module can run.
    pub(super) fn handoff(&self, image: &Image, caps: &[u32]) -> Result<Option<Handed>, String> {
        let chosen = self.chosen(caps);
        if chosen.is_empty() {
            return Ok(None);
        }
        let mut forms = Vec::with_capacity(chosen.len());
        let mut stored = Vec::with_capacity(chosen.len());
        for &i in &chosen {
            let e = &self.entries[i];
            let (bytes, _) = image
                .stored_entry(e)
                .map_err(|err| self.read_error(i, caps, err))?;
            let decoded_len = usize::try_from(e.raw_len())
                .map_err(|_| format!("module \"{}\": an entry is larger than memory", self.name))?;
            forms.push(match e.codec() {
                _ if e.attrs().is_empty() => return Ok(None),
                Codec::Zstd => PayloadForm::Zstd {
                    frame_len: bytes.len(),
                    decoded_len,
                },
                Codec::Raw => PayloadForm::Plain { len: bytes.len() },
                _ => return Ok(None),
            });
            stored.push(bytes);
        }
        let inputs: Vec<EntryInput<'_>> = chosen
            .iter()
            .map(|&i| EntryInput {
                candidate: self.cands[i],
                attrs: self.entries[i].attrs(),
                payload: &[],
            })
            .collect();
        let (mut buf, ranges) = container::empty_container(&inputs, &forms)
            .map_err(|e| format!("module \"{}\": {e}", self.name))?;
        for (r, bytes) in ranges.iter().zip(stored) {
            buf.as_bytes_mut()[r.clone()].copy_from_slice(bytes);
        }
        Ok(Some((buf, ranges)))
    }

    /// The message for entry `i` that could not be read.
    fn read_error(&self, i: usize, caps: &[u32], err: ReadError) -> String {
        let e = &self.entries[i];
        match err {
            ReadError::Pack(pack, why) => {
                let who: Vec<String> = caps
                    .iter()
                    .filter(|&&c| self.choice(c) == Some(i))
                    .map(|&c| capability_string(c))
                    .collect();
                let on = if who.is_empty() {
                    String::new()
                } else {
                    format!(" for compute capability {}", who.join(", "))
                };
                // The pack's name says what it holds (`.sm_90.fatpack`): no more formatting
                // in the runtime, which every packed output links. A split package's host
                // says which package holds the pack and how to install it.
                let install = image::install_hint(&pack)
                    .unwrap_or_else(|| "install that pack next to the binary".into());
                format!(
                    "module \"{}\": {}{on} is in pack {}: {why} ({install})",
                    self.name,
                    e.arch_name(),
                    super::sys::show(&pack),
                )
            }
            ReadError::Other(err) => format!(
                "module \"{}\": cannot read {} from the device code store: {err}",
                self.name,
                e.arch_name()
            ),
        }
    }
}

/// A prelinked array element: a stub we must rebuild, or a container we pass on as is.
enum Prelinked {
    Plan(Plan),
    Raw(*const c_void),
}

pub(super) fn fail(e: LoadError) -> Outcome {
    if let Some(m) = e.message() {
        error!("{m}");
    }
    Outcome::Failed(e)
}

/// The plans of a device-linked module's prelinked containers (stubs of other modules, or
/// containers passed on as they are), when some device has no SASS in the linked one.
fn prelinked_plans(
    w: &FatbinWrapper,
    image: &'static Image,
    name: &str,
    jit_caps: &[u32],
    forced: Option<&EntryId>,
) -> Result<Vec<Prelinked>, LoadError> {
    let mut prelinked: Vec<Prelinked> = Vec::new();
    if w.version != 2 || w.filename_or_fatbins.is_null() || jit_caps.is_empty() {
        return Ok(prelinked);
    }
    let arr = w.filename_or_fatbins as *const *const c_void;
    for i in 0..MAX_PRELINKED {
        // SAFETY: a NULL-terminated array built by the device-link stub.
        let p = unsafe { *arr.add(i) };
        if p.is_null() {
            break;
        }
        // SAFETY: each element points at a container or stub in __nv_relfatbin.
        match unsafe { super::stub_at(p.cast()) } {
            None => prelinked.push(Prelinked::Raw(p)),
            Some(Err(e)) => {
                return Err(LoadError::Stub(format!(
                    "module \"{name}\": unreadable prelinked fatpack stub: {e}"
                )))
            }
            Some(Ok(pn)) => {
                let plan = Plan::new(&image.store, &image.origin, pn, jit_caps, forced)
                    .map_err(LoadError::Module)?;
                prelinked.push(Prelinked::Plan(plan));
            }
        }
    }
    Ok(prelinked)
}

/// Logs what each distinct capability gets (or why it gets nothing); returns whether no
/// device can use the module at all.
fn report_choices(
    name: &str,
    devices: &[Device],
    main: &Plan,
    prelinked: &[Prelinked],
    jit_caps: &[u32],
    forced: Option<&EntryId>,
) -> bool {
    let plans = || {
        prelinked.iter().filter_map(|p| match p {
            Prelinked::Plan(p) => Some(p),
            Prelinked::Raw(_) => None,
        })
    };
    // A JIT link needs every prelinked stub module to have something for the device.
    let jit_ok = |cap: u32| !prelinked.is_empty() && plans().all(|p| p.choice(cap).is_some());

    // Refuse only if no device can use the module at all; a device without code then fails
    // in cudart with cudaErrorNoKernelImageForDevice on its own, as an unpacked binary would.
    let fits = |cap: u32| main.choice(cap).is_some() || (jit_caps.contains(&cap) && jit_ok(cap));
    let none_fit = devices.iter().all(|d| !fits(d.cap));
    // One report per distinct capability (what is chosen depends on nothing else), naming
    // the devices that have it: two identical GPUs are one choice, not two.
    let mut groups: Vec<(u32, Vec<i32>)> = Vec::new();
    for d in devices {
        match groups.iter_mut().find(|g| g.0 == d.cap) {
            Some(g) => g.1.push(d.ordinal),
            None => groups.push((d.cap, vec![d.ordinal])),
        }
    }
    for (cap, ordinals) in &groups {
        let cap = *cap;
        let on = format!(
            "compute capability {} ({} {})",
            capability_string(cap),
            if ordinals.len() == 1 {
                "device"
            } else {
                "devices"
            },
            ordinals
                .iter()
                .map(|o| o.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !fits(cap) {
            let why = match forced {
                Some(f) => format!("it has no {} (forced by FATPACK_ARCH)", f.name()),
                None => "nothing in it runs there".to_owned(),
            };
            let msg = format!(
                "module \"{name}\" has no device code for {on}, sm_{cap}: {why}; available: {}",
                main.available()
            );
            if none_fit {
                error!("{msg}");
            } else {
                warn!("{msg}");
            }
            continue;
        }
        let jit = jit_caps.contains(&cap) && !prelinked.is_empty();
        let what = match (main.choice(cap), jit) {
            (Some(i), false) => main.cands[i].name(),
            (Some(i), true) => format!("{} + prelinked JIT inputs", main.cands[i].name()),
            (None, _) => "prelinked JIT inputs".to_owned(),
        };
        info!("module {name}: {on}: {what}");
        for p in plans().filter(|_| jit) {
            if let Some(i) = p.choice(cap) {
                info!(
                    "module {name}: prelinked {}: {} for {on}",
                    p.name,
                    p.cands[i].name()
                );
            }
        }
        if let (Some(f), Some(i)) = (forced, main.choice(cap)) {
            if !select::runs_on(&main.cands[i], cap) {
                warn!(
                    "module {name}: FATPACK_ARCH={} does not run on {on}; cudart will refuse it",
                    f.name()
                );
            }
        }
    }
    none_fit
}

/// The module's container for `caps` and the prelinked containers for the devices that
/// JIT-link (`jit_caps`), decoded and checked; `bytes` counts what was decompressed. The
/// list holds a pointer to each prelinked container, in order (its null end is the
/// caller's). Inlined: the runtime's code is what it was before this was a function of its
/// own (a new function section in the runtime shifted the layout of every packed output).
#[allow(clippy::type_complexity)]
#[inline(always)]
fn decode(
    main: &Plan,
    prelinked: &[Prelinked],
    image: &Image,
    (caps, jit_caps): (&[u32], &[u32]),
    bytes: &mut u64,
) -> Result<(Aligned, Vec<Aligned>, Vec<*const c_void>), LoadError> {
    let main_buf = main
        .build(image, caps, None, bytes)
        .map_err(LoadError::Module)?;
    let mut bufs = Vec::new();
    let mut array: Vec<*const c_void> = Vec::new();
    for p in prelinked {
        match p {
            Prelinked::Raw(ptr) => array.push(*ptr),
            Prelinked::Plan(plan) => {
                let b = plan
                    .build(image, jit_caps, None, bytes)
                    .map_err(LoadError::Module)?;
                array.push(b.as_ptr().cast());
                bufs.push(b);
            }
        }
    }
    Ok((main_buf, bufs, array))
}

/// Registers `wrapper` with cudart and replays the module's recorded registrations under
/// the handle it gives.
///
/// # Safety
/// The wrapper and what it points to must stay while cudart may use them.
pub(super) unsafe fn register(wrapper: &mut FatbinWrapper, inner: &Inner) -> Handle {
    let _c = lock(&CUDART_LOCK);
    // SAFETY: the caller keeps the wrapper alive; the replayed arguments are nvcc's own.
    unsafe {
        let h = abi::real_register(wrapper);
        for r in &inner.regs {
            abi::replay(h, r);
        }
        if inner.ended {
            abi::real_register_end(h);
        }
        h
    }
}

/// The wrapper cudart is given for `main` and the prelinked containers in `array` (none:
/// version 1; some: version 2, the array null-terminated here).
fn wrapper_for(main: &Aligned, array: &mut Vec<*const c_void>) -> Box<FatbinWrapper> {
    let use_prelinked = !array.is_empty();
    if use_prelinked {
        array.push(core::ptr::null());
    }
    Box::new(FatbinWrapper {
        magic: WRAPPER_MAGIC,
        version: if use_prelinked { 2 } else { 1 },
        data: main.as_ptr().cast(),
        filename_or_fatbins: if use_prelinked {
            array.as_mut_ptr().cast()
        } else {
            core::ptr::null_mut()
        },
    })
}

/// Loads module `m`, whose use of host address `first_use` (null when none) asks for it.
pub(crate) fn load(m: &'static Module, inner: &Inner, first_use: *const c_void) -> Outcome {
    let t0 = super::sys::now_us();
    let name = match &m.name {
        Ok(n) => *n,
        Err(e) => return fail(LoadError::Stub(format!("unreadable fatpack stub: {e}"))),
    };
    let devices: &'static [Device] = match driver::devices() {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => {
            debug!("module {name}: no CUDA device; leaving the error to cudart");
            return Outcome::Deferred;
        }
        Err(e) => {
            debug!("module {name}: {e}; leaving the error to cudart");
            return Outcome::Deferred;
        }
    };
    let forced = match forced_arch() {
        Ok(f) => f,
        Err(e) => return fail(LoadError::ForcedArch(e)),
    };
    let image = match image::get() {
        Ok(i) => i,
        Err(e) => {
            return fail(LoadError::Store(format!(
                "cannot load device code of module \"{name}\": {e}"
            )))
        }
    };
    let store: &'static Store<'static> = &image.store;
    let caps = driver::distinct_caps(devices);

    let main = match Plan::new(store, &image.origin, name, &caps, forced.as_ref()) {
        Ok(p) => p,
        Err(e) => return fail(LoadError::Module(e)),
    };

    // SAFETY: the wrapper is nvcc's static data, as registered.
    let w = unsafe { &*m.wrapper };
    // Device-linked (-rdc) modules: cudart JIT-links the prelinked relocatable containers
    // when the linked one has no SASS for a device, so those are needed only then.
    let jit_caps: Vec<u32> = caps.iter().copied().filter(|&c| !main.is_sass(c)).collect();
    let prelinked = match prelinked_plans(w, image, name, &jit_caps, forced.as_ref()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let none_fit = report_choices(name, devices, &main, &prelinked, &jit_caps, forced.as_ref());
    if none_fit {
        return fail(LoadError::NoDeviceFits);
    }

    let mut bytes = 0u64;
    let t_decode = super::sys::now_us();
    // Decoded ahead (ahead.rs) for the same choice: nothing left to decode. Taken (or the
    // helper kept off the module) in every case, so the module is decoded once.
    let ahead = m
        .ahead
        .take()
        .filter(|d| prelinked.is_empty() && d.chosen == main.chosen(&caps));
    let how = ahead.as_ref().map_or("decompressed", |_| "decoded ahead");
    // A driver that decodes nvcc's compressed entries is handed the stored frames, checked
    // beside it; what it refuses arrives decoded and checked.
    let decoded_beside = if let Some(d) = ahead {
        bytes = d.bytes;
        Some(d.buf)
    } else if prelinked.is_empty() {
        match handoff::hand_to_driver(inner, name, &main, image, &caps, first_use) {
            Handoff::NotTried => None,
            Handoff::Done(outcome) => return outcome,
            Handoff::Refused(buf, n) => {
                bytes = n;
                Some(buf)
            }
        }
    } else {
        None
    };
    let (main_buf, bufs, mut array) = match decoded_beside {
        Some(buf) => (buf, Vec::new(), Vec::new()),
        None => match decode(&main, &prelinked, image, (&caps, &jit_caps), &mut bytes) {
            Ok(built) => built,
            Err(e) => return fail(e),
        },
    };
    let mut wrapper = wrapper_for(&main_buf, &mut array);
    let t_cudart = super::sys::now_us();
    // SAFETY: the wrapper and everything it points to live in `Loaded`, which is never freed
    // while cudart may use it.
    let handle = unsafe { register(&mut wrapper, inner) };
    let t_end = super::sys::now_us();
    // The split says where a first launch's time goes: finding the store and the devices
    // (once per process), decoding and checking, and cudart taking the container.
    info!(
        "module {name}: registered {} entr{} ({} bytes {how}) in {} ms (set-up {}, \
         decode and check {}, cudart {})",
        main.chosen(&caps).len(),
        if main.chosen(&caps).len() == 1 {
            "y"
        } else {
            "ies"
        },
        bytes,
        super::sys::Millis(t_end - t0),
        super::sys::Millis(t_decode - t0),
        super::sys::Millis(t_cudart - t_decode),
        super::sys::Millis(t_end - t_cudart)
    );
    Outcome::Loaded(Loaded {
        handle,
        _wrapper: wrapper,
        _main: main_buf,
        _prelinked: bufs,
        _array: array,
    })
}
