//! `fatpack inspect`: what device code a file holds, as a table or JSON.

mod file;
mod files;
mod package;
mod report;
mod store;
mod table;

pub use file::inspect_path;
pub use files::{inspect_files, Inspection, Problem, Request};
pub use package::{inspect_package, kept_entries, summary, would_keep};
pub use report::{
    ArchTotal, EntryReport, FileReport, InspectError, ModuleReport, Totals, WouldKeep,
};
pub use table::{render, render_package, render_would_keep};

/// `_ZN2ns4axpyIfEEvT_PKS1_PS1_i` → `void ns::axpy<float>(float, float const*, float*, int)`;
/// names that are not Itanium-mangled come back as they are.
pub fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}
