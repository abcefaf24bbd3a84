//! What a package format provides ([`PackageFormat`]): the seam every format's module
//! implements and the registry (kind.rs) dispatches through. Below the formats: it names
//! none of them.

use std::path::Path;

use super::split::PackageSplit;
use super::{Effort, Options};
use crate::commit::Outputs;
use crate::prune::{PruneError, PruneReport, Selection};

/// Called with each binary of a package: its name in the package and a file holding it.
pub type EachBinary<'a> = &'a mut dyn FnMut(&str, &Path) -> Result<(), PruneError>;

/// What a package format provides: it is recognised, read (each binary, for inspect),
/// pruned and split, each checked against the package's own manifest and written whole or
/// not at all.
pub trait PackageFormat: Sync {
    /// For messages: `folder`, `wheel`, `conda package`, `Debian package`.
    fn name(&self) -> &'static str;

    /// Whether `path` is a package of this format (by its name; a folder by being one).
    fn claims(&self, path: &Path) -> bool;

    /// Whether it takes `--replace-path` (a folder's files are rewritten byte for byte; a
    /// package's manifest would no longer vouch for them).
    fn rewrites_paths(&self) -> bool {
        false
    }

    /// `input` pruned into `output` (a file, or a folder to write it into).
    fn prune(
        &self,
        input: &Path,
        output: &Path,
        sel: &Selection,
        opts: &Options,
        outs: Outputs,
    ) -> Result<PruneReport, PruneError>;

    /// `input`'s packed binaries split into a host package and device packages in `into`.
    fn split(&self, input: &Path, into: &Path, effort: Effort) -> Result<PackageSplit, PruneError>;

    /// Calls `f` for every ELF file or archive in `input`, in the package's order;
    /// `scratch` holds what is spooled.
    fn for_each_binary(
        &self,
        input: &Path,
        scratch: &Path,
        f: EachBinary<'_>,
    ) -> Result<(), PruneError>;
}
