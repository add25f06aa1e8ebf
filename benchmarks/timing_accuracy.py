"""How close is %gputime to the truth, next to the usual anchors? And how fast is its first use, how
repeatable is ``--steady``? Run on a GPU host.

Two truths, both from one CUPTI capture of many back-to-back calls (hot cache), taken right before
*and* right after each method, because clocks drift under sustained power (an H100 fp16 matmul read
1579 µs in one run and 1604 µs in the next):

- **span** per call (first activity start to last activity end, over the calls): the stream figure,
  gaps between kernels included. It checks every per-call median: gpumagic's,
  ``torch.utils.benchmark.Timer``'s, ``triton.testing.do_bench``'s, NVIDIA NVBench's
  (``cuda-bench``; batch = hot back-to-back mean, cold = L2 flushed and the GPU idle before each
  call).
- **busy** per call (the union of the activity intervals, over the calls): it checks gpumagic's
  kernel time.

Targets, on ops of at least 50 µs whose span moved less than 0.5 % between the two truths: median
within 0.5 % of the span, kernel time within 0.5 % of the busy time, and never further off than the
best anchor on the same op.

    python benchmarks/timing_accuracy.py [--json PATH] [--ops NAME,...] [--no-nvbench]
                                         [--first-use N] [--steady-runs N] [--skip-accuracy]

``--first-use N``: N fresh processes per kernel-pass backend (CUPTI directly, the default;
torch.profiler, the fallback), each timing ``%gputime A @ A`` (fp32 4096²) three times
(``benchmarks/first_use.py`` does the same for a held-out set of ops). ``--steady-runs N``: N
consecutive ``%gputime --steady`` runs of the fp16 8192³ matmul, and N default runs beside them.
Prints tables and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch

import gpumagic
from gpumagic.timing import span_and_busy_per_call
from gpumagic.units import format_time

MIN_TARGET_TIME = 50e-6
TARGET = 0.005
ANCHORS = ("torch Timer", "do_bench", "nvbench batch", "nvbench cold")


def make_ops(dev: str) -> dict[str, Callable[[], tuple[str, dict[str, Any]]]]:
    """name -> builder of (statement, globals). Built lazily per op so memory stays small."""
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=dtype, generator=g)

    def conv() -> tuple[str, dict[str, Any]]:
        layer = torch.nn.Conv2d(64, 64, 3, padding=1).to(dev)
        return "layer(x)", {"x": rnd(32, 64, 56, 56), "layer": layer}

    def linear() -> tuple[str, dict[str, Any]]:
        return "x + torch.relu(lin(x))", {
            "x": rnd(4096, 2048),
            "lin": torch.nn.Linear(2048, 2048).to(dev),
            "torch": torch,
        }

    return {
        "matmul fp32 4096²": lambda: ("A @ B", {"A": rnd(4096, 4096), "B": rnd(4096, 4096)}),
        "matmul bf16 8192²": lambda: (
            "A @ B",
            {
                "A": rnd(8192, 8192, dtype=torch.bfloat16),
                "B": rnd(8192, 8192, dtype=torch.bfloat16),
            },
        ),
        "add 1e7": lambda: ("x + y", {"x": rnd(10_000_000), "y": rnd(10_000_000)}),
        "add 64K (tiny)": lambda: ("x + y", {"x": rnd(65536), "y": rnd(65536)}),
        "softmax 4096²": lambda: (
            "torch.softmax(x, dim=-1)",
            {"x": rnd(4096, 4096), "torch": torch},
        ),
        "sum dim0 8192²": lambda: ("x.sum(dim=0)", {"x": rnd(8192, 8192)}),
        "layer_norm 8192x1024": lambda: (
            "torch.nn.functional.layer_norm(x, (1024,))",
            {"x": rnd(8192, 1024), "torch": torch},
        ),
        "conv2d 64ch 56² bs32": conv,
        "linear+relu+residual": linear,
    }


def truth(fn_n: Callable[[int], None], per_call: float) -> tuple[float, float]:
    """(span, busy) seconds per call over ~0.3 s of back-to-back calls after ~0.1 s of preload
    (sustained clocks)."""
    per = max(per_call, 1e-7)
    calls = int(min(50_000, max(20, math.ceil(0.3 / per))))
    preload = int(min(20_000, math.ceil(0.1 / per)))
    found = span_and_busy_per_call(fn_n, calls, preload=preload)
    if found is None:
        raise RuntimeError("CUPTI recorded no GPU activity")
    return found


def nvbench_times(fns: dict[str, Callable[[], None]]) -> dict[str, dict[str, float]]:
    """NVBench on every op at once, each driven on NVBench's own stream: op -> {"batch": hot mean,
    "cold": flushed median} seconds. One run per process is all NVBench allows ("Benchmarks were
    already executed"), so the ops are the values of a string axis."""
    import cuda.bench as bench

    def body(state: Any) -> None:
        stream = torch.cuda.ExternalStream(state.get_stream().addressof())
        op = fns[state.get_string("op")]

        def launch(_launch: Any) -> None:
            with torch.cuda.stream(stream):
                op()

        state.exec(launch)

    bench.register(body).add_string_axis("op", list(fns)).set_timeout(
        4.0
    )  # its default 15 s per op is long
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "nvbench.json")
        bench.run_all_benchmarks([sys.argv[0], "--json", path])
        with open(path) as f:
            root = json.load(f)
    out: dict[str, dict[str, float]] = {}
    for i, state in enumerate(root["benchmarks"][0]["states"]):
        axes = {a.get("name"): a.get("value") for a in state.get("axis_values") or []}
        axes.setdefault(
            "op", list(fns)[i] if i < len(fns) else None
        )  # the states follow the axis' order
        values = {}
        for s in state.get("summaries") or []:
            for d in s.get("data", []):
                if d.get("name") == "value" and s.get("tag") in (
                    "nv/batch/time/gpu/mean",
                    "nv/cold/time/gpu/median",
                ):
                    values["batch" if "batch" in s["tag"] else "cold"] = float(d["value"])
        if axes.get("op") in fns:
            out[axes["op"]] = values
    return out


def nvbench_rows(
    rows: list[dict[str, Any]], ops: dict[str, tuple[Callable[[int], None], float]]
) -> None:
    """NVBench's columns for every row, each bracketed by its op's two truths, taken before and
    after the one run."""
    before = {name: truth(fn_n, per) for name, (fn_n, per) in ops.items()}
    w0 = time.perf_counter()
    try:
        found = nvbench_times({name: (lambda f=fn_n: f(1)) for name, (fn_n, _) in ops.items()})
        failed = None
    except Exception as exc:  # noqa: BLE001 - an anchor that fails is a note, not the end of the run
        found, failed = {}, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    wall = time.perf_counter() - w0
    after = {name: truth(fn_n, per) for name, (fn_n, per) in ops.items()}
    for row in rows:
        name = row["op"]
        if name not in ops:
            continue
        span = (before[name][0] + after[name][0]) / 2
        moved = abs(after[name][0] - before[name][0]) / span
        for kind in ("batch", "cold"):
            value = found.get(name, {}).get(kind)
            row["methods"][f"nvbench {kind}"] = {
                "value": value,
                "truth": span,
                "against": "span",
                "error": None if value is None else value / span - 1,
                "wall_s": wall / len(ops),
                "truth_moved": moved,
                **({"failed": failed} if failed else {}),
            }
        row["verdict"] = verdict(row["methods"])


def measure_op(name: str, stmt: str, ns: dict[str, Any], tt: Any, Timer: Any) -> dict[str, Any]:
    """Every method on op ``name``, each bracketed by the two truths: the op's row for the table and
    the JSON."""
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
    e.synchronize()
    guess = s.elapsed_time(e) * 1e-3 / 10

    spans: list[float] = []
    results: dict[str, dict[str, Any]] = {}
    holder: dict[str, Any] = {}

    def bracket(method: str, call: Callable[[], float | None], against: str = "span") -> None:
        b_span, b_busy = truth(fn_n, guess)
        w0 = time.perf_counter()
        try:
            value = call()
        except Exception as exc:  # noqa: BLE001 - an anchor that fails is a row note, not the end of the run
            value, error_text = (
                None,
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            )
        else:
            error_text = None
        wall = time.perf_counter() - w0
        a_span, a_busy = truth(fn_n, guess)
        spans.extend([b_span, a_span])
        span, busy = (b_span + a_span) / 2, (b_busy + a_busy) / 2
        holder[f"{method} truth"] = (span, busy, abs(a_span - b_span) / span)
        ref = span if against == "span" else busy
        results[method] = {
            "value": value,
            "truth": ref,
            "against": against,
            "error": None if value is None else value / ref - 1,
            "wall_s": wall,
            "truth_moved": abs(a_span - b_span) / span,
            **({"failed": error_text} if error_text else {}),
        }

    def gm_default() -> float:
        holder["default"] = r = gpumagic.gputime(stmt, globals=ns)
        return r.median

    def gm_graph() -> float:
        holder["graph"] = r = gpumagic.gputime(stmt, globals=ns, graph=True)
        return r.median

    bracket("gputime", gm_default)
    r = holder["default"]
    _span, busy, moved = holder["gputime truth"]
    results["gputime kernel_time"] = {
        "value": r.kernel_time,
        "truth": busy,
        "against": "busy",
        "error": None if r.kernel_time is None else r.kernel_time / busy - 1,
        "wall_s": 0.0,
        "truth_moved": moved,
    }
    bracket("gputime --graph", gm_graph)
    bracket(
        "torch Timer", lambda: Timer(stmt, globals=ns).blocked_autorange(min_run_time=0.2).median
    )
    if tt is not None:
        bracket("do_bench", lambda: tt.do_bench(fn, return_mode="median") * 1e-3)
    return {
        "op": name,
        "stmt": stmt,
        "span": sum(spans) / len(spans),
        "busy": busy,
        "truth_moved": (max(spans) - min(spans)) / (sum(spans) / len(spans)),
        "methods": results,
        "gputime_line": r.line(),
        "gputime_notes": r.notes,
        "gputime_launch_bound": r.launch_bound,
        "gputime_wall_s": r.wall_time,
        "graph_line": holder["graph"].line(),
        "verdict": verdict(results),
        "_loop": (fn_n, guess),
    }


def verdict(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The targets on this op: in scope (>= 50 µs, truth moved < 0.5 % during the method), each met
    or not."""
    med, ker = results["gputime"], results["gputime kernel_time"]
    anchors = [
        abs(results[a]["error"])
        for a in ANCHORS
        if a in results and results[a]["error"] is not None
    ]
    best = min(anchors) if anchors else None
    in_scope = med["truth"] >= MIN_TARGET_TIME and med["truth_moved"] < TARGET
    out: dict[str, Any] = {"in_scope": in_scope, "best_anchor_error": best}
    out["median_ok"] = med["error"] is not None and abs(med["error"]) <= TARGET
    out["kernel_ok"] = ker["error"] is not None and abs(ker["error"]) <= TARGET
    out["not_worse_than_anchors"] = best is None or (
        med["error"] is not None and abs(med["error"]) <= best
    )
    out["met"] = (not in_scope) or (
        out["median_ok"] and out["kernel_ok"] and out["not_worse_than_anchors"]
    )
    return out


def accuracy(op_names: list[str] | None, use_nvbench: bool) -> list[dict[str, Any]]:
    dev = "cuda"
    try:
        import triton.testing as tt
    except ImportError:
        tt = None
    from torch.utils.benchmark import Timer

    # Settle clocks and start the profiler once, as any long-lived process would be.
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        a @ a
    torch.cuda.synchronize()
    del a
    rows, keep = [], []
    for name, build in make_ops(dev).items():
        if op_names and name not in op_names:
            continue
        stmt, ns = build()
        row = measure_op(name, stmt, ns, tt, Timer)
        rows.append(row)
        keep.append(ns)  # NVBench times every op at the end, in one run
        print(f"  {name}: {row['gputime_line']}", flush=True)
    loops = {row["op"]: row.pop("_loop") for row in rows}
    if use_nvbench:
        try:
            import cuda.bench  # noqa: F401
        except ImportError:
            print("  NVBench (cuda-bench) not installed: its columns are left out")
        else:
            nvbench_rows(rows, loops)
    del keep
    torch.cuda.empty_cache()
    return rows


def print_accuracy(rows: list[dict[str, Any]]) -> None:
    methods = ["gputime", "gputime kernel_time", "gputime --graph", *ANCHORS]
    methods = [m for m in methods if any(m in r["methods"] for r in rows)]
    head = (
        f"{'op':<22} {'span':>9} {'busy':>9} {'moved':>6} "
        + " ".join(f"{m[:20]:>20}" for m in methods)
        + "  met"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        cells = []
        for m in methods:
            res = row["methods"].get(m)
            if res is None or res["error"] is None:
                cells.append(f"{'—':>20}")
            else:
                cells.append(f"{format_time(res['value']):>10} {res['error']:+8.2%}")
        v = row["verdict"]
        met = ("yes" if v["met"] else "NO") if v["in_scope"] else "n/a"
        print(
            f"{row['op']:<22} {format_time(row['span']):>9} {format_time(row['busy']):>9} "
            f"{row['truth_moved']:6.2%} " + " ".join(cells) + f"  {met}"
        )
    print(
        "cells: value and error; medians against the CUPTI span per call, 'gputime "
        "kernel_time' against the CUPTI "
        "busy per call, both taken right before and after the method; 'moved': how far the "
        "span moved between them."
    )
    print(
        f"targets (ops >= {format_time(MIN_TARGET_TIME)} whose truth moved < {TARGET:.1%}): "
        f"median and kernel time "
        f"within {TARGET:.1%}, never worse than the best anchor ({', '.join(ANCHORS)})."
    )


FIRST_USE = r"""
import json, sys, time
t0 = time.perf_counter()
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
mode = sys.argv[1]
if mode == "torch.profiler":  # the fallback's kernel pass, as where cupti-python is absent
    import gpumagic.gpu_activity.cupti_direct as direct
    direct._LASTING.append(direct.CuptiRefused("torch.profiler asked for by the benchmark"))
shell.run_line_magic("load_ext", "gpumagic")
shell.run_cell("import torch; A = torch.randn(4096, 4096, device='cuda'); torch.cuda.synchronize()")
t1 = time.perf_counter()
out = {"mode": mode, "setup_s": t1 - t0, "runs": []}
for _ in range(3):
    w0 = time.perf_counter()
    r = shell.run_line_magic("gputime", "-q -o A @ A")
    out["runs"].append({"wall_s": time.perf_counter() - w0, "kernel_time": r.kernel_time, "line": r.line()})
print("RESULT " + json.dumps(out))
"""


def first_use(n: int, modes: list[str]) -> list[dict[str, Any]]:
    """N fresh processes per mode; each times ``%gputime A @ A`` three times right after creating
    A."""
    rows = []
    env = dict(
        os.environ,
        PYTHONPATH=os.path.join(os.path.dirname(__file__), "..")
        + os.pathsep
        + os.environ.get("PYTHONPATH", ""),
    )
    for mode in modes:
        for _ in range(n):
            done = subprocess.run(
                [sys.executable, "-c", FIRST_USE, mode],
                capture_output=True,
                text=True,
                timeout=180,
                env=env,
            )
            line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                rows.append({"mode": mode, "failed": done.stderr[-800:]})
                continue
            rows.append(json.loads(line[len("RESULT ") :]))
    print(f"{'mode':<15} {'1st %gputime':>12} {'2nd':>7} {'3rd':>7}  kernel time 1st/2nd/3rd")
    for row in rows:
        if "failed" in row:
            print(f"{row['mode']:<15} failed: {row['failed'][-200:]}")
            continue
        walls = [f"{x['wall_s']:.2f}s" for x in row["runs"]]
        kts = [
            "—" if x["kernel_time"] is None else format_time(x["kernel_time"]) for x in row["runs"]
        ]
        print(f"{row['mode']:<15} {walls[0]:>12} {walls[1]:>7} {walls[2]:>7}  {' / '.join(kts)}")
    print(
        "modes: kernel pass through CUPTI directly (cupti, the default where cupti-python is "
        "installed) and through "
        "torch.profiler (the fallback, paying kineto's first start). Target: 1st <= 1.0 s "
        "beyond the first call."
    )
    return rows


def steady_runs(n: int) -> dict[str, Any]:
    """N consecutive ``--steady`` runs of the fp16 8192³ matmul, and N default runs, in this
    process."""
    g = {"m": torch.randn(8192, 8192, device="cuda", dtype=torch.float16)}
    out: dict[str, Any] = {}
    for label, kw in (("default", {}), ("steady", {"steady": True})):
        runs = []
        for _ in range(n):
            r = gpumagic.gputime("m @ m", globals=g, **kw)
            runs.append(
                {"median": r.median, "line": r.line(), "wall_s": r.wall_time, "clock": r.summary()}
            )
            print(f"  {label}: {r.line()}", flush=True)
        medians = [x["median"] for x in runs]
        out[label] = {"runs": runs, "spread": (max(medians) - min(medians)) / min(medians)}
    for label, res in out.items():
        meds = ", ".join(format_time(x["median"]) for x in res["runs"])
        walls = ", ".join(f"{x['wall_s']:.1f}s" for x in res["runs"])
        print(f"{label:<8} medians {meds}  spread {res['spread']:.2%}  (wall {walls})")
    print("target: the --steady medians within 1% of each other (spread = (max - min) / min)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "timing_accuracy.json")
    )
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--no-nvbench", action="store_true", help="leave NVBench (cuda-bench) out")
    ap.add_argument(
        "--skip-accuracy", action="store_true", help="only the --first-use / --steady-runs parts"
    )
    ap.add_argument(
        "--first-use", type=int, default=0, metavar="N", help="fresh processes per start-up mode"
    )
    ap.add_argument(
        "--first-use-modes",
        default="cupti,torch.profiler",
        help="comma-separated kernel-pass backends",
    )
    ap.add_argument(
        "--steady-runs", type=int, default=0, metavar="N", help="consecutive --steady runs"
    )
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("timing_accuracy.py needs CUDA: run it on a GPU host")
    report: dict[str, Any] = {}
    if (
        args.first_use
    ):  # before anything here starts CUDA or the profiler: it measures fresh processes
        report["first_use"] = first_use(args.first_use, args.first_use_modes.split(","))
    if not args.skip_accuracy:
        rows = accuracy(
            [o.strip() for o in args.ops.split(",") if o.strip()] or None, not args.no_nvbench
        )
        print_accuracy(rows)
        report["rows"] = rows
    if args.steady_runs:
        report["steady"] = steady_runs(args.steady_runs)
    report["meta"] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpumagic": gpumagic.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    with open(args.json, "w") as f:
        json.dump(report, f, indent=2, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
