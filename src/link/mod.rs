//! The final link: `fatpack ld`, the glue object, and work on the linked output.

pub mod glue;
pub mod output;
