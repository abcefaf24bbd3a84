"""Compares two torch_ops.py result files bitwise; exit 1 on any difference."""
import sys
import torch

a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
bad = [k for k in a if k not in b or not torch.equal(a[k], b[k])]
for k in a:
    print(f"  {k:<28} {'identical' if k not in bad else 'DIFFERS'}")
print(f"{len(a) - len(bad)} of {len(a)} torch results identical")
sys.exit(1 if bad else 0)
