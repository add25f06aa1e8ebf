"""The script the ``--nsys`` subprocess runs:  python -m gpumagic.capture.runner WORKDIR

It restores the shipped names, runs the setup code, warms the cell up (outside the capture range), then runs the
cell inside the NVTX range named in ``cell.json`` (nsys' capture range), synchronizing before the range closes.
It never starts torch.profiler: CUPTI allows one subscriber, and nsys is it (pytorch #117935). An exception in
the cell is written to ``error.txt`` (its traceback, as the cell's error) and the exit code is 3.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import traceback


def _nvtx():
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
    except Exception:  # noqa: BLE001
        pass
    import nvtx

    return (lambda msg: nvtx.push_range(msg)), (lambda: nvtx.pop_range())


def main(workdir: str) -> int:
    from gpumagic.capture.shipping import restore

    with open(os.path.join(workdir, "cell.json"), encoding="utf-8") as f:
        spec = json.load(f)
    ns: dict = {"__name__": "__main__"}
    ns.update(restore(workdir))
    push, pop = _nvtx()
    sync = lambda: None  # noqa: E731
    try:
        import torch

        if torch.cuda.is_available():
            sync = torch.cuda.synchronize
    except ImportError:
        pass
    status = {"names": sorted(k for k in ns if k != "__name__"), "phase": "setup"}
    try:
        for name, src in (("<gpuprofile-setup>", spec.get("setup") or ""), ("<gpuprofile-cell>", spec["cell"])):
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)  # tracebacks show the lines
        if spec.get("setup"):
            exec(compile(spec["setup"], "<gpuprofile-setup>", "exec"), ns)  # noqa: S102
        code = compile(spec["cell"], "<gpuprofile-cell>", "exec")
        status["phase"] = "warmup"
        for _ in range(spec.get("warmup", 1)):
            exec(code, ns)  # noqa: S102
        sync()
        status["phase"] = "capture"
        push(spec["label"])
        try:
            for _ in range(spec.get("iters", 1)):
                exec(code, ns)  # noqa: S102
            sync()
        finally:
            pop()
        status["phase"] = "done"
    except BaseException as exc:  # noqa: BLE001 - report whatever stopped the cell, then exit non-zero
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # drop this runner's frame
        with open(os.path.join(workdir, "error.txt"), "w", encoding="utf-8") as f:
            f.write("".join(traceback.format_exception(type(exc), exc, tb)))
        status["error"] = True
    with open(os.path.join(workdir, "status.json"), "w", encoding="utf-8") as f:
        json.dump(status, f)
    return 3 if status.get("error") else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
