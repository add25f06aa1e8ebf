"""Run a spread of PyTorch workloads on a GPU under torch.profiler and record every kernel name
seen.

Used to make tests/data/kernels_gpu_host.json (the GPU-host half of the kernel-name corpus):

    python3 tests/data/capture/harvest_kernels.py OUT.json [WORKLOAD ...]

Each entry: name (as torch.profiler reports it), workload, device, torch version.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

dev = "cuda"
W: dict[str, object] = {}


def workload(fn):
    W[fn.__name__] = fn
    return fn


def r(*s, dtype=torch.float32):
    return torch.randn(*s, device=dev, dtype=dtype)


@workload
def matmul_fp32_no_tf32():
    torch.backends.cuda.matmul.allow_tf32 = False
    a = r(4096, 4096)
    a @ a
    r(1000, 1000) @ r(1000, 1000)
    r(64, 64) @ r(64, 64)
    a.t() @ a
    a @ a.t()


@workload
def matmul_tf32():
    torch.backends.cuda.matmul.allow_tf32 = True
    a = r(4096, 4096)
    a @ a
    a.t() @ a
    torch.backends.cuda.matmul.allow_tf32 = False


@workload
def matmul_half_and_bf16():
    for dt in (torch.float16, torch.bfloat16):
        a = r(4096, 4096, dtype=dt)
        a @ a
        a.t() @ a
        a @ a.t()
        r(128, 4096, dtype=dt) @ r(4096, 4096, dtype=dt)
        r(8, 512, 64, dtype=dt) @ r(8, 64, 512, dtype=dt)
        F.linear(r(64, 1024, dtype=dt), r(4096, 1024, dtype=dt), r(4096, dtype=dt))


@workload
def matmul_fp8():
    a = r(4096, 4096).to(torch.float8_e4m3fn)
    b = r(4096, 4096).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev)
    torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


@workload
def linear_backward():
    lin = torch.nn.Linear(1024, 1024).to(dev)
    x = r(256, 1024, requires_grad=False).requires_grad_()
    lin(x).relu().sum().backward()


@workload
def conv():
    torch.backends.cudnn.benchmark = False
    x = r(16, 64, 56, 56)
    w = r(64, 64, 3, 3)
    F.conv2d(x, w, padding=1)
    xh, wh = (
        x.half().to(memory_format=torch.channels_last),
        w.half().to(memory_format=torch.channels_last),
    )
    F.conv2d(xh, wh, padding=1)
    x.requires_grad_()
    F.conv2d(x, w.requires_grad_(), padding=1).sum().backward()
    F.conv1d(r(8, 32, 128), r(32, 32, 5))
    F.conv2d(r(8, 32, 28, 28), r(32, 1, 3, 3), groups=32)  # depthwise


@workload
def attention():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = r(8, 16, 1024, 64, dtype=torch.float16)
    for b in (
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.CUDNN_ATTENTION,
        SDPBackend.MATH,
    ):
        try:
            with sdpa_kernel(b):
                F.scaled_dot_product_attention(q, q, q, is_causal=True)
        except RuntimeError as e:
            print("sdpa", b, "failed:", str(e)[:80])
    qg = q.clone().requires_grad_()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(qg, qg, qg).sum().backward()


@workload
def norms_and_activations():
    x = r(4096, 4096)
    torch.softmax(x, -1)
    torch.log_softmax(x, -1)
    F.layer_norm(x, (4096,))
    F.rms_norm(x, (4096,)) if hasattr(F, "rms_norm") else None
    F.gelu(x)
    F.silu(x)
    torch.relu(x)
    torch.tanh(x)
    F.dropout(x, 0.1)
    F.batch_norm(r(16, 64, 32, 32), None, None, training=True)
    F.group_norm(r(16, 64, 32, 32), 8)
    torch.softmax(x.half(), -1)


@workload
def elementwise_and_reductions():
    x, y = r(1 << 20), r(1 << 20)
    x + y
    x * 2
    x.add_(1)
    torch.where(x > 0, x, y)
    x.sum()
    x.mean()
    x.max()
    x.argmax()
    x.view(1024, 1024).sum(0)
    x.view(1024, 1024).norm(dim=1)
    torch.cumsum(x, 0)
    torch.sort(x)
    torch.topk(x, 10)
    x.half()
    x.view(1024, 1024).t().contiguous()
    x[::2].clone()
    torch.cat([x, y])
    torch.stack([x, y])
    x.pow(2)
    torch.exp(x)
    x.abs_()
    x.clamp(0, 1)
    (x > 0).sum()
    x.fill_(1)
    x.zero_()
    torch.arange(1000, device=dev)
    torch.linspace(0, 1, 1000, device=dev)


@workload
def random_numbers():
    torch.randn(1 << 20, device=dev)
    torch.rand(1 << 20, device=dev)
    torch.randint(0, 10, (1 << 20,), device=dev)
    torch.empty(1 << 20, device=dev).normal_()
    torch.empty(1 << 20, device=dev).uniform_()
    torch.multinomial(torch.rand(16, 100, device=dev), 5)
    torch.randperm(10000, device=dev)
    torch.bernoulli(torch.rand(1000, device=dev))


@workload
def indexing_and_embedding():
    x = r(10000, 128)
    idx = torch.randint(0, 10000, (4096,), device=dev)
    x[idx]
    x.index_select(0, idx)
    torch.gather(x, 0, idx[:, None].expand(-1, 128))
    torch.zeros(10000, 128, device=dev).index_add_(0, idx, r(4096, 128))
    torch.zeros(10000, device=dev).scatter_add_(0, idx, r(4096))
    F.embedding(idx, x)
    x[x > 0]
    torch.nonzero(x[:100])
    F.one_hot(idx % 10, 10)
    F.cross_entropy(r(256, 1000), torch.randint(0, 1000, (256,), device=dev))
    F.interpolate(r(4, 3, 64, 64), scale_factor=2, mode="bilinear")
    F.max_pool2d(r(4, 3, 64, 64), 2)
    F.avg_pool2d(r(4, 3, 64, 64), 2)
    F.adaptive_avg_pool2d(r(4, 64, 7, 7), 1)
    F.pad(r(4, 3, 64, 64), (1, 1, 1, 1))


@workload
def copies():
    h = torch.randn(1 << 20).pin_memory()
    d = h.to(dev, non_blocking=True)
    d.cpu()
    d.clone()
    torch.randn(1 << 20).to(dev)
    d2 = torch.empty_like(d)
    d2.copy_(d)
    torch.zeros(1 << 20, device=dev)


@workload
def compiled():
    def f(x, y):
        return torch.nn.functional.gelu(x + y) * 2, (x * y).sum(-1), torch.softmax(x, -1)

    cf = torch.compile(f)
    x, y = r(1024, 1024), r(1024, 1024)
    cf(x, y)
    torch.cuda.synchronize()

    def g(a, b):
        return torch.relu(a @ b + 1)

    cg = torch.compile(g, mode="max-autotune-no-cudagraphs")
    cg(r(512, 512), r(512, 512))
    torch.cuda.synchronize()


@workload
def nccl_single_rank():
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29555")
    dist.init_process_group("nccl", rank=0, world_size=1)
    t = r(1 << 20)
    dist.all_reduce(t)
    t16 = t.bfloat16()
    dist.all_reduce(t16)
    dist.broadcast(t, 0)
    out = [torch.empty_like(t)]
    dist.all_gather(out, t)
    torch.cuda.synchronize()
    dist.destroy_process_group()


@workload
def fft():
    x = r(1 << 16)
    torch.fft.fft(x)
    torch.fft.rfft(x)
    torch.fft.irfft(torch.fft.rfft(x))
    torch.fft.fft2(r(512, 512))
    torch.fft.rfftn(r(64, 64, 64))
    torch.fft.fft(r(4096, 1000), dim=-1)  # not a power of two: Bluestein / mixed radix
    torch.fft.fft(r(32768, 2, dtype=torch.float64)[:, 0])
    torch.fft.fft(r(1 << 12, dtype=torch.float16))


@workload
def linalg():
    a = r(512, 512) + 512 * torch.eye(512, device=dev)
    spd = a @ a.T
    torch.linalg.lu_factor(a)
    torch.linalg.solve(a, r(512, 8))
    torch.linalg.cholesky(spd)
    torch.linalg.qr(r(512, 256))
    torch.linalg.svd(r(256, 128), full_matrices=False)
    torch.linalg.eigh(spd[:256, :256])
    torch.linalg.solve_triangular(torch.triu(a), r(512, 64), upper=True)
    torch.linalg.inv(a)
    torch.linalg.det(r(16, 64, 64))
    torch.linalg.svd(r(32, 16, 16))  # batched: gesvdj batched
    torch.linalg.eigh(r(32, 16, 16) @ r(32, 16, 16).transpose(1, 2))
    torch.linalg.lstsq(r(256, 64), r(256, 4))
    torch.linalg.solve(a.double(), r(512, 8, dtype=torch.float64))


@workload
def sparse():
    dense = r(1024, 1024) * (torch.rand(1024, 1024, device=dev) < 0.01)
    csr = dense.to_sparse_csr()
    coo = dense.to_sparse()
    b = r(1024, 256)
    csr @ b
    torch.sparse.mm(coo, b)
    csr @ r(1024)
    torch.sparse.addmm(r(1024, 256), coo, b)
    (csr.to(torch.float64)) @ b.double()


@workload
def blas_legacy_shapes():
    torch.backends.cuda.matmul.allow_tf32 = False
    r(4096, 64) @ r(64, 64)  # skinny
    r(64, 65536) @ r(65536, 64)  # large K
    r(4096, 4096) @ r(4096)  # gemv
    r(4096) @ r(4096)  # dot
    r(7, 3) @ r(3, 5)  # tiny
    r(4096, 4096, dtype=torch.float64) @ r(4096, 4096, dtype=torch.float64)
    c = torch.randn(1024, 1024, device=dev, dtype=torch.complex64)
    c @ c
    z = torch.randn(512, 512, device=dev, dtype=torch.complex128)
    z @ z
    torch.bmm(r(512, 32, 32), r(512, 32, 32))
    torch.addmv(r(2048), r(2048, 1024), r(1024))
    torch.linalg.vector_norm(r(1 << 20))
    r(1000, 3000).t() @ r(1000, 3000)


def main(out_path: str, only: list[str] | None = None) -> None:
    seen: dict[str, dict] = {}
    # warm everything once outside the profiler (lazy init, autotuning), then profile a second run
    work = {n: f for n, f in W.items() if not only or n in only}
    for name, fn in work.items():
        if name == "nccl_single_rank":  # a process group can be made once: profiled below only
            continue
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"{name}: warm-up failed: {e!r}"[:200])
    for name, fn in work.items():
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            print(f"{name}: failed: {e!r}"[:200])
            traceback.print_exc(limit=1)
            continue
        for ev in prof.profiler.kineto_results.events():
            if str(ev.device_type()).endswith("CUDA"):
                seen.setdefault(ev.name(), {"name": ev.name(), "workload": name})
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.cuda.get_device_name()
    rows = [dict(v, device=device, torch=torch.__version__) for v in seen.values()]
    with open(out_path, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"{len(rows)} distinct kernel names -> {out_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or None)
