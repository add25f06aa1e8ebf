"""Achieved TFLOP/s and GB/s of a few ops against the datasheet and the measured peaks; checks the
counting.

    python benchmarks/achieved_rates.py [--json PATH]      (default PATH: $OUT/achieved_rates.json,
    else ./)

For each op: the work of one call (``count_work``), a median per call taken here with CUDA events
(the truth for the rate: samples of back-to-back calls between two events), ``%gputime``'s own
median beside it, and the achieved rates as shares of the datasheet and measured peaks. The checks
of issue 13: a bf16 8192^2 matmul's TFLOP/s within 1% of 2*n^3 / median, and an elementwise add's
GB/s within 1% of 3 tensors x nbytes / median.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import gpumagic
from gpumagic.device_peaks import achieved, lookup, measure_peak
from gpumagic.timing.work import count_work


def event_median(fn, target: float = 2e-3, samples: int = 30) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    calls = max(1, int(target / max(start.elapsed_time(end) / 1e3, 1e-7)))
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "achieved_rates.json")
    )
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs CUDA")
    device = torch.cuda.get_device_name()
    print("device:", device, "| datasheet entry:", lookup(device).name if lookup(device) else None)
    peaks = measure_peak(force=True)
    print(peaks)

    n, m = 8192, 4096
    A16, B16 = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    A32 = torch.randn(m, m, device="cuda")
    x, y = (torch.randn(1 << 26, device="cuda") for _ in range(2))
    S = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ns = {"A16": A16, "B16": B16, "A32": A32, "x": x, "y": y, "S": S, "torch": torch}
    cases = [
        ("bf16 matmul 8192", "A16 @ B16", False, 2 * n**3, None),
        ("fp32 matmul 4096", "A32 @ A32", False, 2 * m**3, None),
        ("tf32 matmul 4096", "A32 @ A32", True, 2 * m**3, None),
        ("add fp32 2^26", "x + y", False, None, 3 * x.nbytes),
        ("softmax bf16 8192^2", "torch.softmax(S, dim=-1)", False, None, 2 * S.nbytes),
    ]
    rows = []
    for label, stmt, tf32, want_flops, want_bytes in cases:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        fn = eval(f"lambda: {stmt}", ns)
        fn()
        work = count_work(fn)
        median = event_median(fn)
        timed = gpumagic.gputime(stmt, globals=ns)
        sheet = achieved(work, median, device, basis="datasheet")
        meas = achieved(work, median, device, basis="measured", measured=peaks)
        row = {
            "op": label,
            "flops": work.flops,
            "bytes": work.bytes,
            "precision": work.precision_class,
            "peak_memory": work.peak_memory,
            "median_events_s": median,
            "median_gputime_s": timed.median,
            "gputime_vs_events": timed.median / median - 1,
            "tflops": sheet.flop_rate / 1e12 if sheet.flop_rate else None,
            "gbs": sheet.byte_rate / 1e9 if sheet.byte_rate else None,
            "share_datasheet": sheet.flop_share if work.flops else sheet.byte_share,
            "share_measured": meas.flop_share if work.flops else meas.byte_share,
            "limiter": sheet.limiter(),
            "segment": sheet.segment(),
            "segment_measured": meas.segment(),
        }
        if want_flops is not None:
            row["flops_check"] = (sheet.flop_rate / (want_flops / median)) - 1
        if want_bytes is not None:
            row["bytes_check"] = (sheet.byte_rate / (want_bytes / median)) - 1
        rows.append(row)
    torch.backends.cuda.matmul.allow_tf32 = False

    print(
        f"\n{'op':<22}{'median':>11}{'gputime':>11}{'TFLOP/s':>9}{'GB/s':>9}{'sheet':>7}{'meas':>7} "
        f" limiter / check"
    )
    for r in rows:
        check = r.get("flops_check", r.get("bytes_check"))
        tf = f"{r['tflops']:.1f}" if r["tflops"] else "-"
        gb = f"{r['gbs']:.0f}" if r["gbs"] else "-"
        sd = f"{r['share_datasheet']:.0%}" if r["share_datasheet"] is not None else "-"
        sm = f"{r['share_measured']:.0%}" if r["share_measured"] is not None else "-"
        print(
            f"{r['op']:<22}{r['median_events_s'] * 1e6:>9.1f}us{r['median_gputime_s'] * 1e6:>9.1f}us{tf:>9}{gb:>9}"
            f"{sd:>7}{sm:>7}  {r['limiter']} / {'' if check is None else f'{check:+.2e}'}"
        )
        print(f"{'':<22}{r['segment']}  |  {r['segment_measured']}")
    out = {"device": device, "measured": peaks.to_json(), "rows": rows, "torch": torch.__version__}
    pathlib.Path(args.json).write_text(json.dumps(out, indent=1))
    print("wrote", args.json)


if __name__ == "__main__":
    main()
