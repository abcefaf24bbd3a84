# examples/cmake built by Nix with every link through fatpack: the only fatpack-specific
# line is fatpack in nativeBuildInputs. Never built by Nix here (see
# README.md).   nix-build nix/example.nix
{ pkgs ? import <nixpkgs> { config.allowUnfree = true; } }:

let
  fatpack = pkgs.callPackage ./fatpack.nix { };
  inherit (pkgs) cudaPackages;
in
cudaPackages.backendStdenv.mkDerivation {
  pname = "fatpack-cmake-example";
  version = "0.1.0";
  src = ../examples/cmake;

  nativeBuildInputs = [ pkgs.cmake cudaPackages.cuda_nvcc fatpack ];
  buildInputs = [ cudaPackages.cuda_cudart ];

  cmakeFlags = [
    "-DCMAKE_CUDA_ARCHITECTURES=75;80;86;90"
    "-DCMAKE_CUDA_RUNTIME_LIBRARY=Shared"
  ];

  # Options for `fatpack ld`, as -Wl,<flag> on link lines only. The example's kernels are
  # under the 512 KiB of device code from which `fatpack ld` packs by default: ask for it.
  fatpackFlags = [ "--fatpack-mode=packed" ];
  # fatpackFlags = [ "--fatpack-mode=packed" "--fatpack-side-file" ];   # then install the .fatpack files too
  # dontUseFatpack = true;                       # switch it off without editing inputs

  # No GPU in the sandbox: the demo takes its host-only path ("ok (no GPU)").
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    fatpack inspect $out/lib/libvecops.so $out/bin/vecops_demo | grep -c "packed by fatpack" | grep -qx 2
    $out/bin/vecops_demo
    runHook postInstallCheck
  '';
}
