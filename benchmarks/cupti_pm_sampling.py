"""Can ``%gputime`` read DRAM bandwidth and tensor-pipe activity from its own samples? A probe of
CUPTI's PM sampling (``cupti.pm_sampling``, cupti-python 13.3+: hardware counters sampled while
kernels run, no replay). Run on a GPU host:

    python benchmarks/cupti_pm_sampling.py [--json PATH]

It lists the chip's single-pass metric sets, picks the DRAM-throughput and tensor-pipe metrics they
offer, samples them over 50 bf16 8192³ GEMMs and over a bandwidth-bound copy at a few intervals, and
prints a table (configure error, samples completed, mean of each metric) and JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import traceback
from typing import Any

import torch


def workloads() -> dict[str, Any]:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    big = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    return {
        "gemm bf16 8192^3 x50": lambda: [a @ a for _ in range(50)],
        "copy 1 GiB x20": lambda: [big.clone() for _ in range(20)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "cupti_pm_sampling.json")
    )
    args = ap.parse_args()
    from cupti import cupti, pm_sampling, profiler_host

    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "rows": []}
    torch.cuda.init()
    probe = pm_sampling.Collector(0)
    chip = None
    try:
        probe.enable()
        chip = probe._chip_name
        probe.disable()
    except Exception as exc:  # noqa: BLE001 - a probe reports what failed
        report["enable_error"] = repr(exc)
    report["chip"] = chip
    sets = profiler_host.get_single_pass_sets(chip) if chip else []
    report["sets"] = {s: profiler_host.get_metrics_in_single_pass_set(chip, s) for s in sets}
    for name, metrics in report["sets"].items():
        print(f"set {name}: {len(metrics)} metrics, e.g. {metrics[:6]}")
    wanted = []
    for metrics in report["sets"].values():
        for m in metrics:
            if ("dram" in m and "throughput" in m) or ("tensor" in m and "pct" in m):
                wanted.append(m)
    wanted = list(dict.fromkeys(wanted))[:6] or [
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
    ]
    print("trying", wanted)
    work = workloads()
    for metric_set in [[m] for m in wanted] + [wanted[:2]]:
        for interval in (100_000, 20_000):
            for label, fn in work.items():
                row: dict[str, Any] = {
                    "metrics": metric_set,
                    "interval_ns": interval,
                    "work": label,
                }
                col = pm_sampling.Collector(0)
                try:
                    col.enable()
                    col.configure(
                        metrics=metric_set,
                        sampling_interval=interval,
                        hardware_buffer_size=256 << 20,
                    )
                    fn()
                    torch.cuda.synchronize()
                    col.start()
                    t0 = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    row["work_s"] = time.perf_counter() - t0
                    col.stop()
                    data = col.decode()
                    row["completed"] = data.num_completed_samples
                    row["populated"] = data.num_populated_samples
                    values = [s.metric_values for s in data]
                    row["mean"] = (
                        [sum(v[i] for v in values) / len(values) for i in range(len(metric_set))]
                        if values
                        else None
                    )
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                    row["trace"] = traceback.format_exc()[-600:]
                finally:
                    try:
                        col.disable()
                    except Exception:  # noqa: BLE001
                        pass
                report["rows"].append(row)
                got = row.get("error") or f"{row['completed']} samples, mean {row['mean']}"
                print(
                    f"{','.join(m[:40] for m in metric_set):<60} {interval:>7} ns  "
                    f"{label:<22} {got}",
                    flush=True,
                )
    del cupti
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
