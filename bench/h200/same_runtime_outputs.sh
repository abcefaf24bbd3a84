#!/usr/bin/env bash
# ON THE GPU MACHINE: which fatpack builds give the same bytes for the static cuBLAS program
# (tests/gpu/cublas) with one runtime archive: .device/39/fatpack-{old,c3314fe,new} each link
# it with FATPACK_RUNTIME set to NEW's runtime; prints each output's size and route, where
# each differs from NEW's (first byte, count) and the section headers that differ.
#   bash bench/h200/same_runtime_outputs.sh
set -u
CUDA=/usr/local/cuda; export PATH=$CUDA/bin:$PATH
R="$(pwd)"; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT; cd "$W"
nvcc -O2 -std=c++17 -c "$R"/tests/gpu/cublas/cublas_check.cu -o check.o
LIBS=(-L$CUDA/lib64 -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
for v in old c3314fe new; do mkdir -p $v; ln -s "$R"/.device/39/fatpack-$v $v/ld; done
g++ -Bnew -Wl,--fatpack-save-temps -o keep.bin check.o "${LIBS[@]}" && cp keep.bin.fatpack-temps/libfatpack_rt.a rt.a
for v in old c3314fe new; do FATPACK_RUNTIME=$W/rt.a g++ -B$v -Wl,--fatpack-verbose -o $v.bin check.o "${LIBS[@]}" 2> $v.err; echo "$v $(stat -c %s $v.bin) $(grep -o 'route[^;,]*' $v.err | head -1)"; done
for a in old c3314fe; do echo "$a vs new: $(cmp $a.bin new.bin | head -1) differing bytes: $(cmp -l $a.bin new.bin | wc -l)"; done
python3 - <<'PY'
import struct
def sections(p):
    b=open(p,'rb').read()
    shoff,=struct.unpack_from('<Q',b,0x28); shentsize,shnum,shstrndx=struct.unpack_from('<HHH',b,0x3a)
    hdr=lambda i: struct.unpack_from('<IIQQQQIIQQ',b,shoff+i*shentsize)
    strtab=hdr(shstrndx); so=strtab[4]
    out=[]
    for i in range(shnum):
        h=hdr(i); n=b[so+h[0]:b.index(b'\0',so+h[0])].decode()
        out.append((n,h[3],h[4],h[5]))
    return out
a=sections('old.bin'); n=sections('new.bin')
import subprocess
diff=subprocess.run(['cmp','-l','old.bin','new.bin'],capture_output=True,text=True).stdout.split()
for i in range(0,len(diff),3):
    off=int(diff[i])-1
    sec=[x for x in n if x[2]<=off<x[2]+x[3]]
    print('byte',off,'old',oct(int(diff[i+1],8)),'new',oct(int(diff[i+2],8)),'in',sec[0][0] if sec else '?', 'at +',off-sec[0][2] if sec else '')
b=open('new.bin','rb').read(); o=open('old.bin','rb').read()
if diff:
    at=int(diff[0])-1
    print('old context', o[at-24:at+24].hex()); print('new context', b[at-24:at+24].hex())
for x,y in zip(a,n):
    if x!=y: print('old',x,'new',y)
print(len(a),len(n))
PY
