//! Rewritten inputs: objects whose fatbins are replaced by stubs, and archives holding them.

pub mod archive;
pub mod object;

pub use object::{rewrite_object, rewrite_object_parts, Extracted, RewriteError};
