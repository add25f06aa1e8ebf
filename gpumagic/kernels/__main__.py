"""``python -m gpumagic.kernels NAME ...``: explain kernel names on the command line (names from
stdin when none)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from .decode import decode


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m gpumagic.kernels", description="Explain GPU kernel names."
    )
    ap.add_argument(
        "names", nargs="*", help="kernel names (read from stdin, one per line, when none)"
    )
    ap.add_argument(
        "--launch",
        help="the API that launched the kernels (e.g. cuLaunchKernel): a driver-API launch of a "
        "bare name reads it as a @triton.jit kernel",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    names = args.names or [line.strip() for line in sys.stdin if line.strip()]
    for i, n in enumerate(names):
        if i:
            print()
        print((decode(n, launch=args.launch) if args.launch else decode(n)).explain_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
