"""A real nsys export grown to 1,000,000 kernels and 1,000,000 CUDA API calls -> gpumagic's load +
summaries and full report, beside ``nsys stats`` on the same file when nsys is on PATH.

The big file is the committed export ``tests/data/nsys/block.sqlite.gz`` (nsys 2025.3, an H100) with
every table and the schema kept: the kernel and CUDA API tables are copied until they hold the
asked-for rows, each copy shifted in time by the span of the original and in correlation id by its
largest id (so launches still pair with their kernels); memory operations and NVTX ranges are copied
as many times as the API table. Each measurement runs in a fresh child process pinned to the cores
of ``--cores`` (the first set: 2 by default), three times; the table shows the median and the best.
Peak memory is the child's ``ru_maxrss`` (the whole process: Python, pandas and numpy included; the
RSS right after the imports is shown beside it).

Targets (2 cores): load + kernel_summary + api_summary <= 1.5 s; full report (load, findings,
tables, timeline, Bokeh's import included) <= 5 s; peak memory <= 600 MB; report HTML <= 5 MB. The
summaries are checked against a direct SQL computation (row counts, instances, totals, min, max per
name) and, where nsys is present, against ``nsys stats`` (the same and the medians).

    python benchmarks/nsys_scale.py [--kernels N] [--api N] [--repeat 3] [--cores 2,all] [--json
    PATH] [--keep F] [--vs REV]

``--vs REV`` runs the report step also with the package of git revision ``REV`` (checked out in a
temporary worktree), alternating with this checkout's run by run, and prints both medians and their
ratio: on a shared, noisy machine a ratio measured side by side says more than either figure.

Each core set (``--cores``: the first N of the process's cores, or all of them) runs the summaries
and ``nsys stats`` pinned there; the full table is for the first set, the others add a line each.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import pathlib
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCK = ROOT / "tests" / "data" / "nsys" / "block.sqlite.gz"
LABEL = "cell:block"  # the committed export's cell range
TARGETS = {"summaries_s": 1.5, "report_s": 5.0, "peak_mb": 600.0, "html_mb": 5.0}
_SHIFTED_TOO = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")


def build(
    path: str | os.PathLike[str], kernels: int, api: int, source: str | os.PathLike[str] = BLOCK
) -> None:
    """Write the committed export, its kernel table grown to ``kernels`` rows and its API table to
    ``api`` rows."""
    with gzip.open(source) as f, open(path, "wb") as g:
        shutil.copyfileobj(f, g)
    con = sqlite3.connect(path)
    k, r = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
    lo, hi, corr = con.execute(
        f"SELECT MIN(s), MAX(e), MAX(c) FROM (SELECT MIN(start) s, MAX(end) e, "
        f"MAX(correlationId) c FROM {k} "
        f"UNION ALL SELECT MIN(start), MAX(end), MAX(correlationId) FROM {r})"
    ).fetchone()
    shift, corr_shift = hi - lo + 1_000_000, corr + 1
    api_copies = math.ceil(api / con.execute(f"SELECT COUNT(*) FROM {r}").fetchone()[0])
    for table, rows in ((k, kernels), (r, api), *((t, None) for t in _SHIFTED_TOO)):
        cols = [c[1] for c in con.execute(f"PRAGMA table_info({table})")]
        have = con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        copies = math.ceil(rows / have) if rows else api_copies
        if copies < 2 or not have:
            continue
        exprs = [
            f"{c} + k * {shift}"
            if c in ("start", "end")
            else f"{c} + k * {corr_shift}"
            if c == "correlationId"
            else c
            for c in cols
        ]
        con.execute(f"CREATE TEMP TABLE base AS SELECT rowid AS r, * FROM {table}")
        con.execute(
            "CREATE TEMP TABLE copies AS WITH RECURSIVE c(k) AS (SELECT 1 UNION ALL SELECT k "
            "+ 1 FROM c "
            f"WHERE k < {copies - 1}) SELECT k FROM c"
        )
        limit = rows - have if rows else -1
        con.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM copies "
            f"CROSS JOIN base "
            f"ORDER BY k, r LIMIT {limit}"
        )
        con.execute("DROP TABLE base")
        con.execute("DROP TABLE copies")
    con.commit()
    con.close()


def direct_sql(path: str) -> dict[str, dict[str, tuple[int, int, int, int]]]:
    """Per name, straight from the file: (instances, total, min, max) of kernels (by demangled name)
    and of API calls (by name, a four-digit version suffix dropped as nsys stats does)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = {}
    for key, table, col in (
        ("kernels", "CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
        ("api", "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"),
    ):
        rows = con.execute(
            f"SELECT s.value, COUNT(*), SUM(t.end - t.start), MIN(t.end - t.start), MAX(t.end "
            f"- t.start) "
            f"FROM {table} t JOIN StringIds s ON s.id = t.{col} GROUP BY t.{col}"
        ).fetchall()
        merged: dict[str, list[int]] = {}
        for name, n, total, mn, mx in rows:
            if key == "api" and len(name) > 6 and name[-6:-4] == "_v" and name[-4:].isdigit():
                name = name[:-6]
            m = merged.setdefault(name, [0, 0, mn, mx])
            m[0], m[1], m[2], m[3] = m[0] + n, m[1] + total, min(m[2], mn), max(m[3], mx)
        out[key] = {n: tuple(v) for n, v in merged.items()}
    con.close()
    return out


def agrees(summary: Any, ref: dict[str, tuple[int, int, int, int]], count_col: str) -> bool:
    got = {
        r["Name"]: (
            int(r[count_col]),
            int(r["Total Time (ns)"]),
            int(r["Min (ns)"]),
            int(r["Max (ns)"]),
        )
        for _, r in summary.iterrows()
    }
    return got == ref


# --- the measured work, each in a fresh child process
# -----------------------------------------------------------
def child(mode: str, path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    sys.path.insert(0, os.environ.get("GPUMAGIC_BENCH_ROOT", str(ROOT)))
    import gpumagic

    out: dict[str, Any] = {"import_s": time.perf_counter() - t0}
    out["rss_after_import_mb"] = _rss_now_mb()
    t0 = time.perf_counter()
    trace = gpumagic.load_nsys(path)
    out["load_s"] = time.perf_counter() - t0
    if mode == "summaries":
        k, a = trace.kernel_summary(), trace.api_summary()
        out["summaries_s"] = time.perf_counter() - t0
        out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ref = direct_sql(path)
        out["sql_check"] = agrees(k, ref["kernels"], "Instances") and agrees(
            a, ref["api"], "Num Calls"
        )
        out["kernel_rows"], out["api_rows"] = len(k), len(a)
        out["summaries"] = {"kernels": k.to_dict(orient="list"), "api": a.to_dict(orient="list")}
    else:
        from gpumagic.render.report import ProfileReport

        trace.meta["label"] = LABEL
        html = ProfileReport(trace, label=LABEL)._repr_html_()
        out["report_s"] = time.perf_counter() - t0
        out["html_mb"] = len(html.encode()) / 1e6
        out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        out["kernels"], out["api_calls"] = len(trace.kernels), len(trace.api)
    return out


def _rss_now_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return float("nan")


def _pinned(cores: set[int] | None) -> Any:
    """A preexec_fn that pins the child to ``cores`` (None: the parent's own set)."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, cores)


def run_child(
    mode: str, path: str, cores: set[int] | None = None, root: str | None = None
) -> dict[str, Any]:
    """One measurement in a fresh process pinned to ``cores``, importing gpumagic from ``root``
    (default: this checkout)."""
    env = {**os.environ, "GPUMAGIC_BENCH_ROOT": root or str(ROOT)}
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", mode, path],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=_pinned(cores),
        env=env,
        cwd=tempfile.gettempdir(),  # not this checkout: its package must not shadow ``root``'s
    )
    if proc.returncode:
        raise SystemExit(f"child {mode} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- nsys stats, where nsys is
# -------------------------------------------------------------------------------------
def nsys_stats(path: str, tmp: str, cores: set[int] | None = None) -> dict[str, Any] | None:
    nsys = shutil.which("nsys")
    if not nsys:
        return None
    prefix = os.path.join(tmp, "stats")
    cmd = [nsys, "stats", "-r", "cuda_gpu_kern_sum,cuda_api_sum", "-f", "csv", "-o", prefix]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*cmd, "--force-overwrite", "true", path],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=_pinned(cores),
    )
    seconds = time.perf_counter() - t0
    tables = {}
    for report in ("cuda_gpu_kern_sum", "cuda_api_sum"):
        f = f"{prefix}_{report}.csv"
        if os.path.exists(f):
            with open(f, newline="") as fh:
                tables[report] = list(csv.DictReader(fh))
    return {"seconds": seconds, "returncode": proc.returncode, "tables": tables, "nsys": nsys}


def equal_to_nsys(summaries: dict[str, dict[str, list[Any]]], stats: dict[str, Any]) -> bool:
    """gpumagic's two summaries against nsys stats' CSVs: same names, counts, totals, min, max and
    medians."""
    for key, report, count_col in (
        ("kernels", "cuda_gpu_kern_sum", "Instances"),
        ("api", "cuda_api_sum", "Num Calls"),
    ):
        ref = {r["Name"]: r for r in stats["tables"].get(report, [])}
        got = summaries[key]
        if len(ref) != len(got["Name"]):
            return False
        for i, name in enumerate(got["Name"]):
            r = ref.get(name)
            if r is None:
                return False
            for col in (count_col, "Total Time (ns)", "Min (ns)", "Max (ns)", "Med (ns)"):
                if abs(float(r[col]) - float(got[col][i])) > 0.051:
                    return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--api", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "nsys_scale.json"))
    ap.add_argument("--keep", help="keep the built export at this path (reused when it exists)")
    ap.add_argument(
        "--cores",
        default="2,all",
        help="core sets to run on, comma-separated: N (the first N of this process's cores) "
        "or all (default 2,all)",
    )
    ap.add_argument(
        "--vs", metavar="REV", help="also time the report with git revision REV's code, alternated"
    )
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    tmp = tempfile.mkdtemp(prefix="gpumagic-nsys-scale-")
    path = args.keep or os.path.join(tmp, "big.sqlite")
    t0 = time.perf_counter()
    if not (args.keep and os.path.exists(path)):
        build(path, args.kernels, args.api)
    build_s = time.perf_counter() - t0
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    sets: dict[str, set[int] | None] = {}
    for spec in args.cores.split(","):
        chosen = set(cores) if spec == "all" else set(cores[: int(spec)])
        sets.setdefault(
            f"{len(chosen) or '?'} cores", chosen or None
        )  # "2,all" on 2 cores: one set
    by_cores = {}
    for name, chosen in list(sets.items())[
        1:
    ]:  # every set past the first: the summaries and nsys stats there
        extra = [run_child("summaries", path, chosen) for _ in range(args.repeat)]
        other = nsys_stats(path, tmp, chosen)
        by_cores[name] = {
            "summaries_s": statistics.median(r["summaries_s"] for r in extra),
            "peak_mb": statistics.median(r["peak_mb"] for r in extra),
            "nsys_stats_s": other["seconds"] if other else None,
        }
    first_set = next(iter(sets.values()))
    runs: dict[str, list[dict[str, Any]]] = {
        "summaries": [run_child("summaries", path, first_set) for _ in range(args.repeat)],
        "report": [],
    }
    other_root = _worktree(args.vs, tmp) if args.vs else None
    vs_runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):  # with --vs: this code and REV's, one after the other
        runs["report"].append(run_child("report", path, first_set))
        if other_root:
            vs_runs.append(run_child("report", path, first_set, root=other_root))
    if other_root:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", other_root])
    stats = nsys_stats(path, tmp, first_set)
    cores = sorted(first_set) if first_set else cores
    size_mb = os.path.getsize(path) / 1e6
    shutil.rmtree(tmp, ignore_errors=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    def best(mode: str, key: str) -> float:
        return min(r[key] for r in runs[mode])

    figures = {
        "summaries_s": med("summaries", "summaries_s"),
        "report_s": med("report", "report_s"),
        "peak_mb": max(med("summaries", "peak_mb"), med("report", "peak_mb")),
        "html_mb": med("report", "html_mb"),
    }
    checks = {k: figures[k] <= v for k, v in TARGETS.items()}
    checks["summaries equal a direct SQL computation"] = all(
        r["sql_check"] for r in runs["summaries"]
    )
    if stats:
        checks["summaries equal nsys stats"] = equal_to_nsys(
            runs["summaries"][0]["summaries"], stats
        )
    print(
        f"{args.kernels:,} kernels + {args.api:,} CUDA API calls, {size_mb:.0f} MB SQLite "
        f"(built in {build_s:.1f} s), "
        f"cores {cores or '?'}, {args.repeat} runs each"
    )
    rows = [
        (
            "import gpumagic",
            med("summaries", "import_s"),
            best("summaries", "import_s"),
            None,
            None,
        ),
        (
            "load_nsys (metadata; tables lazy)",
            med("summaries", "load_s"),
            best("summaries", "load_s"),
            None,
            None,
        ),
        (
            "load + kernel_summary + api_summary",
            figures["summaries_s"],
            best("summaries", "summaries_s"),
            med("summaries", "peak_mb"),
            TARGETS["summaries_s"],
        ),
        (
            "load + full report HTML",
            figures["report_s"],
            best("report", "report_s"),
            med("report", "peak_mb"),
            5.0,
        ),
    ]
    if stats:
        rows.append(
            (
                "nsys stats -r cuda_gpu_kern_sum,cuda_api_sum",
                stats["seconds"],
                stats["seconds"],
                None,
                None,
            )
        )
    print(f"{'step':<46} {'median s':>9} {'best s':>8} {'peak MB':>8} {'target':>7}")
    for step, m, b, peak, target in rows:
        peak_s = f"{peak:.0f}" if peak is not None else ""
        target_s = f"{target:g} s" if target is not None else ""
        print(f"{step:<46} {m:>9.2f} {b:>8.2f} {peak_s:>8} {target_s:>7}")
    first = runs["summaries"][0]
    print(
        f"RSS after imports {med('summaries', 'rss_after_import_mb'):.0f} MB; report HTML "
        f"{figures['html_mb']:.2f} MB; "
        f"summary rows: {first['kernel_rows']} kernel names, {first['api_rows']} API names"
    )
    if stats:
        print(
            f"gpumagic vs nsys stats: {stats['seconds'] / figures['summaries_s']:.1f}x faster "
            f"({stats['nsys']})"
        )
    for name, row in by_cores.items():
        ratio = (
            f", {row['nsys_stats_s'] / row['summaries_s']:.1f}x faster"
            if row["nsys_stats_s"]
            else ""
        )
        nsys_s = f"; nsys stats {row['nsys_stats_s']:.2f} s" if row["nsys_stats_s"] else ""
        print(
            f"on {name}: load + summaries {row['summaries_s']:.2f} s, {row['peak_mb']:.0f} "
            f"MB{nsys_s}{ratio}"
        )
    side_by_side = None
    if vs_runs:
        this = [r["report_s"] for r in runs["report"]]
        other = [r["report_s"] for r in vs_runs]
        side_by_side = {
            "rev": args.vs,
            "this_s": this,
            "rev_s": other,
            "ratio_this_over_rev": statistics.median(this) / statistics.median(other),
        }
        print(
            f"side by side, alternated: this code {statistics.median(this):.2f} s, {args.vs} "
            f"{statistics.median(other):.2f} s (medians of {len(this)}): ratio "
            f"{side_by_side['ratio_this_over_rev']:.2f}"
        )
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    result = {
        "kernels": args.kernels,
        "api_calls": args.api,
        "sqlite_mb": size_mb,
        "cores": cores,
        "figures": figures,
        "targets": TARGETS,
        "checks": checks,
        "nsys_stats_s": stats["seconds"] if stats else None,
        "by_cores": by_cores,
        "side_by_side": side_by_side,
        "runs": {
            m: [{k: v for k, v in r.items() if k != "summaries"} for r in rs]
            for m, rs in runs.items()
        },
        "peak_memory": "ru_maxrss of a fresh child process doing only that step (whole process)",
        "pass": all(checks.values()),
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.json}")


def _worktree(rev: str, tmp: str) -> str:
    """A detached worktree of ``rev`` under ``tmp``: its package is what ``--vs`` times."""
    where = os.path.join(tmp, "vs")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", where, rev],
        check=True,
        capture_output=True,
    )
    return where


if __name__ == "__main__":
    main()
