"""N per-rank copies of the 1M-kernel export read as one job, against one file read alone.

    python benchmarks/job_reports.py [--files 8] [--kernels 1000000] [--api 1000000] [--json PATH]

The export is ``nsys_scale.py``'s: the committed H100 export grown to ``--kernels`` kernels and
``--api`` CUDA API calls, copied ``--files`` times (rank0.sqlite ... rank7.sqlite: one report per
rank). Each measurement runs in a fresh child process:
- ``one``: one file read whole (every table, as a worker reads it: ``job.reports.read_one``);
- ``job``: ``gpumagic.load_nsys(folder)`` with the default executor (a process pool of min(files,
  cores) workers), then the per-rank kernel summary.
Target: job wall <= 1.3 x (one x files / workers). Peak memory is the child's ``ru_maxrss`` and, for
the job, its workers' (``RUSAGE_CHILDREN``, the largest worker).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TARGET = 1.3


def child(mode: str, path: str) -> dict:
    from gpumagic import load_nsys
    from gpumagic.analysis.ranks import kernel_summary_by_rank
    from gpumagic.capture.chrome import reader as chrome_trace  # noqa: F401 - imports are not what is timed
    from gpumagic.job.reports import read_one

    t0 = time.perf_counter()
    if mode == "one":
        rows = sum(len(df) for df in read_one(path).tables.values())
    else:
        trace = load_nsys(path)
        rows = len(kernel_summary_by_rank(trace))
    wall = time.perf_counter() - t0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"wall_s": wall, "rows": rows, "peak_mb": own, "worker_peak_mb": workers}


def run_child(mode: str, path: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, path],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--api", type=int, default=1_000_000)
    parser.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "job_reports.json")
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    import nsys_scale

    tmp = tempfile.mkdtemp(prefix="job-reports-")
    try:
        folder = pathlib.Path(tmp) / "job"
        folder.mkdir()
        t0 = time.perf_counter()
        nsys_scale.build(folder / "rank0.sqlite", args.kernels, args.api)
        for i in range(1, args.files):
            shutil.copyfile(folder / "rank0.sqlite", folder / f"rank{i}.sqlite")
        built = time.perf_counter() - t0
        cores = len(os.sched_getaffinity(0))
        workers = min(args.files, cores)
        one = run_child("one", str(folder / "rank0.sqlite"))
        job = run_child("job", str(folder))
        ideal = one["wall_s"] * args.files / workers
        ratio = job["wall_s"] / ideal
        rows = [
            ("one file, read whole", f"{one['wall_s']:.2f} s", f"{one['peak_mb']:.0f} MB", "—"),
            (
                f"{args.files} files as one job",
                f"{job['wall_s']:.2f} s",
                f"{job['peak_mb']:.0f} MB",
                f"{job['worker_peak_mb']:.0f} MB",
            ),
            (f"ideal: one × {args.files} / {workers} workers", f"{ideal:.2f} s", "", ""),
            (f"job / ideal (target <= {TARGET})", f"{ratio:.2f}", "", ""),
        ]
        print(
            f"{args.files} × ({args.kernels:,} kernels, {args.api:,} API calls) on {cores} "
            f"cores; built {built:.1f} s"
        )
        print(f"{'':40} {'wall':>9} {'peak':>9} {'worker peak':>12}")
        for name, wall, peak, wpeak in rows:
            print(f"{name:40} {wall:>9} {peak:>9} {wpeak:>12}")
        result = {
            "files": args.files,
            "kernels": args.kernels,
            "api": args.api,
            "cores": cores,
            "workers": workers,
            "one": one,
            "job": job,
            "ideal_s": ideal,
            "ratio": ratio,
            "target": TARGET,
            "met": ratio <= TARGET,
        }
        pathlib.Path(args.json).write_text(json.dumps(result, indent=1))
        print("wrote", args.json)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
