# A cached all-capability build, reduced for one machine's GPUs without recompiling:
#
#   pruneFor = pkgs.callPackage ./nix/prune-for.nix { fatpack = pkgs.callPackage ./nix/fatpack.nix { }; };
#   magma-h100 = pruneFor pkgs.magma { cudaCapabilities = [ "9.0" ]; };
#
# The result has the same name and outputs as the package; each output is a copy in which
# every ELF file with device code keeps, per module, what GPUs of those capabilities run
# (`fatpack prune --for`, the runtime's own selection: `a`/`f` variants and the PTX they
# would JIT included). References to the original outputs are rewritten to the new ones
# (same-length store paths), so the unpruned package is not kept alive. The step itself is
# ./prune-tree.sh (tested without Nix); this function was evaluated with Nix 2.8 against a
# stand-in for nixpkgs (tests/nix/), not built in a real nixpkgs.
{ lib, runCommand, fatpack, python3 }:

pkg: { cudaCapabilities }:

let
  outputs = pkg.outputs or [ "out" ];
  caps = lib.concatStringsSep "," cudaCapabilities;
in
assert lib.assertMsg (cudaCapabilities != [ ]) "pruneFor: cudaCapabilities is empty";
runCommand pkg.name
  {
    inherit outputs;
    nativeBuildInputs = [ fatpack python3 ];
    passthru = (pkg.passthru or { }) // {
      unpruned = pkg;
      inherit cudaCapabilities;
    };
    meta = pkg.meta or { };
  }
  (lib.concatMapStrings
    (o: ''
      bash ${./prune-tree.sh} ${pkg.${o}} ''${${o}} ${lib.escapeShellArg caps}
    '')
    outputs)
