//! Which route a link takes ([`super::options::Route`]): direct where the linker takes the
//! tail script and the inputs hold no more device code than other bytes, copy otherwise.

use super::options::Route;
use super::plan::Planned;
use super::session::Session;
use super::LinkError;

impl Session {
    /// Whether this link takes the direct route ([`Route`]): the tail script for its
    /// linker, or why not.
    pub(super) fn route_for(&self, planned: &[Planned]) -> Result<&'static str, String> {
        match self.opts.route {
            Route::Copy => return Err("--fatpack-route=copy".into()),
            Route::Direct => {}
            Route::Auto => {
                let (device, other) = device_and_other_bytes(planned);
                if device > other {
                    return Err(format!(
                        "the inputs with device code hold more of it ({device} bytes) than \
                         other bytes ({other}), so copying them writes less than linking them \
                         as given"
                    ));
                }
            }
        }
        self.direct_script()
            .map_err(|why| format!("the direct route is not for this link: {why}"))
    }

    /// Whether this link can take the direct route: the tail script for its linker, or
    /// why not.
    pub(super) fn direct_script(&self) -> Result<&'static str, String> {
        if !self.line.scripts.is_empty() {
            return Err("the line gives its own linker script".into());
        }
        super::tail::script_for(&self.real).map_err(|e| match e {
            LinkError::TailUnsupported { linker, why } => format!("{linker} {why}"),
            e => e.to_string(),
        })
    }
}

/// The bytes of device code in the planned inputs, and their other bytes (what the copy
/// route writes: an archive is copied whole, its containers replaced by stubs).
pub(super) fn device_and_other_bytes(planned: &[Planned]) -> (u64, u64) {
    let (mut device, mut other) = (0u64, 0u64);
    for p in planned {
        let d: u64 = p.sections.iter().flat_map(|s| &s.spans).map(|s| s.1).sum();
        let len = std::fs::metadata(&p.path).map_or(d, |m| m.len());
        device += d;
        other += len.saturating_sub(d);
    }
    (device, other)
}
