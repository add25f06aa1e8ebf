"""What saving a profile and ``--vs`` add to a ``%%gpuprofile`` cell (target: ``--vs`` adds ≤ 50
ms).

A CPU cell (a small MLP's training step: forward, loss, backward, SGD step; a few hundred torch ops)
is profiled by ``%%gpuprofile -w 0`` in a real IPython shell with the extension loaded, in four
settings, interleaved round by round so that a busy machine slows each alike: ``history off``
(nothing saved: the cell as it was before profiles were saved), ``saved`` (the default: the
profile's summaries saved), ``--vs last`` and ``--vs LABEL`` (saved, the reference looked up, the
diff made and displayed: its text and its HTML with the waterfall, as a notebook formats it). The
store holds ``--present`` timings and profiles already, as months of use leave it. What ``--vs``
adds is the median of ``--vs`` less the median of ``saved``; what saving adds, ``saved`` less
``history off``.

A CPU profile has no kernels, so its summaries are small; the second table times the recorder alone
(summaries, row, insert, lookup, diff, HTML) on the committed H100 traces
(tests/data/torch_*.json.gz), a GEMM and a transformer block, to show the cost where a profile has
GPU kernels. The first ``--vs`` in a process also imports the diff's modules: it is reported on its
own ("first").

    python benchmarks/profile_vs.py [--rounds 15] [--present 1000] [--json PATH]
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
from types import SimpleNamespace
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"
TARGET_MS = 50.0
CELL = """\
out = model(batch)
loss = torch.nn.functional.cross_entropy(out, target)
loss.backward()
opt.step()
opt.zero_grad()
"""
SETUP = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batch, target = torch.randn(32, 64), torch.randint(0, 10, (32,))
"""
SETTINGS = {
    "history off": ("-w 0", ""),
    "saved": ("-w 0", None),
    "--vs last": ("-w 0 --vs last", None),
    "--vs LABEL": ("-w 0 --vs base", None),
}


def fill(path: pathlib.Path, present: int) -> None:
    """``present`` rows, nine timings to one profile (of the H100 block trace): a store after months
    of use."""
    from gpumagic.analysis.profile_summary import summarize
    from gpumagic.capture.chrome.reader import load_trace
    from gpumagic.history.profiles import profile_row
    from gpumagic.history.provenance import provenance
    from gpumagic.history.rows import result_row
    from gpumagic.history.store import Store
    from gpumagic.timing import TimingResult

    summary = summarize(load_trace(ROOT / "tests" / "data" / "torch_block.json.gz"))
    gpu = provenance("NVIDIA H100 80GB HBM3", "torch.profiler")
    cpu = provenance("CPU", "host")
    rng = random.Random(0)
    rows: list[dict[str, Any]] = []
    for i in range(present):
        if i % 10 == 9:
            rows.append(profile_row(summary, f"cell {i % 7}", gpu, label=f"p{i % 5}"))
        else:
            samples = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(200)]
            r = TimingResult(samples=samples, calls_per_sample=10, device="CPU", backend="host")
            rows.append(result_row(r, f"stmt {i % 50}", cpu))
    with Store(path) as store:
        for start in range(0, len(rows), 1000):
            store.save(rows[start : start + 1000])


def cell_times(rounds: int, path: pathlib.Path) -> dict[str, Any]:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    os.environ["GPUMAGIC_HISTORY"] = str(path)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpumagic")
    ip.run_cell(SETUP)

    def run(setting: str) -> float:
        line, history = SETTINGS[setting]
        ip.run_line_magic("config", f"GpuMagics.history = {history!r}")  # None: $GPUMAGIC_HISTORY
        with capture_output() as cap:
            t0 = time.perf_counter()
            ip.run_cell_magic("gpuprofile", line, CELL)
            took = (time.perf_counter() - t0) * 1e3
        shown = len(cap.outputs)
        assert shown == (2 if "--vs" in line else 1), (setting, shown, cap.stdout, cap.stderr)
        return took

    run("saved")  # torch.profiler's own first start, and a profile for --vs last
    with capture_output():
        ip.run_cell_magic("gpuprofile", "-w 0 -l base", CELL)
    first = {"--vs LABEL": run("--vs LABEL")}  # the diff's modules imported here
    times: dict[str, list[float]] = {s: [] for s in SETTINGS}
    for _ in range(rounds):
        for setting in SETTINGS:
            times[setting].append(run(setting))
    med = {s: statistics.median(v) for s, v in times.items()}
    return {
        "median_ms": med,
        "iqr_ms": {s: _iqr(v) for s, v in times.items()},
        "first_vs_ms": first["--vs LABEL"],
        "save_adds_ms": med["saved"] - med["history off"],
        "vs_last_adds_ms": med["--vs last"] - med["saved"],
        "vs_label_adds_ms": med["--vs LABEL"] - med["saved"],
        "samples": times,
    }


def recorder_times(rounds: int, path: pathlib.Path) -> list[dict[str, Any]]:
    """The recorder alone on real GPU profiles: save, and save + lookup + diff + its text and
    HTML."""
    from gpumagic.capture.chrome.reader import load_trace
    from gpumagic.history.profiles import ProfileRecorder

    out = []
    for name in ("torch_matmul_4096", "torch_block"):
        trace_file = ROOT / "tests" / "data" / f"{name}.json.gz"
        ProfileRecorder(str(path), label=f"ref-{name}").record(
            SimpleNamespace(trace=load_trace(trace_file)), "ref"
        )
        save, vs, html = [], [], []
        for _ in range(rounds):
            capture = SimpleNamespace(
                trace=load_trace(trace_file)
            )  # a fresh Trace: its summaries not yet made
            t0 = time.perf_counter()
            ProfileRecorder(str(path)).record(capture, "cell")
            save.append((time.perf_counter() - t0) * 1e3)
            capture = SimpleNamespace(trace=load_trace(trace_file))
            t0 = time.perf_counter()
            got = ProfileRecorder(str(path), vs=f"ref-{name}").record(capture, "cell")
            t1 = time.perf_counter()
            got.diff._repr_mimebundle_()  # what display() asks of it in a notebook
            vs.append((time.perf_counter() - t0) * 1e3)
            html.append((time.perf_counter() - t1) * 1e3)
        kernels = int(capture.trace.kernels.shape[0])
        out.append(
            {
                "trace": name,
                "kernels": kernels,
                "save_ms": statistics.median(save),
                "vs_ms": statistics.median(vs),
                "vs_adds_ms": statistics.median(vs) - statistics.median(save),
                "html_ms": statistics.median(html),
            }
        )
    return out


def _iqr(v: list[float]) -> float:
    q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0], v[0], v[0]]
    return q[2] - q[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--present", type=int, default=1000, help="rows in the store before the cells run"
    )
    ap.add_argument("--json", default=str(RESULTS / "profile_vs_cpu.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "history.sqlite"
        fill(path, args.present)
        cells = cell_times(args.rounds, path)
        rec = recorder_times(max(5, args.rounds // 2), path)
    import torch

    print(
        f"%%gpuprofile -w 0 of a CPU training step (torch {torch.__version__}, "
        f"{os.cpu_count()} CPUs, "
        f"{platform.node()}); {args.rounds} rounds, {args.present} rows in the store"
    )
    print(f"{'setting':<12} {'median':>9} {'IQR':>8} {'adds':>9}")
    base = {
        "history off": None,
        "saved": "history off",
        "--vs last": "saved",
        "--vs LABEL": "saved",
    }
    for s, m in cells["median_ms"].items():
        adds = f"{m - cells['median_ms'][base[s]]:+7.1f}ms" if base[s] else ""
        print(f"{s:<12} {m:>7.1f}ms {cells['iqr_ms'][s]:>6.1f}ms {adds:>9}")
    print(f"first --vs in the process: {cells['first_vs_ms']:.1f} ms (the diff's modules imported)")
    print(
        "\nthe recorder alone on H100 profiles (summaries, row, insert; --vs: lookup, diff, "
        "text and HTML)"
    )
    print(f"{'trace':<18} {'kernels':>8} {'save':>9} {'--vs':>9} {'adds':>9} {'of it HTML':>10}")
    for r in rec:
        print(
            f"{r['trace']:<18} {r['kernels']:>8} {r['save_ms']:>7.1f}ms {r['vs_ms']:>7.1f}ms "
            f"{r['vs_adds_ms']:>+7.1f}ms {r['html_ms']:>8.1f}ms"
        )
    worst = max(cells["vs_last_adds_ms"], cells["vs_label_adds_ms"])
    gpu = max(r["vs_adds_ms"] for r in rec)
    verdict = "met" if worst <= TARGET_MS else "MISSED"
    print(f"target: --vs adds ≤ {TARGET_MS:.0f} ms to a CPU cell: {verdict} (worst {worst:.1f} ms)")
    print(
        f"on the H100 traces' summaries --vs adds up to {gpu:.1f} ms (the diff's matching and "
        f"its waterfall)"
    )
    doc = {
        "benchmark": "profile_vs",
        "machine": {
            "host": platform.node(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "torch": torch.__version__,
        "rounds": args.rounds,
        "present": args.present,
        "cell": cells,
        "recorder": rec,
        "target_ms": TARGET_MS,
        "worst_vs_adds_ms": worst,
        "worst_vs_adds_ms_h100_traces": gpu,
    }
    pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.json).write_text(json.dumps(doc, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
