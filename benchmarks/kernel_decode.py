"""Decoding speed: 100,000 kernel names as a trace holds them (a few hundred distinct names, many repeats), and
every distinct corpus name decoded cold (cache cleared). Prints a table and writes JSON.

    python benchmarks/kernel_decode.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from gpumagic.kernels import decode

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "kernel_names.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "kernel_decode.json"))
    ap.add_argument("--n", type=int, default=100_000)
    args = ap.parse_args()
    names = [e["name"] for e in json.loads(CORPUS.read_text())]
    rng = random.Random(0)
    # a trace: names repeat with a skewed frequency (a few GEMMs dominate), as kernels do
    trace = rng.choices(names, weights=[1 / (i + 1) for i in range(len(names))], k=args.n)

    rows = []
    decode.cache_clear()
    t0 = time.perf_counter()
    for n in names:
        decode(n)
    cold = time.perf_counter() - t0
    rows.append(("distinct names, cold", len(names), cold))

    decode.cache_clear()
    t0 = time.perf_counter()
    for n in trace:
        decode(n)
    trace_time = time.perf_counter() - t0
    rows.append((f"{args.n:,} names from a trace (with repeats)", args.n, trace_time))

    print(f"{'case':<44} {'names':>8} {'seconds':>9} {'µs/name':>9}")
    for case, count, secs in rows:
        print(f"{case:<44} {count:>8} {secs:>9.4f} {secs / count * 1e6:>9.2f}")
    target = 1.0
    verdict = "PASS" if trace_time < target else "FAIL"
    print(f"target: {args.n:,} trace names in under {target:.0f} s -> {verdict}")
    with open(args.json, "w") as f:
        json.dump(
            {
                "rows": [dict(case=c, names=n, seconds=s) for c, n, s in rows],
                "target_s": target,
                "pass": trace_time < target,
            },
            f,
            indent=2,
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
