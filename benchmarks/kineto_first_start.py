"""Where torch.profiler's first start in a process spends its time, and what removes the wait.

Each row is a fresh process that runs a small CUDA cell (a conv and a GEMM) once, then opens its
first torch.profiler capture of the same cell and times the start (``profile.__enter__``), the cell,
and the stop. The rows differ only in the activities asked for and in the environment, so the
settings that change the first start stand side by side in one run. With ``--evidence DIR`` it also
writes what shows where the time goes: a cProfile of the first start (Python frames and the C calls
they make), kineto's own verbose log, and, where the tools exist, ``strace -f -tt -T`` of the start
and native stacks (``py-spy dump --native``) taken while it waits.

    python benchmarks/kineto_first_start.py [--evidence DIR] [--json
    benchmarks/results/kineto_first_start.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
from torch.profiler import ProfilerActivity, profile
x = torch.randn(32, 64, 56, 56, device="cuda")
conv = torch.nn.Conv2d(64, 64, 3, padding=1).cuda()
a = torch.randn(2048, 2048, device="cuda")
def cell():
    return conv(x).sum() + (a @ a).sum()
cell(); torch.cuda.synchronize()
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if os.environ.get("ROW_CUDA") == "1" else [])
out = {"import_and_cell_s": time.perf_counter() - t0}
prof = profile(activities=acts)
stats = None
if os.environ.get("ROW_CPROFILE"):
    import cProfile, pstats, io
    pr = cProfile.Profile()
print("STARTING", flush=True)
t = time.perf_counter()
if os.environ.get("ROW_CPROFILE"):
    pr.enable()
import contextlib
if os.environ.get("ROW_DEFER"):
    from gpumagic.gpu_activity.profiler_start import inductor_import_deferred as ctx
else:
    ctx = contextlib.nullcontext
with ctx():
    prof.__enter__()
if os.environ.get("ROW_CPROFILE"):
    pr.disable()
out["start_s"] = time.perf_counter() - t
t = time.perf_counter(); cell(); torch.cuda.synchronize(); out["cell_s"] = time.perf_counter() - t
t = time.perf_counter(); prof.__exit__(None, None, None); out["stop_s"] = time.perf_counter() - t
out["events"] = len(prof.events())
t = time.perf_counter()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p2:
    cell(); torch.cuda.synchronize()
out["second_capture_s"] = time.perf_counter() - t
if os.environ.get("ROW_CPROFILE"):
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(30)
    out["cprofile"] = s.getvalue()
print("RESULT " + json.dumps(out), flush=True)
"""

#: (row name, activities with CUDA?, extra environment)
ROWS = [
    ("CPU only, default", False, {}),
    ("CPU+CUDA, default", True, {}),
    ("CPU only, KINETO_USE_DAEMON=0", False, {"KINETO_USE_DAEMON": "0"}),
    ("CPU only, KINETO_DAEMON_INIT_DELAY_S=0", False, {"KINETO_DAEMON_INIT_DELAY_S": "0"}),
    ("CPU only, gpumagic's start (Inductor import deferred)", False, {"ROW_DEFER": "1"}),
    ("CPU+CUDA, gpumagic's start (Inductor import deferred)", True, {"ROW_DEFER": "1"}),
]


def run_row(
    env_extra: dict[str, str], cuda: bool, prefix: list[str] | None = None, timeout: float = 300
) -> dict:
    env = {**os.environ, **env_extra, "ROW_CUDA": "1" if cuda else "0"}
    cmd = [*(prefix or []), sys.executable, "-c", CHILD]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    result = next(
        (json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")),
        None,
    )
    return {
        "wall_s": wall,
        "rc": proc.returncode,
        "result": result,
        "stderr_tail": proc.stderr[-3000:],
    }


def native_stacks(evidence: Path) -> None:
    """py-spy's native stacks of a child while its first start waits (every 0.5 s, up to 8
    dumps)."""
    spy = shutil.which("py-spy")
    if not spy:
        (evidence / "pyspy.txt").write_text("py-spy not found\n")
        return
    env = {**os.environ, "ROW_CUDA": "0"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("STARTING"):
            break
    dumps = []
    for i in range(8):
        time.sleep(0.5)
        if child.poll() is not None:
            break
        d = subprocess.run(
            [spy, "dump", "--native", "--pid", str(child.pid)], capture_output=True, text=True
        )
        dumps.append(f"=== dump {i} at +{0.5 * (i + 1):.1f} s\n{d.stdout}{d.stderr}")
    child.wait(timeout=300)
    (evidence / "pyspy.txt").write_text("\n".join(dumps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evidence", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=Path("benchmarks/results/kineto_first_start.json"))
    ap.add_argument("--rows", default="all", help="comma-separated row numbers (default all)")
    ap.add_argument(
        "--env", action="append", default=[], help="extra row: NAME=VALUE[;NAME=VALUE] (CPU only)"
    )
    args = ap.parse_args()
    rows = list(ROWS)
    for spec in args.env:
        pairs = dict(p.split("=", 1) for p in spec.split(";") if p)
        rows.append((f"CPU only, {spec}", False, pairs))
    if args.rows != "all":
        keep = {int(i) for i in args.rows.split(",")}
        rows = [r for i, r in enumerate(rows) if i in keep]
    results = []
    print(f"{'row':58} {'start':>8} {'stop':>8} {'2nd':>8} {'wall':>8}")
    for name, cuda, env in rows:
        r = run_row(env, cuda)
        res = r["result"] or {}
        results.append({"row": name, "env": env, "cuda": cuda, **r})
        print(
            f"{name:58} {res.get('start_s', float('nan')):8.3f} "
            f"{res.get('stop_s', float('nan')):8.3f} "
            f"{res.get('second_capture_s', float('nan')):8.3f} {r['wall_s']:8.2f}",
            flush=True,
        )
    if args.evidence:
        ev = args.evidence
        ev.mkdir(parents=True, exist_ok=True)
        r = run_row({"ROW_CPROFILE": "1"}, False)
        (ev / "cprofile.txt").write_text((r["result"] or {}).get("cprofile", r["stderr_tail"]))
        r = run_row({"KINETO_LOG_LEVEL": "0"}, False)
        (ev / "kineto_verbose.txt").write_text(r["stderr_tail"] + "\n" + json.dumps(r["result"]))
        if shutil.which("strace"):
            r = run_row({}, False, ["strace", "-f", "-tt", "-T", "-o", str(ev / "strace.txt")])
        else:
            (ev / "strace.txt").write_text("strace not found\n")
        native_stacks(ev)
    import torch

    meta = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "rows": results}, indent=1, default=str))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
