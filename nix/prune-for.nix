# A cached all-capability build, reduced for one machine's GPUs without recompiling:
#
#   pruneFor = pkgs.callPackage ./nix/prune-for.nix { fatpack = pkgs.callPackage ./nix/fatpack.nix { }; };
#   magma-h100 = pruneFor pkgs.magma { cudaCapabilities = [ "9.0" ]; };
#
# The result has the same name and outputs as the package; each output is
# `fatpack prune --for CAPS` of the original output (a folder, or a single file): every ELF
# file with device code keeps, per module, what GPUs of those capabilities run (the
# runtime's own selection: `a`/`f` variants and the PTX they would JIT included), packed
# binaries' side-file stores are written anew, symlinks, hard links and modes stay. Every
# output's original store path is replaced by its new one in every file and symlink
# (`--replace-path`, same-length store paths), so the unpruned package is not kept alive.
# Evaluated with Nix 2.8 against a stand-in for nixpkgs (tests/nix/); the command it runs is
# run by the test suite on a package-like tree.
{ lib, runCommand, fatpack }:

pkg: { cudaCapabilities }:

let
  outputs = pkg.outputs or [ "out" ];
  caps = lib.concatStringsSep "," cudaCapabilities;
  # OLD=NEW for every output: references between outputs follow too.
  relocate = lib.concatMapStrings (o: " --replace-path ${pkg.${o}}=\"\$${o}\"") outputs;
in
assert lib.assertMsg (cudaCapabilities != [ ]) "pruneFor: cudaCapabilities is empty";
runCommand pkg.name
  {
    inherit outputs;
    nativeBuildInputs = [ fatpack ];
    passthru = (pkg.passthru or { }) // {
      unpruned = pkg;
      inherit cudaCapabilities;
    };
    meta = pkg.meta or { };
  }
  (lib.concatMapStrings
    (o: ''
      fatpack prune --for ${lib.escapeShellArg caps}${relocate} ${pkg.${o}} -o "''$${o}"
    '')
    outputs)
