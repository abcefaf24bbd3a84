# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_fatpack_global_optspecs
    string join \n h/help V/version
end

function __fish_fatpack_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_fatpack_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_fatpack_using_subcommand
    set -l cmd (__fish_fatpack_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c fatpack -n "__fish_fatpack_needs_command" -s h -l help -d 'Print help'
complete -c fatpack -n "__fish_fatpack_needs_command" -s V -l version -d 'Print version'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "inspect" -d 'Show the device code inside any file'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "prune" -d 'Keep only the archs some GPUs run, without relinking'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "repack" -d 'Compress a packed output\'s store again, without relinking'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "split" -d 'Split a packed output, or a package of them, into host and per-GPU parts'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "index" -d 'Write package indexes for a fat wheel and its pruned variants'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "join" -d 'Join a split binary and its packs back into one packed binary'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "extract" -d 'Write device code as files cuobjdump and nvdisasm read'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "run" -d 'Run a build with fatpack as the linker of every compiler driver in it'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "man" -d 'Print the man page (roff), or install it and the completions'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "completions" -d 'Print shell completions to standard output'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "ld" -d 'Link like `ld`, packing all device code into a store'
complete -c fatpack -n "__fish_fatpack_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c fatpack -n "__fish_fatpack_using_subcommand inspect" -l for -d 'Also say what `fatpack prune --for CAPS` would keep of each file and package (the same selection, nothing written)' -r -f
complete -c fatpack -n "__fish_fatpack_using_subcommand inspect" -l kernels -d 'List kernel names (demangled) under each entry'
complete -c fatpack -n "__fish_fatpack_using_subcommand inspect" -l json -d 'Print JSON (an array with one report per file) instead of a table'
complete -c fatpack -n "__fish_fatpack_using_subcommand inspect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l keep -l arch -l gpu-architecture -d 'Exact targets to keep: `sm_80,sm_90,compute_90`, or CMake style `80;90` / `80-real;90-virtual`. --arch is nvprune\'s and cuobjdump\'s word for it' -r -f
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l for -d 'Keep, per module, what the runtime would run on GPUs of these compute capabilities: `8.9,9.0`, `89;90`, `sm_89`, `90a-real` (a/f variants and the PTX a GPU would JIT included); `compute_90` or `90-virtual` keeps the PTX a 9.0 GPU would JIT, for newer GPUs; `9.0+PTX` both' -r -f
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l compression -d 'A conda or Debian package: how hard its rewritten archives are compressed, in the input\'s own codec. `fast` (default): zstd 12, xz 0, gzip 6 on every core, within about twice a wheel\'s time; `best`: the packaging tools\' defaults (zstd 19, xz 6, gzip 9), 1-3% smaller and 3-5 times slower. Either gives the same bytes on every machine' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l replace-path -d 'A folder: replace OLD by NEW (the same length) in every file and symlink target, byte for byte, as Nix needs when an output is copied to its new store path. Repeatable' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -s o -l output -d 'What to write: for a file, the new file; for a folder, the new folder (it must not exist); for a wheel, conda or Debian package, whose name carries its version and label, the folder to write it into (made if missing), or that exact name' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l dead -d 'Drop only the entries no GPU would ever load (shadowed in their module by a better one for every GPU that could run them): every GPU keeps running what it ran'
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l allow-empty -d 'With --keep: allow a module to be left with no entry at all (by default that is refused: its kernels could not run anywhere)'
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l local-label -d 'A wheel: record the GPUs in the version\'s local label (`1.0+cu130.sm90`) instead of writing a PEP 817/825 variant wheel (`...-linux_x86_64-sm90.whl` with `variant.json`). For per-variant indexes only (`fatpack index`): pip ranks a local label above the plain version and `==1.0` matches it, so such a wheel beside the fat one is what every machine gets'
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -l json -d 'Print the report as JSON on standard output (for scripts), instead of lines on standard error'
complete -c fatpack -n "__fish_fatpack_using_subcommand prune" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand repack" -s o -l output -d 'The new file to write' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand repack" -l level -d 'zstd level, 1-22 (negative: the fast modes)' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand repack" -l group-mib -d 'With --release: raw MiB per group (what a first load decodes at most; default 8: larger is smaller and slower to load)' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand repack" -l group-by -d 'With --release: group by `family` (sm_80/86/89 together) or by `arch`' -r -f -a "family\t''
arch\t''"
complete -c fatpack -n "__fish_fatpack_using_subcommand repack" -l release -d 'A release store: the entries of one GPU family in solid groups (one zstd frame each, module order), what they repeat stored once; a first load decodes its group up to the module it needs'
complete -c fatpack -n "__fish_fatpack_using_subcommand repack" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand split" -l into -d 'The folder to write into (made if missing; for a folder\'s split, it must not exist)' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand split" -l compression -d 'A conda or Debian package: how hard the packages written are compressed (as prune\'s)' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand split" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand index" -s o -l output -d 'The new folder to write the indexes into (must not exist)' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand index" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand join" -s o -l output -d 'The new file to write: the joined binary' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand join" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand extract" -s o -l output -d 'The folder to write into (made if missing)' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand extract" -l arch -l keep -d 'Only these targets: `sm_90,compute_90`, or CMake style `90`, `90a-real`. --keep is prune\'s word for it' -r -f
complete -c fatpack -n "__fish_fatpack_using_subcommand extract" -l fatbin -d 'One uncompressed fatbin per module instead of one file per entry'
complete -c fatpack -n "__fish_fatpack_using_subcommand extract" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand man" -l prefix -d 'With --install: where (default: the folder above the one fatpack runs from)' -r -F
complete -c fatpack -n "__fish_fatpack_using_subcommand man" -l install -d 'Install the man pages and completions under PREFIX/share instead of printing'
complete -c fatpack -n "__fish_fatpack_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-level -d 'zstd level 1-22 (default 9; NVIDIA\'s zstd frames kept as they are)' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-mode -d 'auto: packed from 512 KiB of device code; packed: always; tail: after .bss' -r -f -a "auto\t''
packed\t''
tail\t''"
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-threads -d 'at most N threads (or FATPACK_THREADS; under make, its jobserver)' -r
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-route -d 'direct: link inputs as given, stub the output; copy: link stubbed copies' -r -f -a "auto\t''
direct\t''
copy\t''"
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-early-link -d 'start the direct route\'s link before the scan has read the inputs' -r -f -a "auto\t''
yes\t''
no\t''"
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-fork -d 'end when the output is in place; a child frees memory (auto: 64 MiB in)' -r -f -a "auto\t''
yes\t''
no\t''"
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-side-file -d 'the store in <output>.fatpack beside the output, not inside it'
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-verbose -d 'what was packed; time and memory per step (or FATPACK_VERBOSE=1)'
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-save-temps -d 'keep rewritten inputs and the ld line in <output>.fatpack-temps/'
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-dry-run -d 'print the rewrite and the real linker\'s line; write nothing'
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -l fatpack-release -d 'a release store as `fatpack repack --release` writes (level 19)'
complete -c fatpack -n "__fish_fatpack_using_subcommand ld" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "inspect" -d 'Show the device code inside any file'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "prune" -d 'Keep only the archs some GPUs run, without relinking'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "repack" -d 'Compress a packed output\'s store again, without relinking'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "split" -d 'Split a packed output, or a package of them, into host and per-GPU parts'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "index" -d 'Write package indexes for a fat wheel and its pruned variants'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "join" -d 'Join a split binary and its packs back into one packed binary'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "extract" -d 'Write device code as files cuobjdump and nvdisasm read'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "run" -d 'Run a build with fatpack as the linker of every compiler driver in it'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "man" -d 'Print the man page (roff), or install it and the completions'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "completions" -d 'Print shell completions to standard output'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "ld" -d 'Link like `ld`, packing all device code into a store'
complete -c fatpack -n "__fish_fatpack_using_subcommand help; and not __fish_seen_subcommand_from inspect prune repack split index join extract run man completions ld help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
