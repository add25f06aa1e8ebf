"""%%gpuprofile --memory on a real GPU: the figures against the allocator's own, and the allocator
left as found."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CELL = """
opt.zero_grad(set_to_none=True)
loss = model(x).float().pow(2).mean()
loss.backward()
opt.step()
"""


@pytest.fixture
def shell(ip):
    """The suite's shared shell (tests/conftest.py: one InteractiveShell per process) with a model
    to train."""
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)
    ).cuda()
    ip.user_ns.update(
        torch=torch,
        model=model,
        opt=torch.optim.AdamW(model.parameters()),
        x=torch.randn(2048, 1024, device="cuda"),
    )
    yield ip
    for name in ("model", "opt", "x", "loss", "mem"):
        ip.user_ns.pop(name, None)
    torch.cuda.synchronize()


def _history_enabled() -> bool:
    return bool(torch._C._cuda_isHistoryEnabled())


def test_categories_sum_and_the_peak_is_the_allocators(shell):
    torch.cuda.synchronize()
    # this test's own reset, before the cell (gpumagic never resets)
    torch.cuda.reset_peak_memory_stats()
    shell.run_cell_magic("gpuprofile", "--memory -o mem", CELL)
    peak_counter = torch.cuda.max_memory_allocated()
    view = shell.user_ns["mem"]
    m = view.analysis
    cats = m.samples[
        [
            "parameters",
            "optimizer state",
            "inputs",
            "activations",
            "gradients",
            "temporaries",
            "unknown",
        ]
    ]
    assert (
        (cats.sum(axis=1) - m.samples["allocated"]).abs() <= 0.01 * m.samples["allocated"]
    ).all()
    # the counter also saw the warm-up (outside the recording): the cell's peak is at most the
    # counter's
    assert m.peak_bytes <= peak_counter
    assert m.at_end["allocated"] == torch.cuda.memory_allocated()
    # parameters and optimizer state were made before the recording: the namespace names them
    assert m.category_at_peak["parameters"] > 0 and m.category_at_peak["optimizer state"] > 0
    assert not _history_enabled()  # turned off again: it was off before


def test_peak_equals_max_memory_allocated_over_the_cell(shell):
    shell.run_cell_magic(
        "gpuprofile", "-w 1 --memory -o mem", CELL
    )  # warm: the optimizer state exists
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    shell.run_cell_magic("gpuprofile", "-w 0 --memory -o mem", CELL)
    assert shell.user_ns["mem"].analysis.peak_bytes == torch.cuda.max_memory_allocated()


def test_peak_counters_and_a_users_own_recording_are_left_alone(shell):
    shell.run_cell(CELL)  # warm
    torch.cuda.synchronize()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    del big
    before = torch.cuda.memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=50_000, stacks="python")
    try:
        shell.run_cell_magic("gpuprofile", "--memory -o mem", CELL)
        assert _history_enabled()  # the user's recording still on
        after = torch.cuda.memory_stats()
        assert (
            after["allocated_bytes.all.peak"] == before["allocated_bytes.all.peak"]
        )  # the earlier peak stands
        notes = " ".join(shell.user_ns["mem"].notes)
        assert "own settings" in notes
        # the user's history still records: an allocation made now is in their snapshot
        y = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
        assert any(e["action"] == "alloc" and e["size"] == 3 << 20 for e in trace)
        del y
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    assert not _history_enabled()


def test_out_of_memory_is_shown_then_raised(shell):
    total = torch.cuda.get_device_properties(0).total_memory
    shell.user_ns["n"] = total * 2
    result = shell.run_cell(
        "%%gpuprofile -w 0 --memory -o mem\ny = torch.empty(n, dtype=torch.uint8, device='cuda')"
    )
    assert isinstance(result.error_in_exec, torch.OutOfMemoryError)
    m = shell.user_ns["mem"].analysis
    # a request beyond the device is refused before the allocator records an oom entry: the bytes
    # are the error's "Tried to allocate 279.60 GiB", rounded to 2 decimals there
    assert m.oom is not None and m.oom["bytes"] >= total * 2 * 0.999
    assert m.findings[0].kind == "memory_oom"
    assert not _history_enabled()
    shell.user_ns.pop("n", None)


# --- every byte named: an AdamW step of a transformer ---------------------------------------------

STEP = """
opt.zero_grad(set_to_none=True)
loss = model(idx).mean()
loss.backward()
opt.step()
"""


def _models():
    """The models of the committed recordings (tests/data/capture/module_traces.py)."""
    path = pathlib.Path(__file__).parents[1] / "data" / "capture" / "module_traces.py"
    spec = importlib.util.spec_from_file_location("module_traces", path)
    mt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mt)
    return mt


def _gpt(**kw):
    """The 4-block transformer of the committed recordings."""
    return _models().GPT(**kw)


def _blocks(tensors) -> int:
    """What the allocator counts for these storages: each rounded up to its 512-byte blocks."""
    import numpy as np

    from gpumagic.analysis.memory import block_bytes

    sizes = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return int(block_bytes(np.array(list(sizes.values()), np.int64)).sum())


@pytest.fixture
def transformer(shell):
    ip = shell
    # d 1024: a cached block handed out whole can be up to 1 MiB over its request, so a model too
    # small makes a few such blocks more than the 1% allowed
    model = _gpt(vocab=8192, d=1024, heads=16, layers=4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 8192, (8, 512), device="cuda")
    ip.user_ns.update(torch=torch, model=model, opt=opt, idx=idx, w=model.head.weight)
    ip.run_cell(STEP)  # warm: AdamW's state exists before the recording
    torch.cuda.synchronize()
    yield ip, model, opt
    for name in ("model", "opt", "idx", "w", "loss", "mem"):
        ip.user_ns.pop(name, None)
    torch.cuda.synchronize()


def test_a_training_step_every_byte_named(transformer):
    shell, model, opt = transformer
    hooks = torch.nn.modules.module
    global_hooks = (len(hooks._global_forward_hooks), len(hooks._global_forward_pre_hooks))
    ptrs = [p.data_ptr() for p in model.parameters()]
    torch.cuda.reset_peak_memory_stats()  # the test's own reset (gpumagic never resets)
    shell.run_cell_magic("gpuprofile", "-w 0 --memory -o mem", STEP)
    peak_counter = torch.cuda.max_memory_allocated()
    m = shell.user_ns["mem"].analysis
    assert m.peak_bytes == peak_counter
    cats = m.category_at_peak
    params = list(model.parameters())
    state = [t for s in opt.state.values() for t in s.values() if t.is_cuda]
    for got, want in (
        (cats["parameters"], _blocks(params)),
        (cats["optimizer state"], _blocks(state)),
        (
            int(m.by("category", at="end").set_index("category").loc["gradients", "bytes"]),
            _blocks([p.grad for p in params]),
        ),
    ):
        assert abs(got - want) <= 0.01 * want, (got, want)
    # a parameter also bound to a name (w = model.head.weight) is counted once, as the parameter
    live = m.live_at_peak
    assert "model.head.weight" in set(live["name"]) and "w" not in set(live["name"])
    # activations: the module whose forward made them
    act = live[live["category"] == "activations"]
    assert act["bytes"].sum() > 0
    in_module = act.loc[act["module"].str.startswith("model."), "bytes"].sum()
    assert in_module >= 0.9 * act["bytes"].sum()
    # every breakdown of the peak sums to it, to the byte
    for column in ("category", "module", "name", "line", "op"):
        assert int(m.by(column)["bytes"].sum()) == m.peak_bytes, column
    # the estimates, labelled as such
    assert any(f.kind == "memory_estimate_checkpointing" for f in m.findings)
    # the time axis: phases and the modules that ran, in the figure below the memory
    assert {"phase", "module"} <= set(m.ranges["lane"])
    assert {"model.blocks.0", "model.blocks.3 (backward)"} <= set(m.ranges["label"])
    assert next(f for f in m.findings if f.kind == "memory_when").numbers["phase"]
    plot, lanes = shell.user_ns["mem"].figure().children
    assert lanes.x_range is plot.x_range
    # nothing left behind: no hooks, the parameters where they were, the recording off
    assert (len(hooks._global_forward_hooks), len(hooks._global_forward_pre_hooks)) == global_hooks
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert [p.data_ptr() for p in model.parameters()] == ptrs
    assert not _history_enabled()


COMPILED_STEP = """
opt.zero_grad(set_to_none=True)
loss = compiled(idx).mean()
loss.backward()
opt.step()
"""


def test_a_compiled_model_is_named_and_stays_compiled(shell):
    from torch._dynamo.utils import counters

    model = _gpt(vocab=8192, d=1024, heads=16, layers=2).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, 8192, (8, 512), device="cuda")
    shell.user_ns.update(model=model, compiled=torch.compile(model), opt=opt, idx=idx)
    try:
        shell.run_cell(COMPILED_STEP)  # compiles, and makes AdamW's state
        graphs = counters["stats"]["unique_graphs"]
        shell.run_cell_magic("gpuprofile", "--memory -o mem", COMPILED_STEP)
        assert counters["stats"]["unique_graphs"] == graphs  # nothing compiled again
        m = shell.user_ns["mem"].analysis
        want = _blocks(list(model.parameters()))
        assert abs(m.category_at_peak["parameters"] - want) <= 0.01 * want
        named = set(m.live_at_peak["name"])
        assert "model.head.weight" in named  # the model's own name, not compiled._orig_mod
        assert not any("_orig_mod" in n for n in named)
        for column in ("category", "module", "line", "op"):
            assert int(m.by(column)["bytes"].sum()) == m.peak_bytes, column
    finally:
        for name in ("compiled", "mem", "loss"):
            shell.user_ns.pop(name, None)


def test_label_and_vs_compare_two_memory_runs(transformer, hist, capsys):
    shell = transformer[0]
    shell.run_cell_magic("gpuprofile", "--memory -l full -o mem", STEP)
    shell.user_ns["idx"] = shell.user_ns["idx"][:4]  # half the batch
    capsys.readouterr()
    shell.run_cell_magic("gpuprofile", "--memory --vs full -o half", STEP)
    out = capsys.readouterr().out
    full, half = shell.user_ns["mem"].analysis, shell.user_ns["half"].analysis
    assert half.peak_bytes < full.peak_bytes
    assert "Memory vs #1 full: peak" in out and "By category: " in out
    assert "activations -" in out  # half the batch, half the activations
    import gpumagic

    saved = gpumagic.history(kind="memory")
    assert saved["label"].fillna("").tolist() == ["full", ""]


CNN_STEP = """
opt.zero_grad(set_to_none=True)
torch.nn.functional.cross_entropy(net(images), labels).backward()
opt.step()
"""


def test_a_convolutional_network_s_activations_go_to_its_blocks(shell):
    net = _models().resnet().cuda()
    shell.user_ns.update(
        net=net,
        opt=torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9),
        images=torch.randn(64, 3, 64, 64, device="cuda"),
        labels=torch.randint(0, 100, (64,), device="cuda"),
    )
    try:
        shell.run_cell(CNN_STEP)  # the momentum buffers exist
        shell.run_cell_magic("gpuprofile", "--memory -o mem", CNN_STEP)
        m = shell.user_ns["mem"].analysis
        live = m.live_at_peak
        act = live[live["category"] == "activations"]
        in_module = act.loc[act["module"].str.startswith("net."), "bytes"].sum()
        assert in_module >= 0.9 * act["bytes"].sum()
        # the three residual blocks of one Sequential told apart, and conv1 from conv2 in each
        modules = set(act["module"])
        # (the peak falls in backward, in the last block's: its own are partly freed by then)
        assert {"net.3.conv1", "net.3.conv2", "net.4.conv1", "net.4.conv2"} <= modules
        assert any(m.startswith("net.5.") for m in modules)
        state = [t for s in shell.user_ns["opt"].state.values() for t in s.values()]
        want = _blocks([t for t in state if torch.is_tensor(t) and t.is_cuda])
        assert abs(m.category_at_peak["optimizer state"] - want) <= 0.01 * want + 512 * len(state)
    finally:
        for name in ("net", "opt", "images", "labels", "mem"):
            shell.user_ns.pop(name, None)


NOTEBOOK_LM = """
import torch
from torch import nn
import torch.nn.functional as F

class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))

class TiedLM(nn.Module):
    def __init__(self, vocab=8192, d=1024, heads=16, layers=4):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx, tgt):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1).float(), tgt.flatten())

llm = TiedLM().cuda()
opt = torch.optim.AdamW(llm.parameters(), lr=1e-4)
idx = torch.randint(0, 8192, (8, 512), device="cuda")
tgt = torch.randint(0, 8192, (8, 512), device="cuda")
"""

NOTEBOOK_STEP = """
opt.zero_grad()
for micro in range(2):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = llm(idx, tgt) / 2
    loss.backward()
opt.step()
"""


def test_a_notebook_transformers_step_names_backwards_bytes_and_its_tied_head(shell, own_names):
    shell.run_cell(NOTEBOOK_LM, store_history=True)
    shell.run_cell(NOTEBOOK_STEP)  # AdamW's state exists before the recording
    torch.cuda.synchronize()
    try:
        shell.run_cell_magic("gpuprofile", "-w 0 --memory -o mem", NOTEBOOK_STEP)
        m = shell.user_ns["mem"].analysis
        live = m.live_at_peak
        engine = live[live["op"] == "(no Python stack)"]
        for column in ("module", "line"):
            unnamed = int(live.loc[live[column] == "(no Python stack)", "bytes"].sum())
            assert unnamed <= 0.05 * m.peak_bytes, (column, unnamed, m.peak_bytes)
        backward = engine[engine["module"].str.endswith(" (backward)")]
        assert int(backward["bytes"].sum()) > 0
        assert backward["line"].str.endswith(" (backward)").all()
        assert "llm.tok.weight (tied: llm.head.weight)" in set(live["name"])
        for column in ("category", "module", "name", "line", "op"):
            assert int(m.by(column)["bytes"].sum()) == m.peak_bytes, column
    finally:
        for name in ("llm", "opt", "idx", "tgt", "loss", "mem", "micro"):
            shell.user_ns.pop(name, None)
        torch.cuda.synchronize()
