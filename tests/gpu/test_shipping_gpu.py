"""A notebook's training step on the GPU through every way ``--nsys`` runs it: CUDA tensors shipped
by CUDA IPC (the notebook's copy untouched), the warm child's capture and an in-place kernel under
``nsys launch`` give torch.profiler's kernels, fused AdamW's included."""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, os.path.abspath(BENCH))
from train_step import STEP, notebook, optimizer_kernels  # noqa: E402


def test_cuda_tensors_travel_by_ipc_and_the_notebooks_copy_is_untouched(tmp_path):
    from gpumagic.capture.child.shipping import IPC, free_names, ship

    ns = {"__name__": "__main__"}
    exec(notebook("step"), ns)  # noqa: S102 - the notebook's cells
    exec(STEP, ns)  # noqa: S102 - AdamW's state exists
    before = [p.detach().clone() for p in ns["llm"].parameters()]
    manifest = ship(free_names(STEP), ns, str(tmp_path))
    assert manifest.bytes_by_way.get(IPC, 0) > 100e6 and not manifest.host_reasons
    assert "by CUDA IPC" in manifest.note() and "cuda:0" in manifest.note()
    child = (
        "import torch\nfrom gpumagic.capture.child.shipping import restore\n"
        f"ns = restore({str(tmp_path)!r})\n"
        "llm, opt = ns['llm'], ns['opt']\n"
        "assert opt.param_groups[0]['params'][0] is llm.tok.weight\n"
        "assert opt.state[llm.tok.weight]['exp_avg'].is_cuda\n"
        "with torch.no_grad():\n    [p.add_(1.0) for p in llm.parameters()]\n"
        "torch.cuda.synchronize()\nprint('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
    del manifest
    torch.cuda.ipc_collect()
    assert all(torch.equal(a, b) for a, b in zip(before, ns["llm"].parameters()))


def _kernels(rep) -> collections.Counter:
    """The kernels of a report, each as torch.profiler spells it: nsys demangles names its own way
    (``<(int)4>``, ``[lambda() (instance 1)]``), so an nsys report's are its mangled names
    demangled as kineto demangles them (``kernels.spelling.demangle``)."""
    if rep.trace.meta.get("backend") != "nsys":
        return collections.Counter(rep.trace.kernels["name"].astype(str))
    return _sqlite_kernels(_sqlite_of(rep))


def _sqlite_of(rep) -> str:
    return next(n.split(": ", 1)[1] for n in rep.notes if n.startswith("SQLite export: "))


def _sqlite_kernels(path: str) -> collections.Counter:
    import sqlite3

    from gpumagic.kernels.spelling import demangle

    con = sqlite3.connect(path)
    try:
        rows = con.execute(
            "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
            "ON s.id = COALESCE(k.mangledName, k.demangledName)"
        ).fetchall()
    finally:
        con.close()
    return collections.Counter(demangle(name) for (name,) in rows)


@pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys on PATH")
def test_a_notebook_training_step_under_nsys_has_torch_profilers_kernels(tmp_path):
    """torch.profiler in the notebook's process, the warm child under nsys and a kernel started by
    gpumagic's nsys kernel spec (in place): one multiset of kernels, the optimizer's among them."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_line_magic("config", f"GpuMagics.profile_dir = {str(tmp_path)!r}")
    shell.run_cell(notebook("step")).raise_error()
    shell.run_cell_magic("gpuprofile", "--nsys -w 1 -o ns --no-timeline", STEP)
    shell.run_cell_magic("gpuprofile", "-w 1 -o tp --no-timeline", STEP)
    reference, warm = _kernels(shell.user_ns["tp"]), _kernels(shell.user_ns["ns"])
    adam = optimizer_kernels(list(reference))
    assert adam and sum(reference[n] for n in adam) >= 1
    assert sum(warm.values()) == sum(reference.values())
    assert warm == reference, (warm - reference, reference - warm)
    in_place = in_place_kernels(tmp_path)
    assert in_place == reference, (in_place - reference, reference - in_place)


def in_place_kernels(tmp_path) -> collections.Counter:
    """The step's kernels in a Jupyter kernel of gpumagic's nsys spec, profiled in place."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    from gpumagic.notebook import nsys_kernel

    path = nsys_kernel.install(prefix=str(tmp_path / "spec"))
    km = KernelManager(
        kernel_name=nsys_kernel.DEFAULT_NAME,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[os.path.dirname(path)]),
    )
    km.start_kernel(cwd=str(tmp_path))
    client = km.client()
    client.start_channels()
    out: list[str] = []
    try:
        client.wait_for_ready(timeout=120)
        cells = [
            "%load_ext gpumagic",
            f"%config GpuMagics.profile_dir = {str(tmp_path)!r}",
            notebook("step"),
            "%%gpuprofile --nsys -w 1 -o rep --no-timeline\n" + STEP,
            "print(rep.trace.meta['child'])\n"
            "print([n for n in rep.notes if n.startswith('SQLite export: ')][0][15:])",
        ]
        for cell in cells:
            reply = client.execute_interactive(
                cell,
                timeout=300,
                output_hook=lambda m: out.append(m["content"].get("text", "")),
            )
            assert reply["content"]["status"] == "ok", (cell[:40], reply["content"], out)
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)
    lines = "".join(out).strip().splitlines()
    assert lines[-2] == "in place", lines
    return _sqlite_kernels(lines[-1])
