"""The first measurement in a fresh process: how long beyond the op's own first call, through CUPTI
directly and through the torch.profiler fallback. Run on a GPU host (each row is a fresh ``python``
process):

    python benchmarks/first_use.py [--runs N] [--json PATH]

Rows:

- **first %gputime** of each held-out op (a cuDNN conv, layer norm, RMS norm, attention, softmax, an
  elementwise add, a bf16 GEMM): the wall time of ``gpumagic.gputime`` minus the op's own first call
  (lazy init, heuristics), which no timer can avoid; target <= 1.0 s.
- **sweep** of a matmul over 4 sizes, fresh: the whole ``gpumagic.sweep`` wall; target <= 3 s.
- **ncu ranking pass**, fresh: ``gpumagic.capture.ncu.rank.rank`` of a matmul cell (the first pass
  of ``--ncu``), and the child's wall from its start (torch import included); target <= 2 s.
- **kernel time, CUPTI vs torch.profiler**: the busy time per call of each op recorded by each
  backend, in fresh processes taken in turn (once torch.profiler starts in a process, CUPTI's clock
  is kineto's); target: within 0.3 %.
- **CUPTI's cost per kernel** on the stream: the span per call under a recording minus the
  CUDA-event per-call time without one, per kernel, for a launch-bound tiny op and a chain of 20
  tiny kernels.

Targets are checked on the first table; the JSON keeps every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

#: op -> (setup, statement); held out: none of them is the matmul the earlier first-use figure was
#: taken on.
OPS = {
    "conv2d bf16 (cuDNN)": (
        "x = torch.randn(32, 64, 112, 112, device='cuda', dtype=torch.bfloat16); "
        "w = torch.randn(64, 64, 3, 3, device='cuda', dtype=torch.bfloat16)",
        "F.conv2d(x, w, padding=1)",
    ),
    "layer_norm": (
        "x = torch.randn(8192, 4096, device='cuda', dtype=torch.bfloat16)",
        "F.layer_norm(x, (4096,))",
    ),
    "rms_norm": (
        "x = torch.randn(8192, 4096, device='cuda', dtype=torch.bfloat16)",
        "F.rms_norm(x, (4096,))",
    ),
    "sdpa causal bf16": (
        "q = torch.randn(8, 16, 2048, 128, device='cuda', dtype=torch.bfloat16)",
        "F.scaled_dot_product_attention(q, q, q, is_causal=True)",
    ),
    "softmax": ("x = torch.randn(4096, 8192, device='cuda')", "torch.softmax(x, -1)"),
    "add (elementwise)": ("x = torch.randn(1 << 24, device='cuda')", "x + x"),
    "matmul bf16": ("a = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16)", "a @ a"),
}

PRELUDE = r"""
import json, sys, time
T0 = time.perf_counter()
import torch
import torch.nn.functional as F
import gpumagic
if sys.argv[1] == "torch.profiler":  # the fallback, as where cupti-python is absent
    import gpumagic.gpu_activity.cupti_direct as direct
    direct._LASTING.append(direct.CuptiRefused("torch.profiler asked for by the benchmark"))
"""

FIRST = (
    PRELUDE
    + r"""
ns = {"torch": torch, "F": F}
exec(sys.argv[2], ns)
torch.cuda.synchronize()
w0 = time.perf_counter()
r = gpumagic.gputime(sys.argv[3], globals=ns)
wall = time.perf_counter() - w0
print("RESULT " + json.dumps({"wall": wall, "first_call": r.first_call, "kernel_time": r.kernel_time,
      "backend": r.meta.get("kernel_pass_backend"), "line": r.line(), "notes": r.notes}))
"""
)

SWEEP = (
    PRELUDE
    + r"""
w0 = time.perf_counter()
s = gpumagic.sweep("a @ a", "a = torch.randn(n, n, device='cuda')", params={"n": [512, 1024, 2048, 4096]},
                   globals={"torch": torch})
print("RESULT " + json.dumps({"wall": time.perf_counter() - w0, "since_start": time.perf_counter() - T0}))
"""
)

RANK = (
    PRELUDE
    + r"""
from gpumagic.capture.cell import Cell
from gpumagic.capture.ncu.rank import rank
ns = {"a": torch.randn(4096, 4096, device="cuda"), "torch": torch}
w0 = time.perf_counter()
rows = rank(Cell.of("y = a @ a"), ns, 1, 1)
print("RESULT " + json.dumps({"wall": time.perf_counter() - w0, "since_start": time.perf_counter() - T0,
      "top": rows[0]["name"][:60] if rows else None}))
"""
)


def child(code: str, *args: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"failed": (done.stderr or done.stdout)[-1500:]}
    return json.loads(line[len("RESULT ") :])


def first_use(runs: int) -> list[dict[str, Any]]:
    rows = []
    print(f"{'op':<22} {'backend':<15} {'wall':>7} {'1st call':>9} {'beyond':>7}  kernel time")
    for op, (setup, stmt) in OPS.items():
        for backend in ("cupti", "torch.profiler"):
            for _ in range(runs):
                res = child(FIRST, backend, setup, stmt)
                res.update(op=op, mode=backend)
                rows.append(res)
                if "failed" in res:
                    print(f"{op:<22} {backend:<15} failed: {res['failed'][-300:]}")
                    continue
                res["beyond"] = res["wall"] - res["first_call"]
                kt = (
                    "—"
                    if res["kernel_time"] is None
                    else f"{res['kernel_time'] * 1e6:.1f} µs ({res['backend']})"
                )
                print(
                    f"{op:<22} {backend:<15} {res['wall']:6.2f}s {res['first_call']:8.3f}s "
                    f"{res['beyond']:6.2f}s  {kt}",
                    flush=True,
                )
    ok = [r for r in rows if r.get("mode") == "cupti" and "beyond" in r]
    worst = max((r["beyond"] for r in ok), default=float("nan"))
    print(
        f"target: the first %gputime <= 1.0 s beyond the op's first call, through CUPTI: "
        f"worst {worst:.2f} s"
    )
    return rows


def fresh(code: str, what: str, runs: int) -> list[dict[str, Any]]:
    rows = []
    for backend in ("cupti", "torch.profiler"):
        for _ in range(runs):
            res = child(code, backend)
            res.update(mode=backend, what=what)
            rows.append(res)
            shown = (
                res.get("failed", "")[-300:]
                or f"{res['wall']:.2f}s (since the process began: {res['since_start']:.2f}s)"
            )
            print(f"{what:<18} {backend:<15} {shown}", flush=True)
    return rows


BUSY = (
    PRELUDE
    + r"""
import statistics
from gpumagic.timing.cupti import busy_per_call, record_calls
out = {}
for op, (setup, stmt) in json.loads(sys.argv[2]).items():
    ns = {"torch": torch, "F": F}
    exec(setup, ns)
    fn = eval(f"lambda: {stmt}", ns)
    def run(n, fn=fn):
        for _ in range(n):
            fn()
    run(5)
    torch.cuda.synchronize()
    recs = [record_calls(run, 20, preload=20, direct=sys.argv[1] == "cupti") for _ in range(7)]
    assert all(r.backend == sys.argv[1] for r in recs), [(r.backend, r.fallback) for r in recs]
    out[op] = statistics.median(busy_per_call(r, 20)[0] for r in recs)
print("RESULT " + json.dumps(out))
"""
)


def backends_side_by_side(rounds: int = 2) -> list[dict[str, Any]]:
    """Busy time per call of each op through CUPTI directly and through torch.profiler, in fresh
    processes taken in turn (cupti, torch.profiler, cupti, ...): once torch.profiler has started in
    a process, CUPTI's clock is kineto's, so the two cannot alternate inside one process."""
    got: dict[str, list[dict[str, float]]] = {"cupti": [], "torch.profiler": []}
    for _ in range(rounds):
        for backend in got:
            res = child(BUSY, backend, json.dumps(OPS))
            if "failed" in res:
                print(f"{backend}: failed: {res['failed'][-400:]}")
                continue
            got[backend].append(res)
    rows = []
    for op in OPS:
        per = {b: [r[op] for r in runs if op in r] for b, runs in got.items()}
        if not all(per.values()):
            continue
        a, b = statistics.median(per["cupti"]), statistics.median(per["torch.profiler"])
        rows.append({"op": op, "cupti": a, "torch.profiler": b, "ratio": a / b, "runs": per})
        print(
            f"{op:<22} cupti {a * 1e6:9.2f} µs   torch.profiler {b * 1e6:9.2f} µs   ratio "
            f"{a / b:.4f}",
            flush=True,
        )
    worst = max((abs(r["ratio"] - 1) for r in rows), default=float("nan"))
    print(
        f"target: within 0.3 % (medians of 7 recordings x 20 calls per process, {rounds} "
        f"processes per backend, "
        f"taken in turn): worst {worst:.2%}"
    )
    return rows


def cupti_cost_per_kernel(reps: int = 5) -> list[dict[str, Any]]:
    """Span per call under a CUPTI recording minus the CUDA-event time per call without one, per
    kernel."""
    import torch

    from gpumagic.timing.cupti import record_calls

    x = torch.randn(1024, device="cuda")
    cases = {
        "x + 1 (1 kernel)": (lambda: x + 1, 1),
        "20 tiny kernels": (lambda: [x.add_(1) for _ in range(20)], 20),
    }
    rows = []
    for label, (fn, kernels) in cases.items():

        def run(n: int, fn=fn) -> None:
            for _ in range(n):
                fn()

        calls = 2000
        events, spans = [], []
        for _ in range(reps):
            run(50)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run(calls)
            end.record()
            end.synchronize()
            events.append(start.elapsed_time(end) * 1e-3 / calls)
            iv = record_calls(run, calls).intervals()
            spans.append((max(e for _, e in iv) - min(s for s, _ in iv)) * 1e-9 / calls)
        ev, sp = statistics.median(events), statistics.median(spans)
        rows.append({"case": label, "events": ev, "span": sp, "per_kernel": (sp - ev) / kernels})
        print(
            f"{label:<18} events {ev * 1e6:7.2f} µs/call  CUPTI span {sp * 1e6:7.2f} µs/call  "
            f"cost {(sp - ev) / kernels * 1e6:+.2f} µs per kernel",
            flush=True,
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1, help="fresh processes per row and backend")
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "first_use.json"))
    ap.add_argument(
        "--skip",
        default="",
        help="comma-separated parts to leave out: first,sweep,rank,backends,cost",
    )
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    report: dict[str, Any] = {}
    if "first" not in skip:
        report["first_use"] = first_use(args.runs)
    if "sweep" not in skip:
        report["sweep"] = fresh(SWEEP, "sweep, 4 sizes", args.runs)
    if "rank" not in skip:
        report["ncu_rank"] = fresh(RANK, "ncu ranking pass", args.runs)
    import torch

    report["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    if torch.cuda.is_available():
        if "backends" not in skip:
            report["backends"] = backends_side_by_side()
        if "cost" not in skip:
            report["cupti_cost"] = cupti_cost_per_kernel()
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
