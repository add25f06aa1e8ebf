"""A job of many ranks read rank by rank (``gpumagic.read_job``), on a process pool and on a Dask
LocalCluster, against one rank's read: wall time, the parent's peak memory, the workers' peak.

    python benchmarks/job_scale.py [--ranks 256] [--kernels 50000] [--api 50000] [--modes pool,dask]
        [--full] [--json PATH]

The job is grown from the committed H100 export (``nsys_scale.build``: ``tests/data/nsys/
block.sqlite.gz``, every table kept) with an NCCL all-reduce after each copy of the block (one per
step): on every rank but the straggler each all-reduce lasts ``--wait-ms`` (it waits for the
straggler) plus 0.2 ms of transfer, on the straggler 0.2 ms. The ranks are hard links to two files
(the others' and the straggler's); ``--hosts N`` writes one file per rank instead, spread over N
hosts whose clocks differ (so the clocks are aligned on a collective). Each measurement runs in a
fresh child process pinned to ``--cores`` (2):

- ``one``: one rank's report read whole (``job.reports.read_one``, what a worker of
  ``load_nsys(folder)`` does) and ``summary``: read and reduced (``job.rank_summary.summarize``);
- ``pool``: ``gpumagic.read_job(folder)`` on a process pool of 2 workers, then the text report and
  the HTML; ``dask``: the same with ``client=`` a ``LocalCluster(n_workers=2, processes=True)``
  (the workers' statistical profiler off: it keeps every task's samples, 37 MB a worker over 300
  ranks), the summaries folded on the cluster too, 16 ranks a task (``job/on_dask.py``);
- ``full`` (with ``--full``): ``gpumagic.load_nsys(folder)`` and its per-rank figures, today's path.

Targets: parent peak <= 300 MB (<= 500 MB past 512 ranks), wall <= 1.2 x (one rank's read x ranks /
workers), workers <= 1.5 x one rank's read (peak), HTML <= 5 MB. Other work on the machine slows every
rank's read alike, so "one rank's read x ranks / workers" is measured in the same run: ``reads``
reads every file with ``read_one`` on the same pool of 2 and stacks nothing (twice: before and after,
averaged); one rank read alone, times the ranks over the workers, is printed beside it. The extrapolation to 16,384 ranks
on 64 Dask workers is computed from the measured per-rank costs and printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
TRANSFER_NS = 200_000
KERNELS_PER_STEP = 43  # the committed block export's kernels: one step of the synthetic job


# --- the synthetic job -----------------------------------------------------------------------
def add_nccl(path: str | os.PathLike[str], nccl_ns: int) -> int:
    """Add an NCCL all-reduce lasting ``nccl_ns`` after each step's last kernel (on a stream of its
    own); returns how many."""
    con = sqlite3.connect(path)
    k = "CUPTI_ACTIVITY_KIND_KERNEL"
    cols = [c[1] for c in con.execute(f"PRAGMA table_info({k})")]
    template = dict(zip(cols, con.execute(f"SELECT * FROM {k} LIMIT 1").fetchone()))
    ends = [r[0] for r in con.execute(f"SELECT end FROM {k} ORDER BY start, rowid")]
    sid = con.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (sid, NCCL))
    rows = []
    for i, end in enumerate(ends[KERNELS_PER_STEP - 1 :: KERNELS_PER_STEP]):
        row = dict(template)
        start = end + 20_000
        row.update(
            start=start,
            end=start + nccl_ns,
            demangledName=sid,
            shortName=sid,
            mangledName=sid,
            streamId=99,
            correlationId=10**9 + i,
        )
        rows.append(tuple(row[c] for c in cols))
    con.executemany(f"INSERT INTO {k} VALUES ({', '.join('?' * len(cols))})", rows)
    con.commit()
    con.close()
    return len(rows)


def build_job(
    folder: str | os.PathLike[str],
    ranks: int,
    kernels: int,
    api: int,
    straggler: int | None = None,
    wait_ms: float = 40.0,
    hosts: int = 1,
) -> dict[str, Any]:
    """Write ``ranks`` per-rank exports ``rank{i}.sqlite`` into ``folder`` (see the module's
    docstring); returns what was built."""
    import nsys_scale

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    straggler = ranks // 3 if straggler is None else straggler
    work = pathlib.Path(tempfile.mkdtemp(prefix="job-build-", dir=folder.parent))
    try:
        base = work / "base.sqlite"
        steps = max(1, round(kernels / (KERNELS_PER_STEP + 1)))
        nsys_scale.build(base, steps * KERNELS_PER_STEP, api)
        shutil.copyfile(base, work / "slow.sqlite")
        n = add_nccl(base, int(wait_ms * 1e6) + TRANSFER_NS)
        add_nccl(work / "slow.sqlite", TRANSFER_NS)
        for i in range(ranks):
            src = work / ("slow.sqlite" if i == straggler else "base.sqlite")
            dst = folder / f"rank{i}.sqlite"
            if hosts > 1:
                shutil.copyfile(src, dst)
                _host(dst, f"node-{i * hosts // ranks}", (i * hosts // ranks) * 1_500_000_000)
            else:
                os.link(src, dst)
        size = os.path.getsize(base)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"ranks": ranks, "nccl_per_rank": n, "straggler": straggler, "sqlite_mb": size / 1e6}


def _host(path: pathlib.Path, host: str, clock_ns: int) -> None:
    """Say the export ran on ``host``, whose clock is ``clock_ns`` ahead."""
    con = sqlite3.connect(path)
    con.execute("UPDATE TARGET_INFO_SYSTEM_ENV SET value = ? WHERE name = 'Hostname'", (host,))
    con.execute(
        "UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + ?", (clock_ns,)
    )
    con.commit()
    con.close()


# --- the measured work, each in a fresh child process ----------------------------------------
def _peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def _rss_now_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _rows(path: str) -> int:
    from gpumagic.job.reports import read_one

    return sum(len(df) for df in read_one(path).tables.values())


def _cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _worker_state() -> tuple[float, float]:
    """A Dask worker's CPU seconds so far and its RSS now (MB), the reader's modules loaded."""
    from gpumagic.capture.chrome import reader as chrome_trace  # noqa: F401
    from gpumagic.job import rank_summary  # noqa: F401

    return _cpu_s(), _rss_now_mb()


def child(mode: str, path: str) -> dict[str, Any]:
    from gpumagic.capture.chrome import reader as chrome_trace  # noqa: F401 - imports are not what is timed
    from gpumagic.job import read_job
    from gpumagic.job.rank_summary import summarize, summary_bytes
    from gpumagic.job.reports import read_one

    out: dict[str, Any] = {"rss_after_import_mb": _peak_mb()}
    t0, cpu0 = time.perf_counter(), _cpu_s()
    if mode == "one":
        out["rows"] = sum(len(df) for df in read_one(path).tables.values())
    elif mode == "summary":
        import pickle

        from gpumagic.job.fold import Fold

        s = summarize(path)
        out["summary_bytes"] = summary_bytes(s)
        kept = Fold(
            []
        )  # what a fold keeps of a rank (a fold task on a Dask worker holds 16 ranks')
        kept.add(0, s)
        out["kept_bytes"] = len(pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))
    elif mode == "reads":  # today's per-rank work on the same pool, nothing stacked: the baseline
        import concurrent.futures as cf

        from gpumagic.job.reports import expand

        files = expand(path)
        with cf.ProcessPoolExecutor(2) as pool:
            out["rows"] = sum(pool.map(_rows, files, chunksize=1))
        out["read_s"] = time.perf_counter() - t0
        out["cpu_s"] = _cpu_s() - cpu0 + _cpu_s(resource.RUSAGE_CHILDREN)
    elif mode == "full":
        from gpumagic import load_nsys
        from gpumagic.analysis.ranks import rank_figures

        out["gpus"] = len(rank_figures(load_nsys(path)))
    else:
        client = cluster = None
        if mode == "dask":
            import dask
            from distributed import Client, LocalCluster

            # Dask's statistical profiler keeps every task's samples: +37 MB a worker over 300 ranks
            dask.config.set({"distributed.worker.profile.enabled": False})
            cluster = LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
            client = Client(cluster)
            before = client.run(_worker_state)
            out["worker_idle_mb"] = max(rss for _, rss in before.values())
            t0, cpu0 = time.perf_counter(), _cpu_s()  # the cluster's start is not the job's reading
        out["rss_before_read_mb"] = _rss_now_mb()
        job = read_job(path, client=client, progress=False)
        out["read_s"] = time.perf_counter() - t0
        out["cpu_s"] = _cpu_s() - cpu0 + (_cpu_s(resource.RUSAGE_CHILDREN) if client is None else 0)
        if client is not None:
            after = client.run(_worker_state)
            out["cpu_s"] += sum(after[w][0] - before[w][0] for w in after)
        out["peak_read_mb"] = _peak_mb()
        text = str(job)
        html = job._repr_html_()
        out["text_lines"], out["html_mb"] = text.count("\n") + 1, len(html.encode()) / 1e6
        out["straggler"] = job.featured().get("straggler")
        out["gpus"] = len(job.rank_figures())
        out["mean_rank_read_s"] = float(job.data.ranks["read_s"].mean())
        if client is not None:
            peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            out["worker_peak_mb"] = max(peaks.values())
            client.close()
            cluster.close()
    out["wall_s"] = time.perf_counter() - t0
    out["peak_mb"] = _peak_mb()
    if mode in ("pool", "full"):
        out["worker_peak_mb"] = _peak_mb(resource.RUSAGE_CHILDREN)
    return out


def run_child(mode: str, path: str, cores: set[int] | None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, path],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
    )
    if proc.returncode:
        raise SystemExit(f"child {mode} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def extrapolate(one: dict[str, Any], summary: dict[str, Any], runs: dict[str, Any], n: int) -> dict:
    """Memory and time of 16,384 ranks on a Dask cluster of 64 workers, from the measured costs:
    the parent's growth per rank (its peak while reading above its RSS before, over the ranks; the
    report's own cost, Bokeh's import included, is a constant on top), the per-rank summary time,
    and each run's overhead over that ideal."""
    ranks, workers = 16_384, 64
    out: dict[str, Any] = {"ranks": ranks, "workers": workers}
    for mode, r in runs.items():
        base = r["rss_before_read_mb"]
        per_rank_mb = max(r["peak_read_mb"] - base, 0.0) / n
        overhead = r["read_s"] / (summary["wall_s"] * n / 2)
        out[mode] = {
            "parent_mb_per_rank": per_rank_mb,
            "parent_peak_mb": r["peak_mb"] + per_rank_mb * (ranks - n),
            "wall_s": summary["wall_s"] * ranks / workers * overhead,
            "overhead_vs_ideal": overhead,
        }
    out["worker_peak_mb"] = summary["peak_mb"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--kernels", type=int, default=50_000)
    ap.add_argument("--api", type=int, default=50_000)
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument("--wait-ms", type=float, default=40.0)
    ap.add_argument("--modes", default="pool,dask")
    ap.add_argument("--full", action="store_true", help="also time load_nsys(folder), today's path")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "job_scale.json"))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    cores = set(sorted(os.sched_getaffinity(0))[: args.cores])
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="job-scale-"))
    try:
        t0 = time.perf_counter()
        built = build_job(
            tmp / "job", args.ranks, args.kernels, args.api, hosts=args.hosts, wait_ms=args.wait_ms
        )
        built["build_s"] = time.perf_counter() - t0
        first = str(tmp / "job" / "rank0.sqlite")
        one, summary = run_child("one", first, cores), run_child("summary", first, cores)
        modes = [m for m in args.modes.split(",") if m] + (["full"] if args.full else [])
        runs = {"reads": run_child("reads", str(tmp / "job"), cores)}
        runs.update({m: run_child(m, str(tmp / "job"), cores) for m in modes})
        again = run_child("reads", str(tmp / "job"), cores)  # the box's load may drift: twice
        for key in ("read_s", "cpu_s"):
            runs["reads"][key] = (runs["reads"][key] + again[key]) / 2
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(args, built, one, summary, runs, len(cores))


def report(args: Any, built: dict, one: dict, summary: dict, runs: dict, workers: int) -> None:
    n = args.ranks
    solo = one["wall_s"] * n / workers  # one rank read alone, times the ranks, over the workers
    ideal = runs["reads"]["read_s"]  # the same reads on the same pool in this run (the box's load)
    parent_cap = 300.0 if n <= 512 else 500.0
    print(
        f"{n} ranks x ({args.kernels:,} kernels, {args.api:,} API calls, "
        f"{built['nccl_per_rank']} NCCL all-reduces), {built['sqlite_mb']:.1f} MB SQLite a rank, "
        f"straggler rank {built['straggler']}, {args.hosts} host(s); {workers} cores; built in "
        f"{built['build_s']:.0f} s"
    )
    print(f"{'':44} {'wall s':>8} {'parent MB':>10} {'worker MB':>10} {'HTML MB':>8}")
    print(f"{'one rank read whole (read_one)':44} {one['wall_s']:>8.2f} {one['peak_mb']:>10.0f}")
    print(
        f"{'one rank read and summarised':44} {summary['wall_s']:>8.2f} "
        f"{summary['peak_mb']:>10.0f}   ({summary['summary_bytes'] / 1e3:.0f} KB crosses)"
    )
    checks: dict[str, bool] = {}
    for mode, r in runs.items():
        if mode == "reads":
            continue
        wall = r.get("read_s", r["wall_s"])
        html = f"{r['html_mb']:>8.2f}" if "html_mb" in r else ""
        print(
            f"{mode + ' (' + str(n) + ' ranks)':44} {wall:>8.2f} {r['peak_mb']:>10.0f} "
            f"{r.get('worker_peak_mb', float('nan')):>10.0f} {html}"
        )
        if mode == "full":
            continue
        checks[f"{mode}: parent peak <= {parent_cap:.0f} MB"] = r["peak_mb"] <= parent_cap
        checks[f"{mode}: wall <= 1.2 x the ranks' reads ({ideal:.1f} s)"] = wall <= 1.2 * ideal
        checks[f"{mode}: workers <= 1.5 x one rank's read"] = (
            r["worker_peak_mb"] <= 1.5 * one["peak_mb"]
        )
        if "worker_idle_mb" in r:  # a Dask worker's own RSS before any rank, then one rank's growth
            grew = r["worker_peak_mb"] - r["worker_idle_mb"]
            checks[f"{mode}: a worker grows <= 1.5 x one rank's read's growth"] = grew <= 1.5 * (
                one["peak_mb"] - one["rss_after_import_mb"]
            )
            print(
                f"  {mode}: a worker {r['worker_idle_mb']:.0f} MB before any rank (Dask, pandas, "
                f"gpumagic loaded), {r['worker_peak_mb']:.0f} MB at its peak: +{grew:.0f} MB; one "
                f"rank's read alone +{one['peak_mb'] - one['rss_after_import_mb']:.0f} MB"
            )
        checks[f"{mode}: HTML <= 5 MB"] = r["html_mb"] <= 5.0
        checks[f"{mode}: straggler found (rank {built['straggler']})"] = (
            r["straggler"] == f"rank {built['straggler']}"
        )
    print(
        f"the ranks' reads (read_one of every file on a pool of {workers}, nothing stacked, "
        f"mean of two runs): {ideal:.1f} s; one rank alone x {n} / {workers}: {solo:.1f} s"
    )
    for mode in ("pool", "dask"):
        if mode in runs:
            r = runs[mode]
            print(
                f"  {mode}: {r['read_s'] / ideal:.2f} x the ranks' reads, {r['read_s'] / solo:.2f} x "
                f"one rank alone; a rank read and summarised on a worker {r['mean_rank_read_s']:.2f} s"
            )
            print(
                f"  {mode}: CPU {r['cpu_s']:.1f} s against the reads' {runs['reads']['cpu_s']:.1f} s "
                f"({r['cpu_s'] / runs['reads']['cpu_s']:.2f} x: CPU time, unlike wall, is not the "
                "other work's on this machine)"
            )
    ext = extrapolate(one, summary, {m: r for m, r in runs.items() if m in ("pool", "dask")}, n)
    for mode in ("pool", "dask"):
        if mode in ext:
            e = ext[mode]
            print(
                f"extrapolated, 16,384 ranks on 64 workers ({mode} overhead {e['overhead_vs_ideal']:.2f}"
                f" x ideal): parent {e['parent_peak_mb']:.0f} MB ({e['parent_mb_per_rank'] * 1e3:.0f}"
                f" KB a rank), wall {e['wall_s'] / 60:.1f} min, workers {ext['worker_peak_mb']:.0f} MB"
            )
    for name, ok in checks.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    result = {
        "args": {k: v for k, v in vars(args).items() if k != "child"},
        "built": built,
        "one": one,
        "summary": summary,
        "runs": runs,
        "reads_s": ideal,
        "solo_ideal_s": solo,
        "extrapolation": ext,
        "checks": checks,
        "pass": all(checks.values()),
    }
    pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
    print("wrote", args.json)


if __name__ == "__main__":
    main()
