"""``python -m gpumagic history`` and ``python -m gpumagic check``: the history in a terminal, and a
CI step.

``check`` exits 0 when no result is significantly slower than its baseline beyond ``--fail-above``,
1 when one is, 2 when the baseline or the store cannot be read, 3 when a baseline result has no
newer result to compare with (unless ``--allow-missing``): a CI step that silently compared nothing
would pass for the wrong reason.
"""

from __future__ import annotations

import argparse
import csv
import os
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..history.profiles import unpack_summary
from ..history.query import COLUMNS, select
from ..history.rows import one_line
from ..history.store import ENV, MEMORY, PROFILE, Store, default_path, resolve_path
from ..units import format_time

__all__ = ["EXIT_MISSING", "EXIT_SLOWER", "EXIT_UNREADABLE", "main", "percentage"]

EXIT_SLOWER, EXIT_UNREADABLE, EXIT_MISSING = 1, 2, 3


def percentage(text: str) -> float:
    """'5%' or '5' -> 0.05 (a percentage either way)."""
    try:
        value = float(text.strip().rstrip("%")) / 100
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"invalid threshold {text!r}: a percentage such as 5%")
    return value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m gpumagic", description="The history of gpumagic results."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    where = f"the history file (default: {ENV}, else {default_path()})"
    h = sub.add_parser(
        "history", help="list saved results (newest last)", description="List saved results."
    )
    h.add_argument("--label", help="only results saved under this label (-l NAME)")
    h.add_argument("--statement", help="only results of this statement (the same text)")
    h.add_argument("--device", help="only results on this device (name or UUID)")
    h.add_argument(
        "--limit",
        type=_at_least_one,
        default=None,
        help="the latest N results (default: 50 listed, all in CSV)",
    )
    h.add_argument("--csv", action="store_true", help="write CSV to stdout instead of a table")
    h.add_argument(
        "--export",
        metavar="FILE",
        help="write the latest result of each statement as a CI baseline",
    )
    h.add_argument("--db", metavar="PATH", help=where)
    c = sub.add_parser(
        "check",
        help="compare the latest results with a baseline; non-zero exit on a slowdown",
        description=(
            "Compare the latest saved results with a baseline file (python -m gpumagic history "
            "--export) from their raw samples; nothing is re-run. Exit 0: no significant "
            "slowdown beyond the threshold; 1: one at least; 2: unreadable baseline or store; 3: "
            "a baseline result has no newer result."
        ),
    )
    c.add_argument(
        "baseline",
        metavar="BASELINE",
        help="a file written by: python -m gpumagic history --export FILE",
    )
    c.add_argument(
        "--fail-above",
        type=percentage,
        default=0.05,
        metavar="PCT",
        help="slowdown that fails (5%%)",
    )
    c.add_argument(
        "--allow-missing",
        action="store_true",
        help="exit 0 even where a baseline result has no match",
    )
    c.add_argument("--db", metavar="PATH", help=where)
    return ap


def _name(row: Mapping[str, Any]) -> str:
    name = row.get("label") or one_line(row.get("statement"), 40)
    if row.get("variant") and row.get("variant") != name:
        name += f" / {row['variant']}"
    if row.get("params"):
        name += f" {row['params']}"
    return name


def _median(row: Mapping[str, Any]) -> str:
    """A timing's median ± IQR; a profile's GPU busy time; a memory run's peak."""
    if row.get("kind") == MEMORY:
        from ..analysis.memory_findings import format_bytes

        summary = unpack_summary(row.get("summary")) or {}
        peak = summary.get("peak_bytes")
        return f"peak {format_bytes(peak)}" if peak is not None else "\u2014"
    if row.get("kind") == PROFILE and row.get("gpu_busy") is not None:
        return f"GPU busy {format_time(row['gpu_busy'])}"
    if row.get("median") is None:
        return "\u2014"
    return f"{format_time(row['median'])} \u00b1 {format_time(row.get('iqr') or 0)}"


def _at_least_one(text: str) -> int:
    """``--limit``'s value: a whole number of results, 1 or more (``--limit -1`` listed nothing and
    said there were no saved results; ``-5`` dropped one)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(
            f"{n} results cannot be listed: give 1 or more (leave --limit out for 50, all in CSV)"
        )
    return n


def _list(store: Store, args: argparse.Namespace) -> int:
    limit = args.limit if args.limit is not None else (None if args.csv else 50)
    which = {"label": args.label, "statement": args.statement, "device": args.device}
    columns = [*COLUMNS, "summary"]  # not the samples
    rows = select(  # timings, profiles and memory runs; one more: are there more?
        store, **which, limit=limit + 1 if limit else None, columns=columns, profiles=True
    )
    more = limit is not None and len(rows) > limit
    rows = rows[1:] if more else rows
    if args.csv:
        out = csv.writer(sys.stdout)
        out.writerow(COLUMNS)
        for row in rows:
            out.writerow([row.get(c) for c in COLUMNS])
        return 0
    if not rows:
        print(f"no saved results in {store.path}")
        return 0
    head = ("id", "when", "label / statement", "median ± IQR / peak", "n", "device", "commit")
    table = [head]
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["created"]))
        commit = (row.get("git_commit") or "")[:7] + ("+" if row.get("git_dirty") else "")
        table.append(
            (
                str(row["id"]),
                when,
                _name(row),
                _median(row),
                str(row["n_samples"]) if row.get("kind") not in (PROFILE, MEMORY) else row["kind"],
                row["device"],
                commit,
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print(
            "  ".join(
                cell.ljust(w) if i != 3 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(r, widths))
            )
        )
    if more:
        print(f"(the latest {len(rows)} results in {store.path}; --limit N for more)")
    return 0


def _check(store: Store, args: argparse.Namespace) -> int:
    from ..history.baseline import check, read_baseline

    try:
        doc = read_baseline(args.baseline)
    except (OSError, ValueError) as exc:
        print(f"gpumagic check: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    entries = check(store, doc, fail_above=args.fail_above)
    print(
        f"gpumagic check: {len(entries)} baseline results, fail above +{args.fail_above:.1%} "
        f"slower ({store.path})"
    )
    missing = 0
    for e in entries:
        name = f"{_name(e.baseline)} on {e.baseline.get('device')}"
        if e.current is None or e.stats is None:
            missing += 1
            print(f"  MISSING  {name}: no result since the baseline's")
            continue
        s = e.stats
        mark = "FAIL" if e.failed else "ok"
        print(
            f"  {mark:7}  {name}: {_median(e.baseline)} -> {_median(e.current)} "
            f"(#{e.current['id']}), "
            f"time \u00d7{s.ratio:.3f} [{s.low:.3f}, {s.high:.3f}] 95% CI: {s.verdict}"
        )
        for w in e.warnings:
            print(f"           \u26a0 {w}")
    failed = sum(e.failed for e in entries)
    if failed:
        print(f"{failed} significantly slower beyond {args.fail_above:.1%}")
        return EXIT_SLOWER
    if missing and not args.allow_missing:
        print(
            f"{missing} baseline results have nothing to compare with (--allow-missing to accept)"
        )
        return EXIT_MISSING
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    path = resolve_path(args.db)
    if path is None:
        print(
            f"gpumagic {args.command}: the history is off ({ENV}); --db PATH reads a file",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    store = Store(path, readonly=True)
    try:
        if args.command == "history":
            if args.export:
                return _export(store, args)
            return _list(store, args)
        return _check(store, args)
    except BrokenPipeError:  # `| head`: the reader left; nothing is wrong with the store
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter's flush at exit
        print(
            f"gpumagic {args.command}: output closed before the end (broken pipe)", file=sys.stderr
        )
        return EXIT_UNREADABLE
    except (sqlite3.Error, OSError) as exc:
        print(f"gpumagic {args.command}: cannot read {path}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    except Exception as exc:  # noqa: BLE001 - exit 1 means "slower": a crash must not read so
        where = getattr(args, "baseline", None) or path
        print(f"gpumagic {args.command}: {where}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    finally:
        store.close()


def _export(store: Store, args: argparse.Namespace) -> int:
    """``--export FILE``: a file that cannot be written is said as that file's (it was blamed on
    the history: "cannot read ...history.sqlite")."""
    from ..history.baseline import export

    which = {"label": args.label, "statement": args.statement, "device": args.device}
    try:
        n = export(store, args.export, **which)
    except OSError as exc:
        if exc.filename is None or os.fspath(exc.filename) != os.fspath(args.export):
            raise
        print(f"gpumagic history: cannot write {args.export}: {exc.strerror}", file=sys.stderr)
        return EXIT_UNREADABLE
    print(f"{n} results written to {args.export} (the latest of each statement)")
    return 0
