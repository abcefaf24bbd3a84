#!/usr/bin/env python3
# Candidate store layouts for issue 57 (an experiment to choose one, not a benchmark of a
# shipped command) on cuSPARSE 12.9.4.2's device code (fatpack extract),
# with the zstd 1.5 command line: per entry at -9 and -19, per entry against a dictionary
# trained on the sample, and each SASS entry given its module's nearest lower sibling
# (sm_86 <- sm_80, sm_103 <- sm_100, ...) as a prefix (--patch-from).
import os,re,collections,subprocess,sys
# Usage: fatpack extract -o cub libcusparse.so.12 && python3 bench/store_candidates.py
# (in the folder holding cub/; zstd 1.5 on PATH).
mods=collections.defaultdict(dict)
for f in os.listdir('cub'):
    m=re.match(r'.*libcusparse\.so\.12_(\d+(?:~\d+)?)\.(\w+)\.(cubin|ptx)$',f)
    mods[m.group(1)].setdefault(m.group(2),[]).append('cub/'+f)
keys=sorted(mods, key=lambda k: [int(x) for x in k.split('~')])
sel=[];tot=0
for k in keys[20:]:
    s=sum(os.path.getsize(f) for fs in mods[k].values() for f in fs)
    if s<40e6 and all(len(v)==1 for v in mods[k].values()):
        sel.append(k); tot+=s
    if tot>120e6: break
print(f"sample: {len(sel)} modules, {tot} raw bytes", flush=True)
def z(args, f):
    return len(subprocess.run(['zstd','-q','-c',*args,f],capture_output=True,check=True).stdout)
files=[mods[k][a][0] for k in sel for a in mods[k]]
# dictionary trained on every 4th file of the sample
subprocess.run(['zstd','-q','--train','--maxdict=1048576','-o','dict',*files[::4]],check=True,capture_output=True)
dsize=os.path.getsize('dict')
order=['sm_70','sm_75','sm_80','sm_86','sm_89','sm_90','sm_100','sm_103','sm_107','sm_110','sm_120']
def parent(arch, have):
    if not arch.startswith('sm_'): return None
    i=order.index(arch) if arch in order else -1
    fam={'sm_86':'sm_80','sm_89':'sm_80','sm_75':'sm_70','sm_103':'sm_100','sm_107':'sm_100','sm_110':'sm_100','sm_120':'sm_100'}
    p=fam.get(arch)
    return p if p in have else None
t=collections.Counter()
for k in sel:
    have=mods[k]
    for a,(f,) in have.items():
        raw=os.path.getsize(f); t['raw']+=raw
        t['z9']+=z(['-9'],f); t['z19']+=z(['-19'],f)
        t['dict9']+=z(['-9','-D','dict'],f)
        p=parent(a,have)
        for lvl in ['3','9','19']:
            t['sib'+lvl]+=z(['-'+lvl]+(['--patch-from='+have[p][0]] if p else []),f)
        t['z3']+=z(['-3'],f)
t['dict9']+=dsize
for k in ['raw','z3','sib3','z9','sib9','z19','sib19','dict9']:
    print(f"{k:6} {t[k]:>12} {t[k]/t['z9']:.3f} of z9")
print(f"dictionary {dsize} bytes (counted once in dict9)")
