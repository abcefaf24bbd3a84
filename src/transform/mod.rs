//! The device-code transforms of a linked file, planned over the scan of its device code
//! ([`crate::inputs`]) and its parsed headers ([`crate::elf`]), checked, then written; a layer
//! above both, which neither imports:
//! - [`cut`]: a linked file's device code packed together and the file cut short (prune's
//!   cut; the link's direct route, in the file itself);
//! - [`in_place`]: containers rewritten where they are, freed bytes zeroed.
//!
//! Commands decide *what* becomes of each container (prune's selection, the link's stubs);
//! this layer decides *how* the file changes and checks that it still holds together.

pub mod cut;
mod error;
pub mod in_place;

pub use error::TransformError;

use crate::inputs::DeviceSection;

/// What becomes of container `index` of a device section (whose bytes are given): its new
/// bytes, never more than it had. The caller's error type `E` carries its own refusals.
/// Both transforms take it: the cut for the containers it moves, [`in_place`] for those it
/// rewrites where they are.
pub type Replace<'a, E> = dyn FnMut(&DeviceSection, usize, &[u8]) -> Result<Vec<u8>, E> + 'a;
