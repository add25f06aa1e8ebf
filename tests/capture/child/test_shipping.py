"""A cell's names on their way to a tool's subprocess (``capture/child/shipping.py``): which names,
one serialization with identity kept, the notebook's own classes and functions by value, and what
cannot travel named before anything runs. The last tests run a training step of a model defined in
the notebook through every tool path (stand-in nsys and ncu) and compare it with the same cell run
in the notebook's own process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest
from IPython.utils.capture import capture_output

from gpumagic.capture.child.shipping import ShippingError, free_names, restore, ship
from gpumagic.capture.ncu import backend as ncu
from gpumagic.capture.nsys import backend as nsys
from gpumagic.capture.options import NcuOptions, NsysOptions

from ...helpers import FAKE_NCU, FAKE_NSYS

torch = pytest.importorskip("torch")


def test_free_names():
    assert free_names("y = torch.matmul(A, B) + x\nz = y * 2\nprint(len(z))") == [
        "torch",
        "A",
        "B",
        "x",
    ]
    assert free_names("for i in range(3): pass") == []
    assert free_names("x = x + 1") == ["x"] and free_names("n += 1") == ["n"]
    assert free_names("import numpy as np\nnp.ones(3)") == []
    assert free_names("def f(a):\n    return a * W\nf(v)") == ["W", "v"]
    assert free_names("[w * q for w in ws]") == ["ws", "q"]


def test_ship_and_restore_round_trip(tmp_path):
    import json as json_module

    a = torch.arange(6.0).reshape(2, 3)
    ns = {
        "a": a,
        "view": a[1],
        "cfg": {"k": [1, 2]},
        "jm": json_module,
        "lin": torch.nn.Linear(2, 2),
        "half": torch.ones(3, dtype=torch.bfloat16),
        "empty": torch.empty(0),
        "unused": object(),
    }
    names = ["a", "view", "cfg", "jm", "lin", "half", "empty", "missing"]
    manifest = ship(names, ns, str(tmp_path))
    back = restore(str(tmp_path))
    assert torch.equal(back["a"], a) and back["cfg"] == {"k": [1, 2]}
    assert back["jm"] is json_module and isinstance(back["lin"], torch.nn.Linear)
    assert back["half"].dtype == torch.bfloat16 and back["empty"].numel() == 0
    assert "unused" not in back and "missing" not in back
    # a view and its base share one storage there as here, and it is not the notebook's
    assert back["view"].untyped_storage().data_ptr() == back["a"].untyped_storage().data_ptr()
    back["view"].fill_(7)
    assert float(back["a"][1].sum()) == 21.0 and float(a.sum()) == 15.0
    assert manifest.storages == 5  # a and its view once, lin's two, half, empty
    assert manifest.note().startswith("Shipped 7 names in one serialization")


def test_everything_that_cannot_travel_is_named_at_once_and_nothing_is_written(tmp_path):
    loader = torch.utils.data.DataLoader(list(range(4)), num_workers=2)
    holder = torch.nn.Linear(2, 2)
    f = open(os.devnull)  # noqa: SIM115 - the open file is the point
    holder.log = f
    sock = socket.socket()
    try:
        ns = {
            "gen": (i for i in range(3)),
            "f": f,
            "sock": sock,
            "loader": loader,
            "holder": holder,
            "lock": threading.Lock(),
            "fine": torch.ones(2),
        }
        with pytest.raises(ShippingError) as exc:
            ship(list(ns), ns, str(tmp_path))
    finally:
        f.close()
        sock.close()
    problems = exc.value.problems
    assert set(problems) == {"gen", "f", "sock", "loader", "holder", "lock"}
    assert problems["gen"].startswith("a generator") and "--setup" in problems["gen"]
    assert problems["f"].startswith(f"an open file ({os.devnull})")
    assert problems["sock"].startswith("a socket")
    assert "2 worker processes" in problems["loader"] and "num_workers=0" in problems["loader"]
    assert problems["holder"].startswith("holds an open file")  # found inside the model
    assert "cannot be pickled" in problems["lock"]
    msg = str(exc.value)
    assert all(f"  {n}: " in msg for n in problems) and "nothing has run yet" in msg
    assert not list(tmp_path.iterdir())


# A notebook's cells: a config dataclass, a model class with tied embedding and head, a lambda
# and a helper that read notebook globals, then the model, its optimizer and scheduler.
NOTEBOOK = """
import dataclasses, os
import torch
import torch.nn.functional as F

@dataclasses.dataclass
class Config:
    vocab: int = 32
    dim: int = 16
    scale: float = 1.0

act = lambda t: torch.relu(t)

class TinyLM(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok = torch.nn.Embedding(cfg.vocab, cfg.dim)
        self.body = torch.nn.Linear(cfg.dim, cfg.dim)
        self.head = torch.nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.head.weight = self.tok.weight  # tied

    def forward(self, idx):
        return self.head(act(self.body(self.tok(idx))))

def loss_of(logits, y):
    return F.cross_entropy(logits.flatten(0, 1), y.flatten()) * cfg.scale

torch.manual_seed(0)
cfg = Config()
llm = TinyLM(cfg)
opt = torch.optim.AdamW(llm.parameters(), lr=1e-2)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
idx = torch.randint(0, cfg.vocab, (2, 6))
tgt = torch.randint(0, cfg.vocab, (2, 6))
"""

# The training step a user profiles: it checks, where it runs, that the optimizer holds the
# model's own parameters, and writes what the step did.
STEP = """
assert opt.param_groups[0]["params"][0] is llm.tok.weight, "the optimizer holds copies"
assert llm.head.weight is llm.tok.weight and sched.optimizer is opt
assert isinstance(cfg, Config) and isinstance(llm, TinyLM)
before = llm.body.weight.detach().clone()
opt.zero_grad()
for micro in range(2):
    loss = loss_of(llm(idx), tgt) / 2
    loss.backward()
opt.step()
sched.step()
moved = not torch.equal(before, llm.body.weight)
grads = sum(p.grad is not None for p in llm.parameters())
with open(marker + os.environ.get("RANK", ""), "a") as out:
    out.write(f"{moved} {grads} {loss.item():.6f} {opt.param_groups[0]['lr']:g}\\n")
"""


def _state(ns):
    return {k: v.clone() for k, v in ns["llm"].state_dict().items()}


def test_a_notebook_training_step_steps_the_models_own_parameters_in_the_subprocess(ip, tmp_path):
    """Shipped by hand and restored in a fresh Python: the classes, the lambda and the helper came
    by value, the optimizer's parameters are the model's, and its step moves them there and
    nowhere here."""
    ip.run_cell(NOTEBOOK).raise_error()
    assert type(ip.user_ns["llm"]).__module__ == "__main__"
    ip.user_ns["marker"] = str(tmp_path / "steps.txt")
    before = _state(ip.user_ns)
    ship(free_names(STEP), ip.user_ns, str(tmp_path))
    child = (
        "from gpumagic.capture.child.shipping import restore\n"
        f"ns = {{'__name__': '__main__', **restore({str(tmp_path)!r})}}\n"
        f"exec(compile({STEP!r}, '<cell>', 'exec'), ns)\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "overridden" not in done.stderr  # the scheduler's wrapper of opt.step came back
    moved, grads, _loss, lr = (tmp_path / "steps.txt").read_text().split()
    assert (moved, grads, lr) == ("True", "3", "0.005")  # tok (tied head), body weight and bias
    after = _state(ip.user_ns)
    assert all(torch.equal(before[k], after[k]) for k in before)  # the notebook's weights stay


def _nsys_run(ip, tmp_path, monkeypatch, warm: bool):
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    monkeypatch.setenv("FAKE_NSYS_STATE", str(tmp_path / "nsys-state"))
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path / 'profiles')!r}")
    ip.run_line_magic("config", f"GpuMagics.nsys_warm_child = {warm}")
    try:
        with capture_output():
            ip.run_cell_magic("gpuprofile", "--nsys -w 1 -o rep", STEP)
    finally:
        if warm:
            from gpumagic.capture.nsys import warm as nsys_warm

            nsys_warm.retire_current()
    return ip.user_ns["rep"].notes


def _ncu_run(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    opts = NcuOptions(
        ncu_path=FAKE_NCU, profile_dir=str(tmp_path / "profiles"), kernel_filter="regex:gemm"
    )
    return ncu.capture(STEP, "cell:step", namespace=ip.user_ns, warmup=1, options=opts).notes


def _nproc_run(ip, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_MODE", "ok")
    opts = NsysOptions(nsys_path=FAKE_NSYS, profile_dir=str(tmp_path / "profiles"), nproc=2)
    return nsys.capture(STEP, "cell:step", namespace=ip.user_ns, warmup=1, options=opts).notes


@pytest.mark.parametrize("path", ["nsys", "nsys-warm", "ncu", "nproc"])
def test_every_tool_path_gives_the_in_process_answer_for_a_notebook_training_step(
    ip, tmp_path, monkeypatch, path
):
    """The same cell, one warm-up and one captured run, under a tool's subprocess and then in the
    notebook's own process (``%%gpuprofile``, torch.profiler): the same losses and learning rates
    step by step, the optimizer stepping the model's own parameters in both, and the notebook's
    weights untouched by the subprocess."""
    ip.run_cell(NOTEBOOK).raise_error()
    marker = tmp_path / "steps.txt"
    ip.user_ns["marker"] = str(marker)
    before = _state(ip.user_ns)
    if path == "ncu":
        notes = _ncu_run(ip, tmp_path, monkeypatch)
    elif path == "nproc":
        notes = _nproc_run(ip, tmp_path, monkeypatch)
    else:
        notes = _nsys_run(ip, tmp_path, monkeypatch, warm=path == "nsys-warm")
    assert any(n.startswith("Shipped ") and "one serialization" in n for n in notes)
    after = _state(ip.user_ns)
    assert all(torch.equal(before[k], after[k]) for k in before)
    tool_files = (
        [marker.with_name(marker.name + r) for r in ("0", "1")] if path == "nproc" else [marker]
    )
    tool_lines = [p.read_text().splitlines() for p in tool_files]
    marker.unlink(missing_ok=True)
    with capture_output():
        ip.run_cell_magic("gpuprofile", "-w 1 --no-timeline", STEP)
    here = marker.read_text().splitlines()
    assert len(here) == 2 and all(line.startswith("True 3 ") for line in here)
    assert all(lines == here for lines in tool_lines), (tool_lines, here)


def test_the_magic_names_what_cannot_travel_before_nsys_runs(ip, tmp_path, monkeypatch):
    log = tmp_path / "nsys.log"
    monkeypatch.setenv("FAKE_NSYS_LOG", str(log))
    ip.run_line_magic("config", f"GpuMagics.nsys_path = {FAKE_NSYS!r}")
    ip.run_cell("batches = (b for b in range(3))\ndef helper():\n    return next(batches)")
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="helper: holds a generator") as exc:
        ip.run_cell_magic("gpuprofile", "--nsys", "helper()\nnext(batches)")
    assert "batches: a generator" in str(exc.value)
    assert not log.exists()


def test_a_name_that_cannot_be_rebuilt_in_the_subprocess_is_named_with_its_error(tmp_path):
    """A value whose class lives in a module the subprocess cannot import: the error names the
    value and the missing module."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "only_here.py").write_text("class Box:\n    def __init__(self):\n        self.n = 3\n")
    sys.path.insert(0, str(mods))
    try:
        import only_here

        (tmp_path / "out").mkdir()
        ship(["fine", "box"], {"fine": [1, 2], "box": only_here.Box()}, str(tmp_path / "out"))
    finally:
        sys.path.remove(str(mods))
        sys.modules.pop("only_here", None)
    child = (
        f"from gpumagic.capture.child.shipping import restore\nrestore({str(tmp_path / 'out')!r})"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode != 0
    assert "RestoreError: 'box' could not be rebuilt in the subprocess (ModuleNotFoundError" in (
        done.stderr
    )


def test_a_second_copy_that_does_not_fit_is_said_before_anything_runs(monkeypatch):
    """The subprocess needs its own copy of the CUDA tensors: where the device's free memory
    (less a context's 1 GiB) cannot hold it, the message says how much and what to do."""
    from gpumagic.capture.child import shipping

    class FakeCuda:
        @staticmethod
        def mem_get_info(device):
            return (3 << 30, 80 << 30)  # 3 GiB free of 80

    class FakeTorch:
        cuda = FakeCuda()
        device = staticmethod(lambda d: d)

    shipping._check_fits({"cuda:0": 1 << 30}, FakeTorch)  # 1 GiB + 1 GiB margin fits in 3
    with pytest.raises(ShippingError) as exc:
        shipping._check_fits({"cuda:0": 5 << 30}, FakeTorch)
    ((where, why),) = exc.value.problems.items()
    assert where == "(the CUDA tensors on cuda:0)"
    assert "5.37 GB" in why and "3.22 GB free" in why and "torch.cuda.empty_cache()" in why


def test_ranks_and_the_switch_send_cuda_storages_through_the_host(monkeypatch):
    from gpumagic.capture.child.shipping import HOST, _ipc_way

    assert _ipc_way(object(), for_ranks=True) == (
        HOST,
        "ranks load every tensor onto their own GPU",
    )
    monkeypatch.setenv("GPUMAGIC_SHIP_IPC", "0")
    assert _ipc_way(object(), for_ranks=False) == (HOST, "GPUMAGIC_SHIP_IPC=0")
    monkeypatch.setenv("GPUMAGIC_SHIP_IPC", "1")

    class Unshareable:
        def _share_cuda_(self):
            raise RuntimeError("expandable segments cannot be shared")

    way, why = _ipc_way(Unshareable(), for_ranks=False)
    assert way == HOST and why.startswith("CUDA IPC refused a storage (RuntimeError: expandable")
