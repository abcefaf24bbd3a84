# fatpack as a Nix package: the CLI, which carries its runtime archive (build.rs builds it,
# the same recipe as every other build), and a setup hook (./setup-hook.sh) that makes every
# link of a derivation with fatpack in nativeBuildInputs go through `fatpack ld`.
# Never built by Nix here: see README.md for what is checked.
#   fatpack = pkgs.callPackage ./nix/fatpack.nix { };
{ lib, rustPlatform }:

rustPlatform.buildRustPackage {
  pname = "fatpack";
  version = "0.1.0";

  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../build.rs
      ../src
      ../format
      ../cubin-store
      ../runtime
      ../rt-sources
      ../benches
      ../linker-scripts
    ];
  };
  cargoLock.lockFile = ../Cargo.lock;

  # build.rs runs a nested `cargo build -p fatpack-rt --profile rt` in a small workspace of
  # its own under target/ (vendored sources, as cargoSetupHook configures them) and strips it with stdenv's objcopy.
  cargoBuildFlags = [ "-p" "fatpack" ];

  # The tests need nvcc 13 and its fixtures (scripts/test.sh); not run in the sandbox.
  doCheck = false;

  # fixupPhase installs the hook as $out/nix-support/setup-hook, with @fatpack@ replaced
  # by the value of the `fatpack` attribute: this package's own output.
  setupHook = ./setup-hook.sh;
  fatpack = placeholder "out";

  meta = {
    description = "Capability-aware fat-binary packager and linker wrapper for CUDA";
    license = with lib.licenses; [ mit asl20 ];
    # Both link and carry a runtime for their own machine; cross links need FATPACK_RUNTIME.
    platforms = [ "x86_64-linux" "aarch64-linux" ];
    mainProgram = "fatpack";
  };
}
