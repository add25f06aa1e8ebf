"""The script the ``--nsys`` subprocess runs:  python -m gpumagic.capture.runner WORKDIR

It restores the shipped names, runs the setup code, then the same warm-up-then-capture loop as every backend
(``capture/cell.py``) with the NVTX range named in ``cell.json`` as the capture context: that range is nsys' capture
range. It never starts torch.profiler: CUPTI allows one subscriber, and nsys is it (pytorch #117935). An exception
in the cell is written to ``error.txt`` (its traceback, shown as the cell's error) and the exit code is 3; the
cell's value (its trailing expression's, last captured run) is written, as its repr, to ``value.txt``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def _nvtx() -> tuple[Callable[[str], Any], Callable[[], Any]]:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:  # noqa: BLE001 - torch missing or broken: the nvtx package still labels the range
        pass
    import nvtx

    return (lambda msg: nvtx.push_range(msg)), (lambda: nvtx.pop_range())


def _sync() -> Callable[[], None]:
    try:
        import torch
    except ImportError:
        return lambda: None
    return torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)


def _cell_traceback(exc: BaseException) -> str:
    """The traceback as the cell's own: the frames of gpumagic's loop around it are left out."""
    here = os.path.dirname(os.path.abspath(__file__))
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if not f.filename.startswith(here)])
    return "".join(te.format())


def main(workdir: str) -> int:
    from gpumagic.capture.cell import Cell, compile_source, run_cell
    from gpumagic.capture.shipping import restore

    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    ns: dict[str, Any] = {"__name__": "__main__"}
    ns.update(restore(workdir))
    push, pop = _nvtx()

    @contextmanager
    def nvtx_range() -> Iterator[None]:
        push(spec["label"])
        try:
            yield
        finally:
            pop()

    try:
        if spec.get("setup"):
            exec(compile_source(spec["setup"], "<gpuprofile-setup>"), ns)  # noqa: S102 - the user's setup code
        value = run_cell(Cell.of(spec["cell"]), ns, spec.get("warmup", 1), spec.get("iters", 1), nvtx_range, _sync())
        if value is not None:
            with open(os.path.join(workdir, "value.txt"), "w", encoding="utf-8") as f:
                f.write(repr(value))  # what Out[n] prints; the value itself stays here
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped the cell, then exit non-zero
        with open(os.path.join(workdir, "error.txt"), "w", encoding="utf-8") as f:
            f.write(_cell_traceback(exc))
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
