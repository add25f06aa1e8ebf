"""Launches a rank issued after the last launch whose kernel the capture holds came after the
capture (their kernels ran once it had ended): a job says so, as one trace does, and never calls
them lost by the profiler."""

from __future__ import annotations

import gzip
import json
import shutil

from gpumagic import load_trace, read_job
from gpumagic.analysis import findings

from .conftest import PER_RANK


def with_late_launches(tmp_path, n: int):
    folder = tmp_path / "torch"
    shutil.copytree(PER_RANK / "torch", folder)
    path = folder / "rank0.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    pid = next(e["pid"] for e in events if e.get("cat") == "cuda_runtime")
    events += [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid}
        | {"ts": end + 10 + 5 * i, "dur": 3, "args": {"correlation": 900_000 + i}}
        for i in range(n)
    ]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(data, f)
    return folder


def test_launches_after_the_capture_are_said_so_not_lost(tmp_path):
    folder = with_late_launches(tmp_path, 7)
    job = {f.kind: f for f in read_job(folder, kind="chrome").findings()}
    assert "kernels_missing" not in job
    assert job["launches_after_capture"].numbers["after_capture"] == 7
    assert "7 kernel launches came after the capture" in job["launches_after_capture"].message
    one = {f.kind: f for f in findings(load_trace(folder))}
    assert "kernels_missing" not in one and "launches_after_capture" in one
