"""Decoding speed: 100,000 kernel names as a trace holds them (a few hundred distinct names, many
repeats), and every distinct corpus name decoded cold (cache cleared); and the share of annotated
fields decoded right and of names with every annotated field right,
in each corpus of real names (tests/data/kernel_names*.json), and, with
``--heldout PATH``, in a hand-labelled set kept outside the repository. Prints tables and writes JSON.

    python benchmarks/kernel_decode.py [--json PATH] [--heldout PATH] [--wrong]

A held-out file is tab-separated, one name a line: ``name``, ``source``, then ``field=value`` labels
(``family=other``, ``op=gemm``, ``precision=fp16``, ``tensor_cores=True``, ``library=MIOpen``;
``a|b`` lists readings that each count as right, a library matches by prefix, ``None`` is an
absent field) and optionally ``launch=cuLaunchKernel`` to decode the name with that launch hint.
Lines starting with ``#`` are comments.
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
#: details included, equal: tests/kernels/test_kernels.py), "alternatives" (a library matches by prefix, and
#: '|' separates readings that each count as right: the held-out and training tests)
ACCURACY = {
    "kernel_names.json": "exact",
    "kernel_names_heldout.json": "alternatives",
    "kernel_names_training.json": "alternatives",
    "kernel_names_llm.json": "alternatives",
    "kernel_names_blackwell.json": "alternatives",
}


def _field(k, name: str) -> object:
    return getattr(k, name) if hasattr(k, name) and name != "details" else k.details.get(name)


def _right(k, name: str, want: object, how: str) -> bool:
    got = _field(k, name)
    if how == "exact" or not isinstance(want, str):
        return got == want
    alternatives = tuple(want.split("|"))
    if name == "library":
        return isinstance(got, str) and got.startswith(alternatives)
    if isinstance(got, (list, tuple)):  # fused ops: the labels list them joined by ','
        got = ",".join(map(str, got))
    return str(got) in alternatives if not isinstance(got, str) else got in alternatives


def _label(value: str) -> object:
    return {"True": True, "False": False, "None": None}.get(value, value)


def heldout(path: pathlib.Path) -> dict:
    """Fields right in a hand-labelled held-out file (see the module docstring), per field and per
    source, and the names with a field wrong."""
    total, right, by_source, wrong = Counter(), Counter(), {}, []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, source, *labels = line.split("\t")
        want = dict(label.split("=", 1) for label in labels)
        launch = want.pop("launch", None)
        k = decode(name, launch=launch) if launch else decode(name)
        src = by_source.setdefault(source, Counter())
        for field, value in want.items():
            ok = _right(k, field, _label(value), "alternatives")
            total[field] += 1
            right[field] += ok
            src["total"] += 1
            src["right"] += ok
            if not ok:
                wrong.append((name[:90], field, value, _field(k, field)))
    fields = {f: {"right": right[f], "total": total[f]} for f in total}
    names = sum(1 for line in path.read_text().splitlines() if line.strip() and line[0] != "#")
    return {
        "names": names,
        "right": sum(right.values()),
        "total": sum(total.values()),
        "fields": fields,
        "sources": {s: dict(c) for s, c in by_source.items()},
        "wrong": wrong,
    }


def accuracy(path: pathlib.Path, how: str) -> dict:
    """Annotated fields decoded right in one corpus, overall and per field; names with every
    annotated field right, overall and per tag (an entry's ``tags``: ``blackwell``, ``gb10``...);
    and the names with a field wrong."""
    total, right = Counter(), Counter()
    names, whole, tag_names, tag_whole, wrong = 0, 0, Counter(), Counter(), []
    for e in json.loads(path.read_text()):
        k = decode(e["name"])
        ok_all = True
        for name, want in e["expect"].items():
            ok = _right(k, name, want, how)
            total[name] += 1
            right[name] += ok
            if not ok:
                ok_all = False
                wrong.append((e["name"][:90], name, want, _field(k, name)))
        names += 1
        whole += ok_all
        for tag in e.get("tags", ()):
            tag_names[tag] += 1
            tag_whole[tag] += ok_all
    fields = {f: {"right": right[f], "total": total[f]} for f in total}
    tags = {t: {"names_right": tag_whole[t], "names": tag_names[t]} for t in tag_names}
    return {
        "right": sum(right.values()),
        "total": sum(total.values()),
        "names": names,
        "names_right": whole,
        "fields": fields,
        "tags": tags,
        "wrong": wrong,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--json", default=os.path.join(os.environ.get("OUT", "."), "kernel_decode.json")
    )
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--heldout", type=pathlib.Path, help="a hand-labelled held-out TSV to score")
    ap.add_argument(
        "--wrong", action="store_true", help="list every corpus name with a field wrong"
    )
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
    target = 0.2
    verdict = "PASS" if trace_time < target else "FAIL"
    print(f"target: {args.n:,} trace names in under {target:g} s -> {verdict}")

    scores = {name: accuracy(DATA / name, how) for name, how in ACCURACY.items()}
    print(f"\n{'corpus':<28} {'fields right':>14} {'share':>7} {'names right':>16}  per field")
    for name, sc in scores.items():
        per = ", ".join(f"{f} {v['right']}/{v['total']}" for f, v in sc["fields"].items())
        print(
            f"{name:<28} {sc['right']:>6} / {sc['total']:<5} "
            f"{sc['right'] / sc['total']:>7.1%} "
            f"{sc['names_right']:>4}/{sc['names']:<4} {sc['names_right'] / sc['names']:>6.1%}  {per}"
        )
        for tag, t in sc["tags"].items():
            print(f"    {tag:<24} names right {t['names_right']}/{t['names']}")
        if args.wrong:
            for wname, field, want, got in sc["wrong"]:
                print(f"    wrong: {field}: want {want!r}, got {got!r}: {wname}")
    held = None
    if args.heldout:
        held = heldout(args.heldout)
        print(
            f"\nheld-out {args.heldout.name}: {held['names']} names, "
            f"{held['right']} / {held['total']} fields right ({held['right'] / held['total']:.1%})"
        )
        print(
            "  per field: "
            + ", ".join(f"{f} {v['right']}/{v['total']}" for f, v in held["fields"].items())
        )
        for source, c in held["sources"].items():
            print(f"  {c['right']:>4} / {c['total']:<4} {source}")
        for name, field, want, got in held["wrong"]:
            print(f"  wrong: {field}: want {want!r}, got {got!r}: {name}")
    with open(args.json, "w") as f:
        json.dump(
            {
                "rows": [dict(case=c, names=n, seconds=s) for c, n, s in rows],
                "target_s": target,
                "pass": trace_time < target,
                "accuracy": scores,
                "heldout": held,
            },
            f,
            indent=2,
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
