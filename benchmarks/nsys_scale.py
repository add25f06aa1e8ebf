"""A synthetic nsys export in the real schema (table definitions copied from a committed nsys 2025.3 export) with
1,000,000 kernel rows and as many CUDA API rows -> load_nsys + every summary (+ the report): time and size.

Target: load + summaries under 10 s on a 2-core machine; report output under 5 MB. Prints a table, writes JSON.

    python benchmarks/nsys_scale.py [--kernels N] [--json PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import shutil
import sqlite3
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpumagic import load_nsys  # noqa: E402
from gpumagic.render.report import ProfileReport  # noqa: E402

TABLES = (
    "StringIds",
    "META_DATA_EXPORT",
    "TARGET_INFO_GPU",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
)


def build(path: str, n: int, seed: int = 0) -> None:
    src = tempfile.mktemp(suffix=".sqlite")
    with gzip.open(ROOT / "tests" / "data" / "nsys" / "block.sqlite.gz") as f, open(src, "wb") as g:
        shutil.copyfileobj(f, g)
    ref = sqlite3.connect(src)
    con = sqlite3.connect(path)
    for t in TABLES:
        (sql,) = ref.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()
        con.execute(sql)
    for t in ("META_DATA_EXPORT", "TARGET_INFO_GPU"):
        rows = ref.execute(f"SELECT * FROM {t}").fetchall()
        con.executemany(f"INSERT INTO {t} VALUES ({','.join('?' * len(rows[0]))})", rows)
    kcols = [r[1] for r in ref.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    ref.close()
    os.remove(src)
    names = [f"void kernel_{i}<float>(float*, int)" for i in range(300)] + [
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel_"
        "_5x_cublas",
        "cudaLaunchKernel",
        "cudaDeviceSynchronize",
        "ioctl",
    ]
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(names)))
    rng = np.random.default_rng(seed)
    dur = rng.integers(2_000, 100_000, n)
    start = np.cumsum(dur + rng.integers(500, 3_000, n))
    name_id = rng.integers(0, 301, n)
    base = dict.fromkeys(kcols, 0)
    rows = []
    for i in range(n):
        r = dict(
            base,
            start=int(start[i]),
            end=int(start[i] + dur[i]),
            deviceId=0,
            streamId=7,
            correlationId=i,
            globalPid=1 << 24,
            demangledName=int(name_id[i]),
            shortName=int(name_id[i]),
            gridX=128,
            gridY=1,
            gridZ=1,
            blockX=256,
            blockY=1,
            blockZ=1,
            registersPerThread=64,
        )
        rows.append(tuple(r[c] for c in kcols))
    con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * len(kcols))})", rows)
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME "
        "(start, end, eventClass, globalTid, correlationId, nameId, returnValue) "
        "VALUES (?, ?, 0, ?, ?, 301, 0)",
        ((int(start[i] - 4_000), int(start[i] - 1_000), (1 << 24) + 1, i) for i in range(n)),
    )
    con.execute(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, 'cell', ?, 0)",
        (int(start[0] - 10_000), int(start[-1] + dur[-1]), (1 << 24) + 1),
    )
    con.commit()
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "nsys_scale.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "synthetic.sqlite")
    t0 = time.perf_counter()
    build(path, args.kernels)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trace = load_nsys(path)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for m in ("kernel_summary", "api_summary", "nvtx_summary", "osrt_summary", "memop_summary", "memop_size_summary"):
        getattr(trace, m)()
    summ_s = time.perf_counter() - t0
    trace.meta["label"] = "cell"
    t0 = time.perf_counter()
    html = ProfileReport(trace, label="cell")._repr_html_()
    report_s = time.perf_counter() - t0
    size = len(html.encode())
    shutil.rmtree(tmp)
    ok = load_s + summ_s < 10 and size < 5_000_000
    print(f"{'step':<40} {'seconds':>8}")
    for k, v in (
        ("build synthetic export (not timed)", build_s),
        ("load_nsys", load_s),
        ("all six summaries", summ_s),
        ("report HTML with timeline", report_s),
    ):
        print(f"{k:<40} {v:>8.2f}")
    print(
        f"{args.kernels:,} kernels + {args.kernels:,} API rows: "
        f"load + summaries {load_s + summ_s:.2f} s (target < 10 s), "
        f"report {size / 1e6:.2f} MB (target < 5 MB) -> {'PASS' if ok else 'FAIL'}"
    )
    with open(args.json, "w") as f:
        json.dump(
            {
                "kernels": args.kernels,
                "load_s": load_s,
                "summaries_s": summ_s,
                "report_s": report_s,
                "html_bytes": size,
                "pass": ok,
            },
            f,
            indent=2,
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
