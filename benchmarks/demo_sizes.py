"""How big each demo notebook is once executed, and what takes the bytes. Runs anywhere (CPU:
GPU-only cells skip; on a GPU host every cell runs):

    python benchmarks/demo_sizes.py [--demos PATH ...] [--json PATH] [--limit-mb 5]

Each demo is executed with nbclient on a copy in a temporary folder (the committed notebooks are
never touched), as ``tests/test_demos.py`` does, then written with nbformat and measured. Per
notebook: its size, how many outputs carry a copy of BokehJS (gpumagic sends it once per kernel
session: more than one copy is the fault this measures), and its largest output, named by what it is
(BokehJS in gpumagic's carrier, bokeh's own ``output_notebook`` loader, a figure's JSON, a table, an
image, text). Target: every executed demo <= 5 MB.

The table goes to stdout; the JSON (every output over 10 kB, the host, bokeh's version) to
``--json``, by default ``$OUT/demo_sizes.json`` or ``./demo_sizes.json``. Exit status 1 when a demo
fails to run or exceeds the limit.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MB = 1e6
#: outputs at least this big are listed one by one in the JSON
LISTED = 10_000


def bokehjs_markers() -> list[str]:
    """A run of 48 plain characters (no quote, backslash or angle bracket, so it survives JSON and
    HTML escaping) from each BokehJS bundle bokeh ships, the core first: an output holding one holds
    a copy of that bundle."""
    from bokeh.resources import Resources

    markers = []
    for js in Resources(mode="inline").js_raw:
        for m in re.finditer(r"[A-Za-z0-9_.,;:(){}=+\-*/ ]{48}", js[len(js) // 2 :]):
            markers.append(m.group(0))
            break
    return markers


def _text(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else "".join(value)
        if isinstance(value, list)
        else json.dumps(value)
    )


def classify(output: dict[str, Any], markers: list[str]) -> tuple[str, int]:
    """(what the output is, how many copies of BokehJS's core bundle it holds)."""
    if output.get("output_type") == "stream":
        return "text (stream)", 0
    if output.get("output_type") == "error":
        return "error", 0
    data = output.get("data", {})
    blob = "".join(_text(v) for v in data.values())
    bundles = blob.count(markers[0])
    html = _text(data.get("text/html", ""))
    if "application/vnd.bokehjs_load.v0+json" in data or (
        bundles and "application/javascript" in data
    ):
        return (
            "bokeh output_notebook() loader: BokehJS inline (as JS and as the load mime type)",
            bundles,
        )
    if bundles and "text/x-gpumagic-bokehjs" in html:
        return "BokehJS in gpumagic's once-per-session carrier, with a figure", bundles
    if bundles and "srcdoc=" in html:
        return "figure in an iframe page with its own BokehJS", bundles
    if bundles:
        return "BokehJS (other)", bundles
    if "application/vnd.bokehjs_exec.v0+json" in data:
        return "bokeh show() figure (JSON)", 0
    if "gm-timeline" in html:
        return "gpumagic figure (JSON item)" + (" + table" if "<table" in html else ""), 0
    if any(k.startswith("image/") for k in data):
        return "image", 0
    if "<table" in html:
        return "table (HTML)", 0
    if html:
        return "HTML", 0
    return "text", 0


def measure(path: str, markers: list[str], timeout: int) -> dict[str, Any]:
    import nbclient
    import nbformat
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    with tempfile.TemporaryDirectory(prefix="demo_sizes_") as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        shutil.copy(path, copy)
        nb = nbformat.read(copy, as_version=4)
        t0 = time.perf_counter()
        error = None
        try:
            nbclient.NotebookClient(
                nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": tmp}}
            ).execute()
        except (
            CellExecutionError,
            DeadKernelError,
            TimeoutError,
            RuntimeError,
        ) as exc:  # a cell failed: measure what ran, and say so
            error = (
                f"{type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            )
        seconds = time.perf_counter() - t0
        nbformat.write(nb, copy)
        size = os.path.getsize(copy)
    outputs = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            what, bundles = classify(o, markers)
            mime = ",".join(o.get("data", {})) or o.get("output_type", "")
            outputs.append(
                {
                    "cell": i,
                    "bytes": len(json.dumps(o)),
                    "mime": mime,
                    "what": what,
                    "bokehjs": bundles,
                }
            )
    outputs.sort(key=lambda o: -o["bytes"])
    return {
        "notebook": os.path.basename(path),
        "bytes": size,
        "mb": round(size / MB, 3),
        "seconds": round(seconds, 1),
        "error": error,
        "bokehjs_copies": sum(o["bokehjs"] for o in outputs),
        "largest": outputs[0] if outputs else None,
        "outputs": [o for o in outputs if o["bytes"] >= LISTED],
    }


def host() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
    try:
        import bokeh

        info["bokeh"] = bokeh.__version__
        import torch

        info["torch"] = torch.__version__
        info["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    except ImportError:
        pass
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--demos", nargs="*", default=sorted(glob.glob(os.path.join(ROOT, "demos", "*.ipynb")))
    )
    ap.add_argument("--json", default=os.path.join(os.environ.get("OUT", "."), "demo_sizes.json"))
    ap.add_argument("--limit-mb", type=float, default=5.0)
    ap.add_argument("--timeout", type=int, default=600, help="per cell, seconds")
    ap.add_argument("--note", default="", help="a line kept in the JSON (what was run, and why)")
    args = ap.parse_args(argv)
    markers = bokehjs_markers()
    rows = []
    limit = f"<= {args.limit_mb:g} MB"
    head = f"{'notebook':<32} {'MB':>7} {'s':>6} {'BokehJS':>7}  {limit:<8} largest output"
    print(head)
    print("-" * len(head))
    for path in args.demos:
        r = measure(path, markers, args.timeout)
        r["ok"] = r["error"] is None and r["mb"] <= args.limit_mb
        rows.append(r)
        big = r["largest"]
        largest = (
            f"cell {big['cell']}: {big['bytes'] / MB:.2f} MB, {big['what']}" if big else "none"
        )
        fits = ("yes" if r["mb"] <= args.limit_mb else "NO") + (" (error)" if r["error"] else "")
        print(
            f"{r['notebook']:<32} {r['mb']:>7.2f} {r['seconds']:>6.1f} "
            f"{r['bokehjs_copies']:>7}  {fits:<8} {largest}",
            flush=True,
        )
        if r["error"]:
            print(f"    {r['error']}")
    report = {"host": host(), "limit_mb": args.limit_mb, "note": args.note, "notebooks": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"\nwritten: {args.json}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
