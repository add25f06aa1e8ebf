"""``python -m gpumagic diff A B``: two profiles compared in a terminal, and a CI gate on a profile.

Prints the diff's text (``gpumagic.diff``); ``--html FILE`` also writes its page (the waterfall
included), ``--json FILE`` its rows. Exits 0, or 1 when B's GPU busy time exceeds A's by more than
``--fail-above`` (default: never fails), or 2 when a file cannot be read or written, or when a side
recorded no kernels under ``--fail-above``: a gate that compared nothing must not pass.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import GpuMagicError
from .history import EXIT_SLOWER, EXIT_UNREADABLE, percentage

if TYPE_CHECKING:
    from ..render.diff_view import ProfileDiff

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m gpumagic diff",
        description=(
            "Compare two profiles kernel by kernel: nsys exports (.sqlite, .nsys-rep), "
            "torch.profiler / Chrome traces (.json, .json.gz), or a directory or glob of one "
            "job's per-rank reports. Exit 0; 1 when B's GPU busy time is slower than A's beyond "
            "--fail-above; 2 when a profile cannot be read."
        ),
    )
    ap.add_argument("a", metavar="A", help="the baseline profile")
    ap.add_argument("b", metavar="B", help="the profile compared with it")
    ap.add_argument(
        "--fail-above",
        type=percentage,
        default=None,
        metavar="PCT",
        help="slowdown that fails (e.g. 5%%)",
    )
    ap.add_argument("--top", type=int, default=15, help="rows of the kernel table (default 15)")
    ap.add_argument(
        "--html", metavar="FILE", help="also write the diff as a page (with its figure)"
    )
    ap.add_argument("--json", metavar="FILE", help="also write the rows and figures as JSON")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from ..api.diff import diff

    try:
        result = diff(args.a, args.b, top=args.top)
    except (GpuMagicError, OSError, ValueError) as exc:
        print(f"gpumagic diff: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(result)
    try:
        _write(result, args)
    except (OSError, ValueError) as exc:  # a missing folder crashed with exit 1, "slower"
        where = getattr(exc, "filename", None) or args.html or args.json
        why = getattr(exc, "strerror", None) or str(exc)
        print(f"gpumagic diff: cannot write {where}: {why}", file=sys.stderr)
        return EXIT_UNREADABLE
    if args.fail_above is not None:
        empty = [
            n for n, busy in (("A", result.data.busy_a), ("B", result.data.busy_b)) if not busy
        ]
        if empty:  # "GPU busy 2.66 ms -> 0 ns" passed the gate
            print(
                f"gpumagic diff: {' and '.join(empty)} recorded no kernels ({_path(args, empty)}): "
                "--fail-above compares GPU busy times, so there is nothing to gate",
                file=sys.stderr,
            )
            return EXIT_UNREADABLE
    if args.fail_above is not None and result.data.slower_beyond(args.fail_above):
        print(
            f"B's GPU busy time is {result.ratio - 1:+.1%} against A's: slower beyond "
            f"{args.fail_above:.1%}"
        )
        return EXIT_SLOWER
    return 0


def _path(args: argparse.Namespace, sides: list[str]) -> str:
    return ", ".join(str(args.a if side == "A" else args.b) for side in sides)


def _write(result: ProfileDiff, args: argparse.Namespace) -> None:
    """The page and the JSON asked for."""
    if args.html:
        result.save_html(args.html)
        print(f"page written to {args.html}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "busy_ns": {"a": result.data.busy_a, "b": result.data.busy_b},
                    "environment": result.environment,
                    "changes": result.changes,
                    "rows": json.loads(result.to_dataframe().to_json(orient="records")),
                    "figures": json.loads(result.data.figures.to_json(orient="records")),
                },
                f,
                indent=1,
            )
