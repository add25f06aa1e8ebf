"""Training kernel names: batch norm, RNN, norm backward, CUB, cuSOLVER, optimizer, FP8, int8 and
fp16/bf16 kernels.

    python3 tests/data/capture/harvest_training.py OUT.json

The kernels of a training step that harvest_kernels.py and harvest_heldout.py do not run: cuDNN
batch norm (NCHW, channels_last, bf16 autocast) and RNN (LSTM, GRU, tanh RNN) forward and backward,
layer/RMS/group norm backward, CUB sort, scan, select and histogram kernels, cuSOLVER (and MAGMA,
where the build has it) QR, eigh and Cholesky, foreach and fused optimizer steps, FP8 GEMMs with
row-wise and tensor-wise scales, the cuBLASLt int8 GEMM, and the same matmul and causal attention in
fp16 and in bf16, so that the decoder's reading of precision can be checked both where the name
tells it and where it does not. Shapes are small: the whole run takes seconds on an H100.

Each workload is a function of one dtype that builds its inputs and returns a step; it is registered
once per dtype it runs in. The step runs once to warm up (lazy init, cuDNN and cuBLAS heuristics,
optimizer state) and once more under torch.profiler (CPU and CUDA activities); a workload that
fails, or that this GPU or build lacks, prints why and the rest still run.

OUT.json is a list with one entry per distinct (workload, name): name is the kernel name exactly as
torch.profiler reports it (kineto, demangled); dtype_hint is the dtype of the run that launched it
("float8_e4m3fn" for the FP8 GEMMs whatever their output dtype, "bfloat16" for autocast), or the
dtypes joined by "," when runs in several dtypes launched the same name. A hint, not a certainty: a
bf16 run also launches fp32 kernels (autocast's casts, batch-norm statistics, optimizer steps on
fp32 state).
"""

import json
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

dev = "cuda"
# (workload, dtype, setup): setup(dtype) builds the inputs and returns the step to profile
CASES = []


class Skip(Exception):
    """Raised by a setup whose workload this GPU or torch build cannot run."""


def workload(*dtypes):
    def register(fn):
        for dt in dtypes:
            CASES.append((fn.__name__, dt, fn))
        return fn

    return register


def r(*s, dtype=torch.float32):
    return torch.randn(*s, device=dev, dtype=dtype)


def dtype_name(dt):
    return str(dt).removeprefix("torch.")


@workload(torch.float32, torch.bfloat16)
def batchnorm_train(dt):
    """BatchNorm2d after a conv (NCHW and channels_last), BatchNorm1d after a linear, train mode;
    bf16 by autocast."""
    conv_bn = (
        nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        .to(dev)
        .train()
    )
    conv_bn_cl = (
        nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        .to(dev, memory_format=torch.channels_last)
        .train()
    )
    lin_bn = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128)).to(dev).train()
    x = r(8, 16, 32, 32).requires_grad_()
    x_cl = r(8, 16, 32, 32).to(memory_format=torch.channels_last).requires_grad_()
    x1 = r(256, 64).requires_grad_()

    def step():
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=dt == torch.bfloat16):
            losses = [
                conv_bn(x).float().sum(),
                conv_bn_cl(x_cl).float().sum(),
                lin_bn(x1).float().sum(),
            ]
        for loss in losses:
            loss.backward()

    return step


@workload(torch.float32, torch.float16)
def rnn(dt):
    """nn.LSTM, nn.GRU and a tanh nn.RNN, two layers, batch_first, forward and backward (cuDNN
    RNN)."""
    nets = [
        nn.LSTM(64, 128, num_layers=2, batch_first=True),
        nn.GRU(64, 128, num_layers=2, batch_first=True),
        nn.RNN(64, 128, num_layers=2, batch_first=True, nonlinearity="tanh"),
    ]
    nets = [net.to(dev, dt) for net in nets]
    x = r(8, 32, 64, dtype=dt).requires_grad_()

    def step():
        for net in nets:
            out, _ = net(x)
            out.float().sum().backward()

    return step


@workload(torch.float32, torch.bfloat16, torch.float16)
def layernorm_bwd(dt):
    """nn.LayerNorm, F.rms_norm and nn.GroupNorm, forward and backward."""
    ln = nn.LayerNorm(1024).to(dev, dt)
    gn = nn.GroupNorm(8, 64).to(dev, dt)
    rms_weight = torch.ones(1024, device=dev, dtype=dt, requires_grad=True)
    x = r(512, 1024, dtype=dt).requires_grad_()
    xg = r(16, 64, 32, 32, dtype=dt).requires_grad_()

    def step():
        ln(x).float().sum().backward()
        F.rms_norm(x, (1024,), rms_weight).float().sum().backward()
        gn(xg).float().sum().backward()

    return step


@workload(torch.float32, torch.int64)
def cub(dt):
    """unique, sort/argsort (whole and segmented), cumsum, nonzero, topk, masked_select,
    histc/bincount, 1M elements."""
    n = 1 << 20
    if dt.is_floating_point:
        x = r(n)
        mask = x > 0
    else:
        x = torch.randint(0, 1 << 16, (n,), device=dev)
        mask = x % 2 == 1

    def step():
        torch.unique(x, sorted=True, return_counts=True)
        torch.argsort(x)
        torch.sort(x, descending=True)
        torch.sort(x.view(1024, -1), dim=1)
        torch.cumsum(x, 0)
        torch.nonzero(mask)
        torch.topk(x, 100)
        x.masked_select(mask)
        if dt.is_floating_point:
            torch.histc(x, bins=100)
        else:
            torch.bincount(x)

    return step


def linalg_step(dt, library):
    eye = torch.eye(256, device=dev, dtype=dt)
    a = r(256, 256, dtype=dt)
    spd = a @ a.T + 256 * eye
    ab = r(16, 64, 64, dtype=dt)
    spd_b = ab @ ab.mT + 64 * torch.eye(64, device=dev, dtype=dt)
    s = r(64, 16, 16, dtype=dt)
    sym_small_b = s + s.mT
    tall = r(512, 128, dtype=dt)
    tall_b = r(16, 64, 32, dtype=dt)

    def step():
        before = torch.backends.cuda.preferred_linalg_library()
        torch.backends.cuda.preferred_linalg_library(library)
        try:
            torch.linalg.qr(tall)
            torch.linalg.qr(tall_b)
            torch.linalg.eigh(spd)
            torch.linalg.eigh(spd_b)
            torch.linalg.eigh(sym_small_b)
            torch.linalg.cholesky(spd)
            torch.linalg.cholesky(spd_b)
        finally:
            torch.backends.cuda.preferred_linalg_library(before)

    return step


@workload(torch.float32, torch.float64)
def linalg(dt):
    """QR, eigh and Cholesky, single and batched, with cuSOLVER preferred (its helper GEMMs
    included)."""
    return linalg_step(dt, "cusolver")


@workload(torch.float32, torch.float64)
def linalg_magma(dt):
    """The same with MAGMA preferred, where this torch build has MAGMA."""
    if not torch.cuda.has_magma:
        raise Skip("this torch build has no MAGMA")
    return linalg_step(dt, "magma")


@workload(torch.float32, torch.bfloat16)
def optimizers(dt):
    """AdamW, Adam and SGD with momentum, foreach and fused, on a small MLP; clip_grad_norm_ and
    _foreach_* directly."""
    mlp = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256)).to(dev, dt)
    params = list(mlp.parameters())
    x = r(64, 256, dtype=dt)
    opts = []
    for cls, kwargs in (
        (torch.optim.AdamW, {}),
        (torch.optim.Adam, {}),
        (torch.optim.SGD, {"momentum": 0.9}),
    ):
        for impl in ("foreach", "fused"):
            try:
                opts.append(cls(params, lr=1e-3, **kwargs, **{impl: True}))
            except (RuntimeError, ValueError, TypeError) as e:
                print(
                    f"optimizers[{dtype_name(dt)}]: {cls.__name__}({impl}=True) not "
                    f"supported: {e!r}"[:200]
                )
    buf = [torch.zeros_like(p) for p in params]

    def step():
        for p in params:
            p.grad = None
        mlp(x).float().pow(2).mean().backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        for opt in opts:
            opt.step()
        grads = [p.grad for p in params]
        torch._foreach_add_(buf, grads)
        torch._foreach_add_(buf, grads, alpha=-0.5)
        torch._foreach_add_(buf, 1.0)
        torch._foreach_mul_(buf, 0.5)
        torch._foreach_mul_(buf, grads)
        torch._foreach_norm(buf)

    return step


@workload(torch.float8_e4m3fn)
def fp8_rowwise(dt):
    """torch._scaled_mm, e4m3 operands, B column-major: row-wise scales ((M,1), (1,N) fp32, bf16
    out), tensor-wise."""
    if torch.cuda.get_device_capability() < (8, 9):
        raise Skip(
            f"FP8 GEMMs need compute capability 8.9+, this GPU is "
            f"{torch.cuda.get_device_capability()}"
        )
    m, k, n = 1024, 2048, 512
    a = r(m, k).to(dt)
    b = r(n, k).to(dt).t()  # (K, N), column-major
    scale_a = torch.rand(m, 1, device=dev) + 0.5
    scale_b = torch.rand(1, n, device=dev) + 0.5
    one = torch.ones((), device=dev)

    def step():
        torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
        torch._scaled_mm(
            a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16, use_fast_accum=True
        )
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)

    return step


@workload(torch.int8)
def int8_mm(dt):
    """torch._int_mm, int8 (M,K)@(K,N) -> int32, M > 16 and K, N multiples of 8; B column-major and
    row-major."""
    a = torch.randint(-8, 8, (128, 512), device=dev, dtype=dt)
    b_col = torch.randint(-8, 8, (256, 512), device=dev, dtype=dt).t()
    b_row = torch.randint(-8, 8, (512, 256), device=dev, dtype=dt)
    a_big = torch.randint(-8, 8, (2048, 4096), device=dev, dtype=dt)
    b_big = torch.randint(-8, 8, (4096, 4096), device=dev, dtype=dt).t()

    def step():
        torch._int_mm(a, b_col)
        torch._int_mm(a, b_row)
        torch._int_mm(a_big, b_big)

    return step


@workload(torch.float16, torch.bfloat16)
def mixed(dt):
    """The same matmul and causal scaled_dot_product_attention, forward and backward, in fp16 and in
    bf16."""
    a = r(512, 1024, dtype=dt).requires_grad_()
    w = r(1024, 1024, dtype=dt).requires_grad_()
    q, k, v = (r(4, 8, 512, 64, dtype=dt).requires_grad_() for _ in range(3))

    def step():
        (a @ w).float().sum().backward()
        F.scaled_dot_product_attention(q, k, v, is_causal=True).float().sum().backward()

    return step


def main(out):
    print(
        torch.__version__,
        torch.version.cuda,
        torch.cuda.get_device_name(),
        torch.cuda.get_device_capability(),
    )
    seen = {}  # (workload, name) -> {dtype name: None}, in the order seen
    for name, dt, setup in CASES:
        label = f"{name}[{dtype_name(dt)}]"
        try:
            step = setup(dt)
            step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
        except Skip as e:
            print(label, "skipped:", e)
            continue
        except Exception as e:  # noqa: BLE001 - a workload this stack lacks is reported, the rest still run
            print(label, "failed", repr(e)[:200])
            continue
        for ev in prof.profiler.kineto_results.events():
            if str(ev.device_type()).endswith("CUDA"):
                seen.setdefault((name, ev.name()), {})[dtype_name(dt)] = None
    rows = [{"workload": w, "name": n, "dtype_hint": ",".join(dts)} for (w, n), dts in seen.items()]
    with open(out, "w") as f:
        json.dump(rows, f, indent=1)
    for w in dict.fromkeys(name for name, _, _ in CASES):
        print(f"{w}: {sum(row['workload'] == w for row in rows)} names")
    print(len(rows), "(workload, name) pairs ->", out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python3 tests/data/capture/harvest_training.py OUT.json", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print("harvest_training.py: CUDA is required (torch sees no CUDA device)", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
