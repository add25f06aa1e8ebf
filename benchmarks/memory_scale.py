"""A synthetic allocator snapshot of 1,000,000 history entries, loaded and shown:
``gpumagic.load_memory_snapshot`` from the path to the notebook's HTML, on 2 cores.

The snapshot is written in torch's own format (torch/cuda/memory.py ``_snapshot``), shaped like a
long training run recorded with Python stacks: steps of a ``--layers``-layer model, each a forward
(activations kept for backward, a temporary freed at once), a backward on the autograd thread (no
Python stack: intermediates, then gradients that live until the next step's zero_grad) and an
optimizer step (a temporary per layer). Each allocation is three entries (alloc, free_requested,
free_completed), with a frames list of its own whose frame dicts are shared, as torch builds them;
freed blocks are reused by size, and each new address is a segment of its own. The generator tracks
the true allocated level entry by entry (requests rounded to 512-byte blocks), so the peak can be
checked exactly.

Each measurement runs in a fresh child process pinned to the first ``--cores`` cores, ``--repeat``
times (median shown): ``read`` (the pickle into arrays), ``analyse`` (timeline, peak, live set,
categories, findings), ``render`` (the notebook output: text and HTML with BokehJS carried once, as
the first output of a session carries it), and ``total``, the three together. ``html_mb`` is that
output's size; ``peak_exact`` says whether the peak equals the generator's.

Targets (2 cores): total <= 3 s; output <= 5 MB; the peak exact.

    python benchmarks/memory_scale.py [--entries N] [--layers N] [--repeat 3] [--cores 2] [--json
    PATH] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TARGETS = {"total_s": 3.0, "html_mb": 5.0}
SITE = "/usr/lib/python3/dist-packages/torch"
USER = "/home/me/train.py"


def _frames() -> dict[str, list[dict[str, Any]]]:
    """Stack templates (innermost first), one dict per distinct frame."""
    f = {}

    def fr(filename: str, line: int, name: str) -> dict[str, Any]:
        return f.setdefault(
            (filename, line, name), {"filename": filename, "line": line, "name": name}
        )

    outer = [fr(USER, 88, "train"), fr(USER, 120, "<module>")] + [
        fr(f"{SITE}/x{i}.py", i, "wrap") for i in range(6)
    ]
    return {
        "act": [fr(f"{SITE}/nn/modules/linear.py", 125, "forward"), fr(USER, 31, "step"), *outer],
        "tmp": [fr(f"{SITE}/nn/functional.py", 1700, "gelu"), fr(USER, 32, "step"), *outer],
        "opt": [
            fr(f"{SITE}/optim/adamw.py", 480, "_multi_tensor_adamw"),
            fr(USER, 40, "step"),
            *outer,
        ],
        "bwd": [],
    }


def build(path: str, entries: int, layers: int) -> dict[str, int]:
    """Write the snapshot; returns the generator's own figures (peak, allocated and reserved at the
    end)."""
    stacks = _frames()
    trace: list[dict[str, Any]] = []
    free_pool: dict[int, list[int]] = {}
    blocks: dict[int, int] = {}  # live addr -> block bytes
    req: dict[int, int] = {}
    ever: dict[int, int] = {}  # addr -> block bytes, every address used (a segment each)
    next_addr = [1 << 36]
    t = [1_700_000_000_000_000]
    level = [0]
    peak = [0]

    def entry(action: str, addr: int, size: int, frames: list | None = None) -> None:
        t[0] += 3
        trace.append(
            {
                "action": action,
                "addr": addr,
                "size": size,
                "stream": 0,
                "time_us": t[0],
                "frames": frames,
            }
        )

    def alloc(size: int, kind: str) -> int:
        block = max(512, -(-size // 512) * 512)
        pool = free_pool.setdefault(block, [])
        if pool:
            addr = pool.pop()
        else:
            addr = next_addr[0]
            next_addr[0] += block + (1 << 21)
            ever[addr] = block
            entry("segment_alloc", addr, block, [])
        blocks[addr], req[addr] = block, size
        entry("alloc", addr, size, list(stacks[kind]))  # a list of its own, shared frame dicts
        level[0] += block
        peak[0] = max(peak[0], level[0])
        return addr

    def free(addr: int) -> None:
        size = req.pop(addr)
        entry("free_requested", addr, size, [])
        entry("free_completed", addr, size, [])
        level[0] -= blocks.pop(addr)
        free_pool[ever[addr]].append(addr)

    grads: list[int] = []
    step = 0
    while len(trace) < entries:
        step += 1
        for g in grads:
            free(g)
        acts = []
        for i in range(layers):
            acts.append(alloc((4 << 20) + 1000 * i, "act"))
            free(alloc(2 << 20, "tmp"))
        grads = []
        for i in reversed(range(layers)):
            inter = alloc(4 << 20, "bwd")
            grads.append(alloc((1 << 20) + 4096 * i, "bwd"))
            free(acts[i])
            free(inter)
        for _ in range(layers):
            free(alloc(1 << 20, "opt"))
    trace = trace[:entries]
    # the generator's level at the cut, replayed (the loop above may have run past it)
    live: dict[int, int] = {}
    lvl = pk = 0
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = max(512, -(-e["size"] // 512) * 512)
            lvl += live[e["addr"]]
            pk = max(pk, lvl)
        elif e["action"] == "free_requested":
            lvl -= live.pop(e["addr"])
    alloc_frames = {e["addr"]: e["frames"] for e in trace if e["action"] == "alloc"}
    segments = []
    for addr, size in ever.items():  # every address is a segment of its own
        state = "active_allocated" if addr in live else "inactive"
        segments.append(
            {
                "device": 0,
                "address": addr,
                "total_size": size,
                "allocated_size": size if addr in live else 0,
                "active_size": size if addr in live else 0,
                "requested_size": 0,
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": (0, 0),
                "is_expandable": False,
                "blocks": [
                    {
                        "address": addr,
                        "size": size,
                        "requested_size": size,
                        "state": state,
                        "frames": alloc_frames.get(addr, []) if addr in live else [],
                    }
                ],
            }
        )
    seg_in_trace = {e["addr"] for e in trace if e["action"] == "segment_alloc"}
    segments = [
        s for s in segments if s["address"] in seg_in_trace
    ]  # segments made after the cut never were
    with open(path, "wb") as f:
        pickle.dump(
            {"segments": segments, "device_traces": [trace]}, f, protocol=pickle.HIGHEST_PROTOCOL
        )
    return {
        "peak": pk,
        "allocated": lvl,
        "reserved": sum(s["total_size"] for s in segments),
        "entries": len(trace),
    }


def child(path: str) -> dict[str, Any]:
    """One measurement, in this (pinned) process."""
    import gpumagic  # noqa: F401  (imported before the clock starts, as a notebook has it)
    from gpumagic.analysis.memory import analyze_memory
    from gpumagic.capture.memory.snapshot import read_snapshot
    from gpumagic.render import embed
    from gpumagic.render.memory_view import MemoryView

    embed.bokehjs()  # BokehJS read from disk once per process, before any report
    import bokeh.plotting  # noqa: F401

    t0 = time.perf_counter()
    snap = read_snapshot(path)
    t1 = time.perf_counter()
    m = analyze_memory(snap)
    t2 = time.perf_counter()
    bundle = MemoryView(m, label="bench")._repr_mimebundle_()
    t3 = time.perf_counter()
    return {
        "read_s": t1 - t0,
        "analyse_s": t2 - t1,
        "render_s": t3 - t2,
        "total_s": t3 - t0,
        "html_mb": len(bundle["text/html"].encode()) / 1e6,
        "peak": m.peak_bytes,
        "allocated_end": m.at_end["allocated"],
        "samples": len(m.samples),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--json", default=str(RESULTS / "memory_scale_cpu.json"))
    ap.add_argument("--keep", default=None, help="keep the snapshot in this directory")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child)))
        return
    tmp = tempfile.mkdtemp(prefix="gpumagic-memscale-")
    path = os.path.join(a.keep or tmp, "snapshot.pickle")
    t = time.perf_counter()
    truth = build(path, a.entries, a.layers)
    built = time.perf_counter() - t
    cores = sorted(os.sched_getaffinity(0))[: a.cores]
    runs = []
    for _ in range(a.repeat):
        cmd = [sys.executable, __file__, "--child", path]
        pin = lambda: os.sched_setaffinity(0, cores)  # noqa: E731
        out = subprocess.run(
            cmd, capture_output=True, text=True, check=True, preexec_fn=pin, cwd=ROOT
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {
        k: statistics.median(r[k] for r in runs)
        for k in ("read_s", "analyse_s", "render_s", "total_s", "html_mb")
    }
    exact = all(
        r["peak"] == truth["peak"] and r["allocated_end"] == truth["allocated"] for r in runs
    )
    result = {
        "entries": truth["entries"],
        "layers": a.layers,
        "snapshot_mb": os.path.getsize(path) / 1e6,
        "cores": len(cores),
        "build_s": built,
        **med,
        "samples_drawn": runs[0]["samples"],
        "peak_exact": exact,
        "peak": truth["peak"],
        "targets": TARGETS,
        "runs": runs,
        "load_average": os.getloadavg(),
    }
    print(
        f"{'step':<10} {'median':>10}  (of {a.repeat} runs, {len(cores)} cores, "
        f"{truth['entries']:,} entries)"
    )
    for k in ("read_s", "analyse_s", "render_s", "total_s"):
        print(
            f"{k[:-2]:<10} {med[k]:>9.3f}s"
            + (f"   target <= {TARGETS[k]:g} s" if k in TARGETS else "")
        )
    print(f"{'html':<10} {med['html_mb']:>8.2f}MB   target <= {TARGETS['html_mb']:g} MB")
    print(f"{'peak':<10} {'exact' if exact else 'WRONG':>10}   {truth['peak']:,} bytes")
    print(f"snapshot {result['snapshot_mb']:.1f} MB, {result['samples_drawn']} samples drawn")
    pathlib.Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    if not a.keep:
        os.remove(path)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
