//! Generates a link whose device code passes 2 GiB, from real cubins.
//!
//!   cargo run --release --example over-2gib -- OUTDIR TOTAL_MIB OBJECTS SOURCE.o...
//!
//! Each of OBJECTS generated objects carries a `.nv_fatbin` built from the SASS entries of
//! the SOURCE objects (nvcc output), in distinct variants (the ELF header's EI_PAD bytes hold
//! a variant number, so every cubin is different and the store cannot deduplicate them),
//! wrapped and registered exactly as nvcc's host code does (`.nvFatBinSegment` wrapper, a
//! constructor calling `__cudaRegisterFatBinary`), and a function whose `.text` reads a
//! `.bss` variable PC-relatively, as MAGMA's do: the reference that overflows once the
//! fatbin between them passes 2 GiB. It writes `objN.s` + `objN.fatbin` (assemble with
//! `as`), and `main.c` calling every object's function.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use fatpack::fatbin::{Entry, EntryKind, Fatbin};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    anyhow::ensure!(
        args.len() >= 4,
        "usage: over-2gib OUTDIR TOTAL_MIB OBJECTS SOURCE.o..."
    );
    let out = PathBuf::from(&args[0]);
    let total: u64 = args[1].parse::<u64>()? << 20;
    let objects: usize = args[2].parse()?;
    let mut cubins: Vec<Entry> = Vec::new();
    for src in &args[3..] {
        let s = fatpack::inputs::scan(std::path::Path::new(src))?;
        for fb in s.sections.into_iter().flat_map(|s| s.containers) {
            for e in fb.entries {
                if e.kind() == EntryKind::Sass {
                    cubins.push(e.to_uncompressed()?);
                }
            }
        }
    }
    anyhow::ensure!(!cubins.is_empty(), "no SASS entries in the sources");
    std::fs::create_dir_all(&out)?;
    let per_object = total / objects as u64;
    let mut variant: u64 = 0;
    let mut entries_total = 0usize;
    let mut main_c = String::from("#include <stdio.h>\n");
    for n in 0..objects {
        let mut fb = Fatbin {
            version: 1,
            entries: Vec::new(),
        };
        let mut size = 0u64;
        while size < per_object {
            let mut e = cubins[variant as usize % cubins.len()].clone();
            // EI_PAD (e_ident[9..16]) is reserved and ignored: a distinct, still valid cubin.
            e.stored[9..16].copy_from_slice(&variant.to_le_bytes()[..7]);
            variant += 1;
            size += e.encoded_len() as u64;
            fb.entries.push(e);
        }
        entries_total += fb.entries.len();
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(out.join(format!("obj{n}.fatbin")))?);
        let mut buf = Vec::new();
        fb.write_to(&mut buf);
        f.write_all(&buf)?;
        f.flush()?;
        drop(buf);
        let text = match std::env::var("OVER2GIB_ARCH").as_deref() {
            Ok("aarch64") => asm_aarch64(n),
            _ => asm(n),
        };
        std::fs::write(out.join(format!("obj{n}.s")), text)?;
        writeln!(main_c, "int use_{n}(void);")?;
    }
    main_c.push_str("int main(void) {\n    long sum = 0;\n");
    for n in 0..objects {
        writeln!(main_c, "    sum += use_{n}();")?;
    }
    main_c.push_str("    printf(\"host code ran: %ld\\n\", sum);\n    return 0;\n}\n");
    std::fs::write(out.join("main.c"), main_c)?;
    println!(
        "{objects} objects, {entries_total} distinct cubins, {:.2} GiB of device code",
        total as f64 / (1u64 << 30) as f64
    );
    Ok(())
}

/// x86-64 assembly for object `n`: what nvcc's host code does with its fatbin, by hand.
fn asm(n: usize) -> String {
    format!(
        r#"    .section .nv_fatbin,"a",@progbits
    .p2align 3
fatbinData:
    .incbin "obj{n}.fatbin"
    .section .nvFatBinSegment,"aw",@progbits
    .p2align 3
__fatDeviceText:
    .long 0x466243b1
    .long 1
    .quad fatbinData
    .quad 0
    .bss
    .p2align 3
handle:
    .zero 8
    .globl counter_{n}
counter_{n}:
    .zero 4
    .text
    .globl use_{n}
    .type use_{n},@function
use_{n}:
    movl counter_{n}(%rip), %eax
    addl ${n}, %eax
    movl %eax, counter_{n}(%rip)
    ret
    .size use_{n}, .-use_{n}
    .section .text.startup,"ax",@progbits
register_{n}:
    subq $8, %rsp
    leaq __fatDeviceText(%rip), %rdi
    call __cudaRegisterFatBinary@PLT
    movq %rax, handle(%rip)
    movq %rax, %rdi
    call __cudaRegisterFatBinaryEnd@PLT
    addq $8, %rsp
    ret
    .section .init_array,"aw"
    .p2align 3
    .quad register_{n}
    .section .note.GNU-stack,"",@progbits
"#
    )
}

/// aarch64 assembly for object `n`, position-independent (linked as a shared library, since
/// there is no aarch64 libc to link an executable against here). The `.rodata` word is a
/// 32-bit PC-relative reference (`R_AARCH64_PREL32`, as in exception tables) to `.bss`,
/// across the fatbin.
fn asm_aarch64(n: usize) -> String {
    format!(
        r#"    .section .nv_fatbin,"a",@progbits
    .p2align 3
fatbinData:
    .incbin "obj{n}.fatbin"
    .section .nvFatBinSegment,"aw",@progbits
    .p2align 3
__fatDeviceText:
    .word 0x466243b1
    .word 1
    .xword fatbinData
    .xword 0
    .bss
    .p2align 3
handle:
    .zero 8
    .globl counter_{n}
    .hidden counter_{n}
counter_{n}:
    .zero 4
    .section .rodata
    .p2align 2
    .globl table_{n}
table_{n}:
    .word counter_{n} - .
    .text
    .globl use_{n}
    .type use_{n},%function
use_{n}:
    adrp x1, counter_{n}
    ldr w0, [x1, :lo12:counter_{n}]
    add w0, w0, #{k}
    str w0, [x1, :lo12:counter_{n}]
    ret
    .size use_{n}, .-use_{n}
    .section .text.startup,"ax",@progbits
register_{n}:
    stp x29, x30, [sp, #-16]!
    adrp x0, __fatDeviceText
    add x0, x0, :lo12:__fatDeviceText
    bl __cudaRegisterFatBinary
    adrp x1, handle
    str x0, [x1, :lo12:handle]
    bl __cudaRegisterFatBinaryEnd
    ldp x29, x30, [sp], #16
    ret
    .section .init_array,"aw"
    .p2align 3
    .xword register_{n}
    .section .note.GNU-stack,"",@progbits
"#,
        k = n % 4096
    )
}
