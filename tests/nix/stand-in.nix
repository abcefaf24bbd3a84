# A minimal stand-in for the parts of nixpkgs that nix/prune-for.nix uses, so that Nix can
# evaluate it here (a full nixpkgs cannot be fetched). `runCommand` returns what it was given
# instead of a derivation.
rec {
  lib = {
    concatStringsSep = builtins.concatStringsSep;
    concatMapStrings = f: l: builtins.concatStringsSep "" (map f l);
    escapeShellArg = s: "'" + builtins.replaceStrings [ "'" ] [ "'\\''" ] s + "'";
    assertMsg = pred: msg: if pred then true else builtins.throw msg;
  };
  runCommand = name: env: buildCommand: env // { inherit name buildCommand; };
  fatpack = "/nix/store/00000000000000000000000000000000-fatpack-0.1.0";
  python3 = "/nix/store/11111111111111111111111111111111-python3-3.12";
  # A package with two outputs, as a cached all-capability build would be.
  pkg = {
    name = "magma-2.9.0";
    outputs = [ "out" "dev" ];
    out = "/nix/store/22222222222222222222222222222222-magma-2.9.0";
    dev = "/nix/store/33333333333333333333333333333333-magma-2.9.0-dev";
    passthru = { cudaSupport = true; };
  };
  pruneFor = import ../../nix/prune-for.nix { inherit lib runCommand fatpack; };
  pruned = pruneFor pkg { cudaCapabilities = [ "8.9" "9.0" ]; };
}
