"""Two synthetic 1,000,000-kernel nsys exports diffed: ``gpumagic.diff(A, B)`` from the two paths to
its text, on 2 cores, beside the cost of one export's summaries.

A is the committed export ``tests/data/nsys/block.sqlite.gz`` grown to ``--kernels`` kernels and
``--api`` CUDA API calls exactly as ``benchmarks/nsys_scale.py`` grows it; B is A with TF32 turned
on for its largest GEMM: that kernel's rows renamed to the cuBLAS TF32 kernel the H100 ran for the
same matmul and their durations divided by 4. So the diff must match 1M kernels of ten names, one
pair loosely (FP32 FFMA -> TF32 tensor cores), and reconcile.

Each measurement runs in a fresh child process pinned to the first ``--cores`` cores, ``--repeat``
times (median shown): ``diff`` (``gpumagic.diff(A, B)`` and ``str()`` of it: both files read,
matched, the text made) and ``one`` (``load_nsys(A)`` with ``kernel_summary()`` and
``api_summary()``: one export's summaries, as nsys_scale measures them). Memory is each child's peak
RSS (``ru_maxrss``) less its RSS right after ``import gpumagic``: what the step itself added. Wall
time on a shared machine varies with what else runs; the child's CPU time (user + system, every
thread) and the load average are shown beside it.

Targets (2 cores): diff <= 3 s, reading included; memory <= 2x one export's summaries.

    python benchmarks/diff_scale.py [--kernels N] [--api N] [--repeat 3] [--cores 2] [--json PATH]
    [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from nsys_scale import build  # noqa: E402 (beside this script, found once on the path)

TARGETS = {"diff_s": 3.0, "memory_ratio": 2.0}
FFMA_NN = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_%"
TF32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
RESULTS = ROOT / "benchmarks" / "results"


def tf32_variant(src: str, dst: str) -> None:
    """``dst``: ``src`` with its FP32 FFMA GEMM renamed to the TF32 kernel and 4x faster."""
    with open(src, "rb") as f, open(dst, "wb") as g:
        g.write(f.read())
    con = sqlite3.connect(dst)
    old = con.execute("SELECT id FROM StringIds WHERE value LIKE ?", (FFMA_NN,)).fetchone()[0]
    new = con.execute("SELECT MAX(id) + 1 FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (new, TF32))
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = ?, shortName = ?, end = start "
        "+ (end - start) / 4 "
        "WHERE demangledName = ?",
        (new, new, old),
    )
    con.commit()
    con.close()


def child(mode: str, a: str, b: str) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import gpumagic

    out: dict[str, Any] = {"rss_after_import_mb": _rss_now_mb()}
    cpu0, t0 = time.process_time(), time.perf_counter()
    if mode == "diff":
        d = gpumagic.diff(a, b)
        text = str(d)
        out["diff_s"] = time.perf_counter() - t0
        rows = d.data.rows
        out["reconciled"] = int(rows["delta_ns"].sum()) == d.data.busy_b - d.data.busy_a
        gemm = rows.iloc[0]
        out["gemm_matched_loosely"] = bool(gemm["match"] == "loose" and gemm["name_b"] == TF32)
        out["first_change"] = d.changes[0] if d.changes else ""
        out["text_lines"] = len(text.splitlines())
    else:
        trace = gpumagic.load_nsys(a)
        trace.kernel_summary(), trace.api_summary()
        out["one_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - cpu0
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["added_mb"] = out["peak_mb"] - out["rss_after_import_mb"]
    if (
        mode == "diff"
    ):  # the same figure from the whole Trace, after the measurement (it reads every column)
        out["busy_equals_trace"] = d.data.busy_a == gpumagic.load_nsys(a).gpu_busy_ns()
    return out


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_child(mode: str, a: str, b: str, cores: set[int] | None) -> dict[str, Any]:
    pin = (lambda: os.sched_setaffinity(0, cores)) if cores else None
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, a, b],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=pin,
    )
    if proc.returncode:
        raise SystemExit(f"child {mode} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--api", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--json", default=str(RESULTS / "diff_scale_cpu.json"))
    ap.add_argument("--keep", help="keep the two exports in this directory (reused when there)")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "A", "B"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    where = args.keep or tempfile.mkdtemp(prefix="gpumagic-diff-scale-")
    os.makedirs(where, exist_ok=True)
    a, b = os.path.join(where, "a.sqlite"), os.path.join(where, "b.sqlite")
    if not (os.path.exists(a) and os.path.exists(b)):
        build(a, args.kernels, args.api)
        tf32_variant(a, b)
    cores = set(sorted(os.sched_getaffinity(0))[: args.cores])
    load = os.getloadavg()[0]
    diffs = [run_child("diff", a, b, cores) for _ in range(args.repeat)]
    ones = [run_child("one", a, b, cores) for _ in range(args.repeat)]

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    figures = {
        "diff_s": med(diffs, "diff_s"),
        "diff_best_s": min(r["diff_s"] for r in diffs),
        "diff_cpu_s": med(diffs, "cpu_s"),
        "diff_added_mb": med(diffs, "added_mb"),
        "one_s": med(ones, "one_s"),
        "one_cpu_s": med(ones, "cpu_s"),
        "one_added_mb": med(ones, "added_mb"),
    }
    figures["memory_ratio"] = figures["diff_added_mb"] / figures["one_added_mb"]
    checks = {
        "diff_s": figures["diff_s"] <= TARGETS["diff_s"],
        "memory_ratio": figures["memory_ratio"] <= TARGETS["memory_ratio"],
        "rows reconcile to the GPU busy difference": all(r["reconciled"] for r in diffs),
        "GPU busy equals the Trace's": all(r["busy_equals_trace"] for r in diffs),
        "FP32 GEMM matched loosely to the TF32 one": all(r["gemm_matched_loosely"] for r in diffs),
    }
    rows = [
        (
            "diff A B (read both, match, text)",
            f"{figures['diff_s']:.2f} s",
            f"best {figures['diff_best_s']:.2f} s",
            f"cpu {figures['diff_cpu_s']:.2f} s",
            f"{figures['diff_added_mb']:.0f} MB",
            f"<= {TARGETS['diff_s']} s",
        ),
        (
            "one export's summaries",
            f"{figures['one_s']:.2f} s",
            "",
            f"cpu {figures['one_cpu_s']:.2f} s",
            f"{figures['one_added_mb']:.0f} MB",
            "",
        ),
        (
            "memory: diff / one",
            "",
            "",
            "",
            f"{figures['memory_ratio']:.2f}x",
            f"<= {TARGETS['memory_ratio']}x",
        ),
    ]
    print(
        f"{args.kernels:,} kernels and {args.api:,} API calls per export, {len(cores)} cores, "
        f"load {load:.1f}"
    )
    for r in rows:
        print(f"  {r[0]:<36} {r[1]:>8} {r[2]:>12} {r[3]:>12} {r[4]:>8}  {r[5]}")
    print(f"  first change: {diffs[0]['first_change']}")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}")
    result = {
        "kernels": args.kernels,
        "api_calls": args.api,
        "cores": sorted(cores),
        "load_average_before": load,
        "figures": figures,
        "targets": TARGETS,
        "checks": checks,
        "first_change": diffs[0]["first_change"],
        "memory": "peak RSS of a fresh child less its RSS right after import gpumagic",
        "runs": {"diff": diffs, "one": ones},
        "pass": all(checks.values()),
    }
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
