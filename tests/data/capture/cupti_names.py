"""Kernel names as CUPTI gives them (mangled) beside torch.profiler's spelling of the same kernels:
the corpus that chooses the demangler of gpumagic's direct CUPTI path
(``tests/data/cupti_names_h100.json``).

Each op runs once warm, then once with CUPTI's kernel records on (through cupti-python, names left
as CUPTI gives them) and once under torch.profiler; the two kernel lists, in start order, are paired
where they have the same length. Run on the GPU host: python3 tests/data/capture/cupti_names.py
OUT.json
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F

from gpumagic import cupti_direct


def ops() -> dict:
    dev = "cuda"
    a32 = torch.randn(1024, 1024, device=dev)
    a16 = a32.half()
    ab = a32.bfloat16()
    img = torch.randn(8, 64, 56, 56, device=dev, dtype=torch.bfloat16)
    w = torch.randn(64, 64, 3, 3, device=dev, dtype=torch.bfloat16)
    x = torch.randn(64, 512, 1024, device=dev, dtype=torch.bfloat16)
    q = torch.randn(4, 8, 512, 64, device=dev, dtype=torch.bfloat16)
    idx = torch.randint(0, 1024, (4096,), device=dev)
    emb = torch.randn(1024, 256, device=dev)
    logits = torch.randn(256, 1000, device=dev)
    target = torch.randint(0, 1000, (256,), device=dev)
    v = torch.randn(1 << 20, device=dev)
    bn = torch.nn.BatchNorm2d(64).to(dev).bfloat16()

    def fp32_ffma():
        torch.backends.cuda.matmul.allow_tf32 = False
        return a32 @ a32

    def fp32_tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return a32 @ a32
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    return {
        "matmul fp32": fp32_ffma,
        "matmul tf32": fp32_tf32,
        "matmul fp16": lambda: a16 @ a16,
        "matmul bf16": lambda: ab @ ab,
        "conv2d bf16": lambda: F.conv2d(img, w, padding=1),
        "batch_norm bf16": lambda: bn(img),
        "layer_norm": lambda: F.layer_norm(x, (1024,)),
        "rms_norm": lambda: F.rms_norm(x, (1024,)),
        "softmax": lambda: torch.softmax(x, dim=-1),
        "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        "sdpa causal": lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
        "gelu": lambda: F.gelu(x),
        "add": lambda: v + v,
        "sum": lambda: v.sum(),
        "cumsum": lambda: v.cumsum(0),
        "sort": lambda: v.sort(),
        "topk": lambda: v.topk(16),
        "embedding": lambda: F.embedding(idx, emb),
        "index_select": lambda: emb.index_select(0, idx),
        "cross_entropy": lambda: F.cross_entropy(logits, target),
        "dropout": lambda: F.dropout(x, 0.1),
        "copy to fp32": lambda: x.float(),
        "transpose contiguous": lambda: x.transpose(1, 2).contiguous(),
    }


def cupti_kernels(fn) -> list[str]:
    torch.cuda.synchronize()
    plain = cupti_direct.demangle
    cupti_direct.demangle = lambda name: name  # keep CUPTI's own spelling for the corpus
    try:
        with cupti_direct.recording() as rec:
            fn()
            torch.cuda.synchronize()
    finally:
        cupti_direct.demangle = plain
    return [a.name for a in sorted(rec.gpu(), key=lambda a: a.start) if a.kind == "kernel"]


def kineto_kernels(fn) -> list[str]:
    from gpumagic.gpu_activity import from_kineto

    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [
        a.name for a in sorted(from_kineto(prof).gpu(), key=lambda a: a.start) if a.kind == "kernel"
    ]


def main(out: str) -> int:
    from gpumagic.gpu_activity.profiler_start import warm_profiler

    warm_profiler(torch.device("cuda", 0))
    pairs, unpaired = [], []
    for label, fn in ops().items():
        fn()
        raw, spelled = cupti_kernels(fn), kineto_kernels(fn)
        if len(raw) != len(spelled):
            unpaired.append({"op": label, "cupti": raw, "kineto": spelled})
            continue
        pairs += [{"op": label, "mangled": m, "kineto": k} for m, k in zip(raw, spelled)]
    same = sum(cupti_direct.demangle(p["mangled"]) == p["kineto"] for p in pairs)
    mangled = sum(p["mangled"].startswith("_Z") for p in pairs)
    print(
        f"{len(pairs)} pairs ({mangled} mangled), torch._C._demangle equals kineto on {same}; "
        f"unpaired ops: "
        f"{[u['op'] for u in unpaired]}"
    )
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "pairs": pairs, "unpaired": unpaired}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
