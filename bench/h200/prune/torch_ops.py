"""Torch ops on the GPU whose results bench/h200/prune/run.sh compares, bitwise, between the
wheel's own torch/lib and the same libraries pruned by fatpack: GEMM in several dtypes,
linalg, FFT, convolution, SDPA, and a few elementwise/reduction kernels of libtorch_cuda."""
import sys
import torch

torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"
out = {}
print("torch", torch.__version__, torch.__file__, torch.cuda.get_device_name(), flush=True)
for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
    a = torch.randn(512, 384, device=dev, dtype=dt)
    b = torch.randn(384, 256, device=dev, dtype=dt)
    out[f"mm_{dt}"] = a @ b
    out[f"bmm_{dt}"] = torch.bmm(a[:256].reshape(4, 64, 384), b.reshape(1, 384, 256).expand(4, -1, -1))
x = torch.randn(128, 128, device=dev, dtype=torch.float64)
spd = x @ x.T + 128 * torch.eye(128, device=dev, dtype=torch.float64)
out["solve"] = torch.linalg.solve(spd, x)
out["cholesky"] = torch.linalg.cholesky(spd)
out["qr_r"] = torch.linalg.qr(x)[1].abs()
out["eigvalsh"] = torch.linalg.eigvalsh(spd)
s = torch.randn(16, 4096, device=dev)
out["fft"] = torch.view_as_real(torch.fft.fft(s))
out["rfft2"] = torch.view_as_real(torch.fft.rfft2(s.reshape(16, 64, 64)))
img = torch.randn(8, 16, 32, 32, device=dev)
w = torch.randn(32, 16, 3, 3, device=dev)
out["conv2d"] = torch.nn.functional.conv2d(img, w, padding=1)
out["conv2d_half"] = torch.nn.functional.conv2d(img.half(), w.half(), padding=1)
q, k, v = (torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16) for _ in range(3))
out["sdpa_bf16"] = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
out["sdpa_f32"] = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
out["softmax"] = torch.softmax(s, dim=-1)
out["layernorm"] = torch.nn.functional.layer_norm(s, (4096,))
out["cumsum"] = torch.cumsum(s, dim=1)
out["topk"] = torch.topk(s, 10, dim=1).values
out["sort"] = torch.sort(s, dim=1).values
out["gelu"] = torch.nn.functional.gelu(s)
torch.cuda.synchronize()
torch.save({k: t.cpu() for k, t in out.items()}, sys.argv[1])
print(len(out), "results saved", flush=True)
