"""``python -m gpumagic [N]``: load the extension in an IPython shell and time a matmul, on the GPU
where there is one.

A quick check that the install works, and a first look at the output. ``python -m gpumagic history``
lists the saved results and ``python -m gpumagic check BASELINE`` compares the latest with a
baseline (:mod:`gpumagic.cli.history`); ``python -m gpumagic diff A B`` compares two profiles
(:mod:`gpumagic.cli.diff`); ``python -m gpumagic kernel install --nsys`` installs a Jupyter kernel
that runs under Nsight Systems (:mod:`gpumagic.notebook.nsys_kernel`).
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_SIZE = 1024
#: The history's commands, which a matrix size never spells.
HISTORY_COMMANDS = ("history", "check")


def matrix_size(text: str) -> int:
    """A matrix size from the command line: a whole number of at least 1 (argparse reports anything
    else)."""
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < 1:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: the matrix size must be a whole number of at least 1, "
            f"e.g. {DEFAULT_SIZE}"
        )
    return size


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m gpumagic",
        description=(
            "Check the install: load the gpumagic extension in an IPython shell, then %gputime an "
            "N×N fp32 matmul and a tiny elementwise op, on the GPU where CUDA is available and on "
            "the CPU otherwise."
        ),
        epilog=(
            "The history of results: python -m gpumagic history [--label NAME] [--csv] [--export "
            "FILE]; python -m gpumagic check BASELINE [--fail-above 5%]; two profiles compared: "
            "python -m gpumagic diff A B [--fail-above 5%]; a Jupyter kernel under Nsight "
            "Systems: python -m gpumagic kernel install --nsys (each with -h)."
        ),
    )
    ap.add_argument(
        "size",
        metavar="N",
        nargs="?",
        type=matrix_size,
        default=DEFAULT_SIZE,
        help="matrix size (default 1024)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "diff":
        from .cli.diff import main as diff_main

        return diff_main(args[1:])
    if args and args[0] == "kernel":
        if args[1:2] != ["install"]:
            print("usage: python -m gpumagic kernel install --nsys [-h for more]", file=sys.stderr)
            return 2
        from .notebook.nsys_kernel import install_main

        return install_main(args[2:])
    if args and args[0] in HISTORY_COMMANDS:
        from .cli.history import main as history_main

        return history_main(args)
    size = parser().parse_args(argv).size
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpumagic")
    shell.run_cell(
        "import torch\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        f"A = torch.randn({size}, {size}, device=device)\n"
        f"print(f'%gputime A @ A  ({size}x{size} fp32 on {{device}})')\n"
    )
    result = shell.run_cell("%gputime A @ A")
    if not result.success:
        return 1
    print("%gputime x + 1  (a tiny op)")
    shell.run_cell("x = torch.randn(65536, device=device)")
    return 0 if shell.run_cell("%gputime x + 1").success else 1


if __name__ == "__main__":
    raise SystemExit(main())
