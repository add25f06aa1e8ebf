"""Decoding speed: 100,000 kernel names as a trace holds them (a few hundred distinct names, many
repeats), and every distinct corpus name decoded cold (cache cleared); and the share of annotated
fields decoded right in each corpus of real names (tests/data/kernel_names*.json). Prints tables and
writes JSON.

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
from collections import Counter

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from gpumagic.kernels import decode

DATA = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data"
CORPUS = DATA / "kernel_names.json"
#: corpus -> how its annotations are read, as its tests read them: "exact" (every listed field,
#: details included, equal: tests/test_kernels.py), "alternatives" (a library matches by prefix, and
#: '|' separates readings that each count as right: the held-out and training tests)
ACCURACY = {
    "kernel_names.json": "exact",
    "kernel_names_heldout.json": "alternatives",
    "kernel_names_training.json": "alternatives",
}


def _field(k, name: str) -> object:
    return getattr(k, name) if hasattr(k, name) and name != "details" else k.details.get(name)


def _right(k, name: str, want: object, how: str) -> bool:
    got = _field(k, name)
    if how == "exact" or not isinstance(want, str):
        return got == want
    alternatives = tuple(want.split("|"))
    return got.startswith(alternatives) if name == "library" else got in alternatives


def accuracy(path: pathlib.Path, how: str) -> dict:
    """Annotated fields decoded right in one corpus, overall and per field."""
    total, right = Counter(), Counter()
    for e in json.loads(path.read_text()):
        k = decode(e["name"])
        for name, want in e["expect"].items():
            total[name] += 1
            right[name] += _right(k, name, want, how)
    fields = {f: {"right": right[f], "total": total[f]} for f in total}
    return {"right": sum(right.values()), "total": sum(total.values()), "fields": fields}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "kernel_decode.json")
    )
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

    training = [e["name"] for e in json.loads((DATA / "kernel_names_training.json").read_text())]
    decode.cache_clear()
    t0 = time.perf_counter()
    for n in training:
        decode(n)
    rows.append(("training-step names, cold", len(training), time.perf_counter() - t0))

    print(f"{'case':<44} {'names':>8} {'seconds':>9} {'µs/name':>9}")
    for case, count, secs in rows:
        print(f"{case:<44} {count:>8} {secs:>9.4f} {secs / count * 1e6:>9.2f}")
    target = 1.0
    verdict = "PASS" if trace_time < target else "FAIL"
    print(f"target: {args.n:,} trace names in under {target:.0f} s -> {verdict}")

    scores = {name: accuracy(DATA / name, how) for name, how in ACCURACY.items()}
    print(f"\n{'corpus':<28} {'fields right':>14} {'share':>7}  per field")
    for name, sc in scores.items():
        per = ", ".join(f"{f} {v['right']}/{v['total']}" for f, v in sc["fields"].items())
        print(
            f"{name:<28} {sc['right']:>6} / {sc['total']:<5} "
            f"{sc['right'] / sc['total']:>7.1%}  {per}"
        )
    with open(args.json, "w") as f:
        json.dump(
            {
                "rows": [dict(case=c, names=n, seconds=s) for c, n, s in rows],
                "target_s": target,
                "pass": trace_time < target,
                "accuracy": scores,
            },
            f,
            indent=2,
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
