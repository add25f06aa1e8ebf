"""How close is %gputime to the truth, next to the usual anchors? Run on a GPU host.

Truth: CUPTI GPU-busy time per call (union of kernel intervals, torch.profiler) over many back-to-back calls, hot
cache, taken right before *and* after each method and averaged, because clocks drift under sustained power
(an H100 fp16 matmul read 1579 µs in one run and 1604 µs in the next).

Methods, side by side in one process: gpumagic's default median, its ``--graph`` median and its kernel-time figure;
``torch.utils.benchmark.Timer.blocked_autorange`` median; ``triton.testing.do_bench`` median (where Triton exists).

    python benchmarks/timing_accuracy.py [--json PATH] [--ops NAME,...]

Prints one table (op, truth, each method's value and relative error, the wall seconds each took) and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch

import gpumagic
from gpumagic.timing import busy_per_call
from gpumagic.units import format_time


def make_ops(dev: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (statement, globals). Built lazily per op so memory stays small."""
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=dtype, generator=g)

    ops: dict[str, Callable[[], tuple[str, dict[str, Any]]]] = {
        "matmul fp32 4096²": lambda: ("A @ B", {"A": rnd(4096, 4096), "B": rnd(4096, 4096)}),
        "matmul bf16 8192²": lambda: (
            "A @ B",
            {"A": rnd(8192, 8192, dtype=torch.bfloat16), "B": rnd(8192, 8192, dtype=torch.bfloat16)},
        ),
        "add 1e7": lambda: ("x + y", {"x": rnd(10_000_000), "y": rnd(10_000_000)}),
        "add 64K (tiny)": lambda: ("x + y", {"x": rnd(65536), "y": rnd(65536)}),
        "softmax 4096²": lambda: ("torch.softmax(x, dim=-1)", {"x": rnd(4096, 4096), "torch": torch}),
        "linear+relu+residual": lambda: (
            "x + torch.relu(lin(x))",
            {"x": rnd(4096, 2048), "lin": torch.nn.Linear(2048, 2048).to(dev), "torch": torch},
        ),
    }
    return ops  # type: ignore[return-value]


def cupti_truth(fn_n: Callable[[int], None], per_call_guess: float, host_guess: float) -> float:
    """GPU busy seconds per call over many back-to-back calls: ~0.3 s of them, after ~0.1 s of preload.

    The preload keeps the GPU at its sustained clocks while the profiler starts, and 0.3 s is as long as a
    measurement under test runs: a 50 ms truth taken after an idle GPU describes a faster GPU than the one any
    sustained loop sees (bf16 matmuls at the H100's power limit run ~4 % slower after a few hundred ms).
    """
    per = max(per_call_guess, host_guess, 1e-7)
    calls = int(min(50_000, max(20, math.ceil(0.3 / per))))
    preload = int(min(20_000, math.ceil(0.1 / per)))
    busy, _ = busy_per_call(fn_n, calls, preload=preload)
    return busy


def kernel_names(fn_n: Callable[[int], None]) -> set[str]:
    """Names of the GPU kernels one call runs."""
    fn_n(2)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn_n(3)
        torch.cuda.synchronize()
    counts: dict[str, int] = {}
    for e in prof.profiler.kineto_results.events():
        if str(e.device_type()).endswith("CUDA"):
            counts[e.name()] = counts.get(e.name(), 0) + 1
    return {n for n, c in counts.items() if c == 3}  # launched once per call


def measure_op(name: str, stmt: str, ns: dict[str, Any], tt: Any, Timer: Any) -> dict[str, Any]:
    """Every method on op ``name``, each bracketed by CUPTI truths: the op's row for the table and the JSON.

    A function of its own so that the closures below bind this op's statement and namespace, not a loop variable.
    ``tt`` is ``triton.testing`` where Triton exists, else None; ``Timer`` is ``torch.utils.benchmark.Timer``.
    """
    code = compile(f"def _n(_k):\n    for _ in range(_k):\n        {stmt}\n", "<bench>", "exec")
    exec(code, ns)  # noqa: S102 - the statement compiled into a loop, as %gputime does
    fn_n = ns["_n"]
    fn = lambda: fn_n(1)  # noqa: E731
    fn_n(5)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn_n(10)
    e.record()
    h0 = time.perf_counter()
    fn_n(10)
    host_guess = (time.perf_counter() - h0) / 10
    e.synchronize()
    guess = s.elapsed_time(e) * 1e-3 / 10
    torch.cuda.synchronize()

    truths: list[float] = []
    results: dict[str, dict[str, Any]] = {}

    def bracket(method: str, call: Callable[[], float]) -> None:
        before = cupti_truth(fn_n, guess, host_guess)
        w0 = time.perf_counter()
        value = call()
        wall = time.perf_counter() - w0
        after = cupti_truth(fn_n, guess, host_guess)
        truths.extend([before, after])
        truth = (before + after) / 2
        results[method] = {"value": value, "truth": truth, "error": value / truth - 1, "wall_s": wall}

    holder: dict[str, Any] = {}

    def gm_default() -> float:
        r = gpumagic.gputime(stmt, globals=ns)
        holder["default"] = r
        return r.median

    def gm_graph() -> float:
        r = gpumagic.gputime(stmt, globals=ns, graph=True)
        holder["graph"] = r
        return r.median

    bracket("gputime", gm_default)
    bracket("gputime --graph", gm_graph)
    r = holder["default"]
    kt = r.kernel_time if r.kernel_time is not None else float("nan")
    truth_k = results["gputime"]["truth"]
    results["gputime kernel_time"] = {
        "value": kt,
        "truth": truth_k,
        "error": kt / truth_k - 1,
        "wall_s": 0.0,
    }
    bracket("torch Timer", lambda: Timer(stmt, globals=ns).blocked_autorange(min_run_time=0.2).median)
    if tt is not None:
        bracket("do_bench", lambda: tt.do_bench(fn, return_mode="median") * 1e-3)
    # Concurrent truth: each method runs under a CUPTI capture and is compared with the median duration of the
    # statement's kernels in that same capture (summed over the kernel names one call launches once each):
    # the same seconds, the same clocks. Kernels the method adds itself (do_bench's L2 flush) are not counted.
    concurrent: dict[str, Any] = {}
    names = kernel_names(fn_n)
    if names:
        runs = {
            "gputime": lambda: gpumagic.gputime(stmt, globals=ns, kernel_time=False).median,
            "torch Timer": lambda: Timer(stmt, globals=ns).blocked_autorange(min_run_time=0.2).median,
        }
        if tt is not None:
            runs["do_bench"] = lambda: tt.do_bench(fn, return_mode="median") * 1e-3
        for method, call in runs.items():
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                value = call()
                torch.cuda.synchronize()
            by_name: dict[str, list[int]] = {n: [] for n in names}
            for e in prof.profiler.kineto_results.events():
                if str(e.device_type()).endswith("CUDA") and e.name() in by_name:
                    by_name[e.name()].append(e.duration_ns())
            truth_c = sum(statistics.median(d) for d in by_name.values() if d) * 1e-9
            concurrent[method] = {
                "value": value,
                "truth": truth_c,
                "error": value / truth_c - 1,
                "kernels": sum(len(d) for d in by_name.values()),
            }
    row = {
        "concurrent": concurrent,
        "op": name,
        "stmt": stmt,
        "truth": sum(truths) / len(truths),
        "truth_spread": (max(truths) - min(truths)) / (sum(truths) / len(truths)),
        "methods": results,
        "gputime_line": r.line(),
        "gputime_launch_bound": r.launch_bound,
        "gputime_wall_s": r.wall_time,
        "graph_line": holder["graph"].line(),
        "graph_backend": holder["graph"].backend,
    }
    return row


def run(op_names: list[str] | None) -> list[dict[str, Any]]:
    dev = "cuda"
    try:
        import triton.testing as tt
    except ImportError:
        tt = None
    from torch.utils.benchmark import Timer

    # Settle clocks before anything is measured.
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        a @ a
    torch.cuda.synchronize()
    del a
    # Warm the profiler once, as any long-lived process would be (CUPTI start-up is not what is measured here).
    busy_per_call(lambda n: torch.ones(1, device=dev).add_(1), 1)

    rows = []
    for name, build in make_ops(dev).items():
        if op_names and name not in op_names:
            continue
        stmt, ns = build()
        row = measure_op(name, stmt, ns, tt, Timer)
        rows.append(row)
        print(f"  {name}: {row['gputime_line']}", flush=True)
        del ns
        torch.cuda.empty_cache()
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    methods = list(rows[0]["methods"]) if rows else []
    head = f"{'op':<22} {'truth':>10} " + " ".join(f"{m:>26}" for m in methods)
    print(head)
    print("-" * len(head))
    for row in rows:
        cells = []
        for m in methods:
            res = row["methods"].get(m)
            if res is None:
                cells.append(f"{'—':>26}")
                continue
            cells.append(f"{format_time(res['value']):>10} {res['error']:+7.2%} {res['wall_s']:5.2f}s")
        print(f"{row['op']:<22} {format_time(row['truth']):>10} " + " ".join(f"{c:>26}" for c in cells))
    print("cells: value, error vs bracketing CUPTI truth, wall seconds of the method")
    print()
    print("concurrent truth: median duration of the statement's kernels recorded by CUPTI during the method's own run")
    print(f"{'op':<22} " + " ".join(f"{m:>28}" for m in ("gputime", "torch Timer", "do_bench")))
    for row in rows:
        c = row.get("concurrent") or {}
        if not c:
            continue
        cells = []
        for m in ("gputime", "torch Timer", "do_bench"):
            r = c.get(m)
            cells.append(
                f"{'—':>28}"
                if r is None
                else f"{format_time(r['value']):>9} vs {format_time(r['truth']):>9} {r['error']:+7.2%}"
            )
        print(f"{row['op']:<22} " + " ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "timing_accuracy.json"))
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("timing_accuracy.py needs CUDA: run it on a GPU host")
    rows = run([o.strip() for o in args.ops.split(",") if o.strip()] or None)
    print_table(rows)
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpumagic": gpumagic.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
