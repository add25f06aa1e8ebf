"""Training steps recorded with and without module and stack information, for the by-code
attribution (which line and which module launched each kernel) and the named-memory view.

python3 tests/data/capture/module_traces.py OUTDIR
  -> OUTDIR/attribution/gpt_modules.json.gz    a 3-block GPT training step (embedding, blocks of
                                               LayerNorm + causal attention + MLP, head; AdamW,
                                               bf16 autocast), two steps, with_modules + with_stack +
                                               record_shapes, inside record_function "cell:step"
     OUTDIR/attribution/gpt_plain.json.gz      the same steps recorded without modules or stacks
     OUTDIR/attribution/cnn_modules.json.gz    a small ResNet training step (conv, batch norm, ReLU,
                                               residual blocks, pooling, linear; SGD momentum)
                                               with_modules + with_stack + record_shapes
     OUTDIR/attribution/cnn_plain.json.gz      the same without modules or stacks
     OUTDIR/attribution/gpt_compiled.json.gz   the GPT step with the model under torch.compile,
                                               with_modules + with_stack
     OUTDIR/attribution/facts.json             device, torch, and each model's dotted module names
     OUTDIR/memory/named_step.pickle           allocator history (Python stacks) of one AdamW step
                                               of a 4-block transformer, warm-up (optimizer state)
                                               outside the recording
     OUTDIR/memory/named_step_trace.json.gz    torch.profiler trace of the same step, recorded at the
                                               same time (with_modules, record_shapes)
     OUTDIR/memory/named_step_names.json       every tensor the user's names reach, at the start and
                                               the end of the recording: name, category (parameter,
                                               gradient, optimizer state, buffer, input), data_ptr,
                                               storage bytes, numel x element size; the allocator's
                                               peak and what torch.cuda said around the step
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 8192, d: int = 768, heads: int = 12, layers: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


def resnet(classes: int = 100) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        Residual(64),
        Residual(64),
        Residual(64),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, classes),
    )


def gpt_step(model: nn.Module, opt: torch.optim.Optimizer, idx: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(idx)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), idx.flatten())
    loss.backward()
    opt.step()


def cnn_step(
    model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> None:
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def record(path: str, fn, detailed: bool, steps: int = 2) -> None:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=detailed,
        with_stack=detailed,
        with_modules=detailed,
    ) as prof:
        with record_function("cell:step"):
            for _ in range(steps):
                fn()
        torch.cuda.synchronize()
    export(prof, path)


def export(prof, path: str) -> None:
    raw = path[: -len(".gz")]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)


def attribution(out: str) -> dict:
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    gpt = GPT().cuda()
    opt = torch.optim.AdamW(gpt.parameters(), lr=1e-4)
    idx = torch.randint(0, 8192, (8, 512), device="cuda")
    record(os.path.join(out, "gpt_modules.json.gz"), lambda: gpt_step(gpt, opt, idx), True)
    record(os.path.join(out, "gpt_plain.json.gz"), lambda: gpt_step(gpt, opt, idx), False)

    cnn = resnet().cuda()
    sgd = torch.optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(64, 3, 64, 64, device="cuda")
    y = torch.randint(0, 100, (64,), device="cuda")
    record(os.path.join(out, "cnn_modules.json.gz"), lambda: cnn_step(cnn, sgd, x, y), True)
    record(os.path.join(out, "cnn_plain.json.gz"), lambda: cnn_step(cnn, sgd, x, y), False)

    compiled = torch.compile(GPT().cuda())
    copt = torch.optim.AdamW(compiled.parameters(), lr=1e-4)
    record(os.path.join(out, "gpt_compiled.json.gz"), lambda: gpt_step(compiled, copt, idx), True)
    return {
        "gpt_modules": [n for n, _ in gpt.named_modules() if n],
        "cnn_modules": [n for n, _ in cnn.named_modules() if n],
    }


def named_tensors(model: nn.Module, opt: torch.optim.Optimizer, inputs: dict) -> list[dict]:
    rows = []

    def add(name: str, category: str, t: torch.Tensor) -> None:
        rows.append(
            {
                "name": name,
                "category": category,
                "data_ptr": t.untyped_storage().data_ptr(),
                "storage_bytes": t.untyped_storage().nbytes(),
                "bytes": t.numel() * t.element_size(),
                "dtype": str(t.dtype),
                "shape": list(t.shape),
            }
        )

    for n, p in model.named_parameters():
        add(f"model.{n}", "parameter", p)
        if p.grad is not None:
            add(f"model.{n}.grad", "gradient", p.grad)
    for n, b in model.named_buffers():
        add(f"model.{n}", "buffer", b)
    names = {id(p): n for n, p in model.named_parameters()}
    for p, state in opt.state.items():
        for key, value in state.items():
            if torch.is_tensor(value) and value.is_cuda:
                add(f"opt.state[model.{names[id(p)]}][{key!r}]", "optimizer state", value)
    for n, t in inputs.items():
        add(n, "input", t)
    return rows


def named_memory(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = GPT(layers=4, d=1024, heads=16).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 8192, (8, 512), device="cuda")
    gpt_step(model, opt, idx)  # warm-up: AdamW's state exists before the recording
    opt.zero_grad(set_to_none=False)  # gradients kept, as a loop without set_to_none keeps them
    torch.cuda.synchronize()
    start = named_tensors(model, opt, {"idx": idx})
    allocated_before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=1_000_000)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        with_modules=True,
        with_stack=True,
    ) as prof:
        with record_function("cell:step"):
            gpt_step(model, opt, idx)
        torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(os.path.join(out, "named_step.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)
    export(prof, os.path.join(out, "named_step_trace.json.gz"))
    end = named_tensors(model, opt, {"idx": idx})
    facts = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "memory_allocated_before": allocated_before,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "memory_allocated_after": torch.cuda.memory_allocated(),
        "memory_reserved_after": torch.cuda.memory_reserved(),
        "modules": [n for n, _ in model.named_modules() if n],
        "start": start,
        "end": end,
    }
    with open(os.path.join(out, "named_step_names.json"), "w") as f:
        json.dump(facts, f, indent=1)


def main(out: str) -> None:
    facts = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    facts.update(attribution(os.path.join(out, "attribution")))
    with open(os.path.join(out, "attribution", "facts.json"), "w") as f:
        json.dump(facts, f, indent=1)
    named_memory(os.path.join(out, "memory"))


if __name__ == "__main__":
    main(sys.argv[1])
