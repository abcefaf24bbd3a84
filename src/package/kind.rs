//! The package layer's registry: [`PackageKind`], the one decision of what a path is, and
//! the format each kind is ([`PackageFormat`], format.rs; each format's module implements
//! it: folder.rs, wheel.rs, conda.rs, deb.rs, each with its split beside it). `fatpack
//! prune`, `split`, `inspect` and the package readers dispatch here and nowhere else, so
//! adding a format is one module implementing [`PackageFormat`] and one line of [`kinds!`]
//! below.

use std::path::Path;

use super::format::{EachBinary, PackageFormat};
use super::Options;
use crate::commit::Outputs;
use crate::prune::{PruneError, PruneReport, Selection};

/// [`PackageKind`], its cases in the order a path is tried against them, and the format
/// each case is: one line per format.
macro_rules! kinds {
    ($($(#[$m:meta])* $kind:ident => $format:expr),+ $(,)?) => {
        /// What kind of package a path is.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum PackageKind {
            $($(#[$m])* $kind),+
        }

        impl PackageKind {
            /// Every kind, in the order a path is tried against them.
            pub const ALL: &'static [PackageKind] = &[$(PackageKind::$kind),+];

            /// The format this kind is.
            pub fn format(self) -> &'static dyn PackageFormat {
                match self {
                    $(PackageKind::$kind => &$format),+
                }
            }
        }
    };
}

kinds! {
    /// A folder: an installed prefix, a Nix output, a conda package's files.
    Folder => super::folder::Folder,
    /// A Python wheel.
    Wheel => super::wheel::Wheel,
    /// A Debian package.
    Deb => super::deb::Deb,
    /// A conda package, `.conda` or `.tar.bz2`.
    Conda => super::conda::Conda,
}

impl PackageKind {
    /// What kind of package `path` is, if one.
    pub fn of(path: &Path) -> Option<PackageKind> {
        PackageKind::ALL
            .iter()
            .copied()
            .find(|k| k.format().claims(path))
    }

    /// For messages: `folder`, `wheel`, `conda package`, `Debian package`.
    pub fn name(self) -> &'static str {
        self.format().name()
    }
}

/// Calls `f(name in the package, file)` for every ELF file or archive in the package `input`
/// (nothing if it is none), in the package's order; `scratch` holds what is spooled.
pub fn for_each_binary(input: &Path, scratch: &Path, f: EachBinary<'_>) -> Result<(), PruneError> {
    match PackageKind::of(input) {
        Some(kind) => kind.format().for_each_binary(input, scratch, f),
        None => Ok(()),
    }
}

/// `input` pruned as a package of `format`, after the checks every format shares.
pub(super) fn prune_as(
    format: &dyn PackageFormat,
    input: &Path,
    output: &Path,
    sel: &Selection,
    opts: &Options,
    outs: Outputs,
) -> Result<PruneReport, PruneError> {
    if !opts.relocate.is_empty() && !format.rewrites_paths() {
        return Err(PruneError::Package {
            path: input.to_path_buf(),
            message: "--replace-path rewrites a folder's files or a file; not a package's".into(),
        });
    }
    format.prune(input, output, sel, opts, outs)
}
