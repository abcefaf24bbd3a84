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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static PRUNED: AtomicUsize = AtomicUsize::new(0);

    /// A format that is one implementation and nothing else, as a new module would be.
    struct Fake;

    impl PackageFormat for Fake {
        fn name(&self) -> &'static str {
            "fake package"
        }

        fn claims(&self, path: &Path) -> bool {
            path.extension().is_some_and(|e| e == "fake")
        }

        fn prune(
            &self,
            _: &Path,
            _: &Path,
            _: &Selection,
            _: &Options,
            _: Outputs,
        ) -> Result<PruneReport, PruneError> {
            PRUNED.fetch_add(1, Ordering::SeqCst);
            Ok(PruneReport::default())
        }

        fn split(
            &self,
            input: &Path,
            _: &Path,
            _: crate::package::Effort,
        ) -> Result<crate::package::split::PackageSplit, PruneError> {
            Err(PruneError::Package {
                path: input.to_path_buf(),
                message: "not split".into(),
            })
        }

        fn for_each_binary(
            &self,
            input: &Path,
            _: &Path,
            f: EachBinary<'_>,
        ) -> Result<(), PruneError> {
            f("lib/libfake.so", input)
        }
    }

    /// What every format shares happens in the layer, not in the format: `--replace-path`
    /// refused for a package, the prune forwarded otherwise; the binaries it lists reach
    /// the caller.
    #[test]
    fn a_format_is_one_implementation_of_the_seam() {
        let input = Path::new("x-1.0.fake");
        assert!(Fake.claims(input) && !Fake.claims(Path::new("x.whl")));
        let sel = Selection::Dead;
        let relocating = Options {
            relocate: crate::prune::Relocate::parse(&["/a=/b".into()]).unwrap(),
            ..Options::default()
        };
        let outs = || Outputs::new(&[input]);
        let err = prune_as(&Fake, input, Path::new("out"), &sel, &relocating, outs());
        assert!(
            matches!(err, Err(PruneError::Package { .. })),
            "--replace-path reached the format"
        );
        assert_eq!(PRUNED.load(Ordering::SeqCst), 0);
        let ok = prune_as(
            &Fake,
            input,
            Path::new("out"),
            &sel,
            &Options::default(),
            outs(),
        );
        assert!(ok.is_ok());
        assert_eq!(PRUNED.load(Ordering::SeqCst), 1);
        let mut seen = Vec::new();
        Fake.for_each_binary(input, Path::new("/nonexistent"), &mut |name, _| {
            seen.push(name.to_string());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, ["lib/libfake.so"]);
    }

    /// Each kind is its format, and a path is the first kind that claims it: a folder named
    /// like a wheel is a folder.
    #[test]
    fn a_path_is_the_first_kind_that_claims_it() {
        let dir = tempfile::tempdir().unwrap();
        let whl_dir = dir.path().join("x-1.0-py3-none-any.whl");
        std::fs::create_dir(&whl_dir).unwrap();
        for (path, kind) in [
            (dir.path().to_path_buf(), PackageKind::Folder),
            (whl_dir, PackageKind::Folder),
            (
                dir.path().join("y-1.0-py3-none-any.whl"),
                PackageKind::Wheel,
            ),
            (dir.path().join("x_1.0-1_amd64.deb"), PackageKind::Deb),
            (dir.path().join("x-1.0-h0_0.conda"), PackageKind::Conda),
            (dir.path().join("x-1.0-h0_0.tar.bz2"), PackageKind::Conda),
        ] {
            assert_eq!(PackageKind::of(&path), Some(kind), "{}", path.display());
            assert_eq!(kind.name(), kind.format().name());
        }
        assert_eq!(PackageKind::of(&dir.path().join("libx.so")), None);
        assert_eq!(PackageKind::ALL.len(), 4);
    }
}
