# fatpack as a Nix package: the CLI, its runtime archive where the CLI looks for it
# ($out/lib/fatpack/libfatpack_rt.a), and a setup hook (./setup-hook.sh) that makes every
# link of a derivation with fatpack in nativeBuildInputs go through `fatpack ld`.
# Written without Nix at hand and never built: see README.md.
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
      ../src
      ../cubin-store
      ../runtime
      ../benches
      ../linker-scripts
    ];
  };
  cargoLock.lockFile = ../Cargo.lock;

  cargoBuildFlags = [ "-p" "fatpack" ];
  # The runtime archive, built as scripts/build.sh does it (size-optimised `rt` profile).
  postBuild = ''
    cargo build --offline --locked --profile rt -p fatpack-rt
  '';
  postInstall = ''
    install -Dm644 target/rt/libfatpack_rt.a $out/lib/fatpack/libfatpack_rt.a
    objcopy --strip-debug $out/lib/fatpack/libfatpack_rt.a
  '';

  # The tests need nvcc 13 and its fixtures (scripts/test.sh); not run in the sandbox.
  doCheck = false;

  # fixupPhase installs the hook as $out/nix-support/setup-hook, with @fatpack@ replaced
  # by the value of the `fatpack` attribute: this package's own output.
  setupHook = ./setup-hook.sh;
  fatpack = placeholder "out";

  meta = {
    description = "Capability-aware fat-binary packager and linker wrapper for CUDA";
    license = with lib.licenses; [ mit asl20 ];
    platforms = [ "x86_64-linux" ];
    mainProgram = "fatpack";
  };
}
