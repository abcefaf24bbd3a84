//! The device code of a shipped library, as objects `fatpack ld` links: what the store-size
//! benchmarks measure the shipped commands on.
//!
//!   cargo run --release --example library-link -- OUTDIR LIBRARY.so [CONTAINERS_PER_OBJECT]
//!
//! Every fatbin container of the library's `.nv_fatbin` is written byte for byte as NVIDIA
//! shipped it (its compressed entries too), each wrapped and registered as nvcc's host code
//! does (`.nvFatBinSegment` wrapper, a constructor calling `__cudaRegisterFatBinary`), a
//! number of containers per assembly file (default 64). It writes `libN.s` + `libN_M.fatbin`
//! (assemble with `as`) and `main.c`. Linked by `gcc -B<fatpack wrapper>`, the program's
//! store holds exactly the library's modules and entries.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(
        (2..=3).contains(&args.len()),
        "usage: library-link OUTDIR LIBRARY.so [CONTAINERS_PER_OBJECT]"
    );
    let out = PathBuf::from(&args[0]);
    let per: usize = args.get(2).map_or(Ok(64), |s| s.parse())?;
    anyhow::ensure!(per > 0, "CONTAINERS_PER_OBJECT must be at least 1");
    let scanned = fatpack::inputs::scan(std::path::Path::new(&args[1]))?;
    let containers: Vec<_> = scanned
        .sections
        .into_iter()
        .filter(|s| !s.embedded)
        .flat_map(|s| s.containers)
        .collect();
    anyhow::ensure!(!containers.is_empty(), "{}: no fatbin containers", args[1]);
    std::fs::create_dir_all(&out)?;
    let (mut entries, mut bytes) = (0usize, 0usize);
    let mut objects = 0;
    for (n, chunk) in containers.chunks(per).enumerate() {
        let mut asm = String::new();
        for (m, fb) in chunk.iter().enumerate() {
            let mut buf = Vec::new();
            fb.write_to(&mut buf);
            entries += fb.entries.len();
            bytes += buf.len();
            std::fs::write(out.join(format!("lib{n}_{m}.fatbin")), &buf)?;
            write_container(&mut asm, n, m)?;
        }
        asm.push_str("    .section .note.GNU-stack,\"\",@progbits\n");
        std::fs::write(out.join(format!("lib{n}.s")), asm)?;
        objects += 1;
    }
    std::fs::write(
        out.join("main.c"),
        "#include <stdio.h>\nint main(void) { puts(\"host code ran\"); return 0; }\n",
    )?;
    println!(
        "{} containers, {entries} entries, {bytes} bytes of fatbin, in {objects} objects",
        containers.len()
    );
    Ok(())
}

/// Container `m` of object `n`, wrapped and registered as nvcc's host code does (x86-64).
fn write_container(asm: &mut String, n: usize, m: usize) -> std::fmt::Result {
    write!(
        asm,
        r#"    .section .nv_fatbin,"a",@progbits
    .p2align 3
fatbin_{m}:
    .incbin "lib{n}_{m}.fatbin"
    .section .nvFatBinSegment,"aw",@progbits
    .p2align 3
wrapper_{m}:
    .long 0x466243b1
    .long 1
    .quad fatbin_{m}
    .quad 0
    .bss
    .p2align 3
handle_{m}:
    .zero 8
    .section .text.startup,"ax",@progbits
register_{m}:
    subq $8, %rsp
    leaq wrapper_{m}(%rip), %rdi
    call __cudaRegisterFatBinary@PLT
    movq %rax, handle_{m}(%rip)
    movq %rax, %rdi
    call __cudaRegisterFatBinaryEnd@PLT
    addq $8, %rsp
    ret
    .section .init_array,"aw"
    .p2align 3
    .quad register_{m}
"#
    )
}
