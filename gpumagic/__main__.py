"""``python -m gpumagic``: load the extension in an IPython shell and time a matmul, on the GPU where there is one.

A quick check that the install works, and a first look at the output.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from IPython.core.interactiveshell import InteractiveShell

    size = int((argv or sys.argv[1:] or ["1024"])[0])
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
