"""The history's cost per result: how long saving one takes with 0, 1,000 and 10,000 results already
stored (target ≤ 5 ms), what a result costs on disk, and what reading the history back costs (``--vs
last``, ``history()``).

Each result is a synthetic ``TimingResult`` of 200 samples (a typical ``%gputime``): the store knows
results, not how they were measured, so no timing runs here. "save" is the insert alone
(``Store.save``: one WAL transaction); "record" is everything ``%gputime`` adds to a measurement
(provenance, the row, the insert); "provenance, git uncached" is the git calls that ``record`` makes
at most once per 2 s. Prints a table and writes JSON.

    python benchmarks/history_store.py [--json PATH] [--saves N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from gpumagic.history import provenance as prov
from gpumagic.history.query import history
from gpumagic.history.rows import result_row
from gpumagic.history.saving import Recorder
from gpumagic.history.store import Store
from gpumagic.history.versus import versus
from gpumagic.timing import TimingResult

SAMPLES = 200
PRESENT = (0, 1_000, 10_000)


def fake(seed: int) -> TimingResult:
    rng = random.Random(seed)
    samples = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(SAMPLES)]
    return TimingResult(samples=samples, calls_per_sample=10, device="CPU", backend="host")


def quantiles(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "p50_ms": statistics.median(ms),
        "p95_ms": ms[int(0.95 * (len(ms) - 1))],
        "p99_ms": ms[int(0.99 * (len(ms) - 1))],
        "max_ms": ms[-1],
        "over_5ms": sum(v > 5 for v in ms),
        "n": len(ms),
    }


def fill(store: Store, n: int, context: dict) -> None:
    """``n`` rows in batches (one transaction each): the store as months of use leave it."""
    done = store.count()
    while done < n:
        k = min(1000, n - done)
        store.save(
            [result_row(fake(done + i), f"stmt {(done + i) % 50}", context) for i in range(k)]
        )
        done += k


def bench(present: int, saves: int, folder: pathlib.Path) -> dict:
    path = folder / f"h{present}.sqlite"
    context = prov.provenance("CPU", "host")
    store = Store(path)
    fill(store, present, context)
    insert, record = [], []
    for i in range(saves):
        row = result_row(fake(10_000_000 + i), "A @ B", context)
        t0 = time.perf_counter()
        store.save([row])
        insert.append((time.perf_counter() - t0) * 1e3)
    rec = Recorder(str(path))
    results = [fake(20_000_000 + i) for i in range(saves)]
    for r in results:
        t0 = time.perf_counter()
        rec.record(r, "A @ B")
        record.append((time.perf_counter() - t0) * 1e3)
    last_rows = store.query(
        "stmt_key = ?",
        [result_row(fake(0), "A @ B", context)["stmt_key"]],
        order="id DESC",
        limit=2,
    )
    t0 = time.perf_counter()
    rec.store.last_of(
        last_rows[0]["stmt_key"], last_rows[0]["device_key"]
    )  # --vs last's lookup, connection open
    lookup_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    versus(last_rows[1], last_rows[0])
    versus_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    df = history(path=path)
    frame_ms = (time.perf_counter() - t0) * 1e3
    store.close()
    rec.store.close()
    return {
        "present": present,
        "save": quantiles(insert),
        "record": quantiles(record),
        "vs_last_lookup_ms": lookup_ms,
        "vs_bootstrap_ms": versus_ms,
        "history_dataframe_ms": frame_ms,
        "rows_after": len(df),
        "bytes_per_result": os.path.getsize(path) / max(1, len(df)),
    }


def git_uncached(n: int = 20) -> dict[str, float]:
    ms = []
    for _ in range(n):
        prov._git_cache.clear()
        t0 = time.perf_counter()
        prov.git_state()
        ms.append((time.perf_counter() - t0) * 1e3)
    return quantiles(ms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "history_store.json")
    )
    ap.add_argument("--saves", type=int, default=300, help="saves timed at each store size")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [bench(n, args.saves, pathlib.Path(tmp)) for n in PRESENT]
    git = git_uncached()
    print(
        f"History store, {SAMPLES} samples a result, {args.saves} saves per size "
        f"({platform.node()})"
    )
    head = (
        f"{'present':>8}  {'save p50':>9} {'p95':>7} {'max':>7}  {'record p50':>10} "
        f"{'p95':>7} {'max':>7}"
    )
    print(head + f"  {'--vs last':>9} {'bootstrap':>9} {'history()':>9} {'B/result':>8}")
    for r in runs:
        s, c = r["save"], r["record"]
        print(
            f"{r['present']:>8}  {s['p50_ms']:>7.3f}ms {s['p95_ms']:>5.3f}ms {s['max_ms']:>5.2f}ms"
            f"  {c['p50_ms']:>8.3f}ms {c['p95_ms']:>5.3f}ms {c['max_ms']:>5.2f}ms"
            f"  {r['vs_last_lookup_ms']:>7.3f}ms {r['vs_bootstrap_ms']:>7.1f}ms "
            f"{r['history_dataframe_ms']:>7.0f}ms"
            f" {r['bytes_per_result']:>8.0f}"
        )
    over = sum(r["record"]["over_5ms"] for r in runs)
    print(
        f"records over 5 ms: {over} of {args.saves * len(runs)} (a WAL checkpoint, a git "
        f"refresh, or the machine)"
    )
    print(
        f"provenance, git uncached (at most once per 2 s): p50 {git['p50_ms']:.1f} ms, p95 "
        f"{git['p95_ms']:.1f} ms"
    )
    worst = max(r["record"]["p95_ms"] for r in runs)
    print(
        f"target ≤ 5 ms per result: {'met' if worst <= 5 else 'MISSED'} (record p95 at worst "
        f"{worst:.2f} ms)"
    )
    doc = {
        "benchmark": "history_store",
        "samples_per_result": SAMPLES,
        "saves_per_size": args.saves,
        "machine": {
            "host": platform.node(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "runs": runs,
        "git_uncached": git,
        "target_ms": 5.0,
    }
    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
