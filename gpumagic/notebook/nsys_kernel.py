"""A Jupyter kernel that runs under Nsight Systems, so that ``%%gpuprofile --nsys`` profiles each
cell in place (``capture/nsys/inplace.py``) instead of shipping its names to a subprocess.

``python -m gpumagic kernel install --nsys`` writes a kernel spec (Jupyter's ``kernel.json``, found
by ``jupyter kernelspec list`` and offered in the launcher as "Python 3 (gpumagic, under Nsight
Systems)") whose ``argv`` is ``python -m gpumagic.notebook.nsys_kernel [--nsys PATH] [--trace T]
[--nsys-args "..."] -- -f {connection_file}``. That command (:func:`main`) replaces itself with
``nsys launch --session-new=gpumagic-kernel-PID -t T --cuda-graph-trace=node ... python -m
ipykernel_launcher -f {connection_file}``, the session's name and the nsys binary in the kernel's
environment. Jupyter's interrupt and restart reach the kernel as they reach any kernel (nsys
launch runs it in the kernel's own process group); when the kernel exits, nsys ends its session.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["DEFAULT_NAME", "install", "launch_command", "main"]

DEFAULT_NAME = "gpumagic-nsys"
DISPLAY_NAME = "Python 3 (gpumagic, under Nsight Systems)"


def launch_command(
    nsys: str, session: str, trace: str, nsys_args: Sequence[str], kernel_args: Sequence[str]
) -> list[str]:
    """``nsys launch`` of ipykernel in a session of its own."""
    from ..capture.options import NsysOptions, graph_trace_args

    graph = graph_trace_args(NsysOptions(trace=trace), list(nsys_args))
    return [
        nsys,
        "launch",
        f"--session-new={session}",
        "-t",
        trace,
        *graph,
        *nsys_args,
        sys.executable,
        "-m",
        "ipykernel_launcher",
        *kernel_args,
    ]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m gpumagic.notebook.nsys_kernel",
        description="Start ipykernel under `nsys launch` (Jupyter runs this from gpumagic's "
        "kernel spec).",
    )
    ap.add_argument("--nsys", default=None, help="the nsys binary (default: PATH)")
    ap.add_argument("--trace", default=None, help="what nsys traces (-t)")
    ap.add_argument("--nsys-args", default="", help="more nsys launch switches, one string")
    ap.add_argument("kernel_args", nargs=argparse.REMAINDER, help="-- then ipykernel's arguments")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Replace this process with ``nsys launch ... ipykernel_launcher``; 2 with a message where
    nsys cannot be found."""
    from ..capture.nsys.backend import find_nsys
    from ..capture.nsys.inplace import NSYS_ENV, SESSION_ENV, TRACE_ENV
    from ..capture.options import NsysOptions
    from ..errors import NsysNotFoundError

    args = _parser().parse_args(argv)
    kernel_args = [a for a in args.kernel_args if a != "--"] if args.kernel_args else []
    try:
        nsys = find_nsys(args.nsys)
    except NsysNotFoundError as exc:
        print(f"gpumagic's nsys kernel cannot start: {exc}", file=sys.stderr)
        return 2
    trace = args.trace or NsysOptions.trace
    session = f"gpumagic-kernel-{os.getpid()}"
    env = dict(os.environ, **{SESSION_ENV: session, NSYS_ENV: nsys, TRACE_ENV: trace})
    cmd = launch_command(nsys, session, trace, shlex.split(args.nsys_args), kernel_args)
    os.execvpe(cmd[0], cmd, env)
    return 0  # pragma: no cover - execvpe does not return


def kernel_json(
    nsys: str | None = None, trace: str | None = None, nsys_args: str = "", display_name: str = ""
) -> dict[str, Any]:
    """The kernel spec: Jupyter's ``kernel.json`` (argv with ``{connection_file}``, display name,
    language, and gpumagic's settings in ``metadata``)."""
    argv = [sys.executable, "-m", "gpumagic.notebook.nsys_kernel"]
    if nsys:
        argv += ["--nsys", nsys]
    if trace:
        argv += ["--trace", trace]
    if nsys_args:
        argv += ["--nsys-args", nsys_args]
    argv += ["--", "-f", "{connection_file}"]
    return {
        "argv": argv,
        "display_name": display_name or DISPLAY_NAME,
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": {"debugger": False, "gpumagic": {"nsys": nsys, "trace": trace}},
    }


def install(
    name: str = DEFAULT_NAME,
    *,
    user: bool = True,
    prefix: str | None = None,
    nsys: str | None = None,
    trace: str | None = None,
    nsys_args: str = "",
    display_name: str = "",
) -> str:
    """Install the spec with Jupyter's own installer (``jupyter_client.kernelspec``); returns the
    directory it went to."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError as exc:
        raise RuntimeError(
            "installing a kernel spec needs jupyter_client (it comes with ipykernel): "
            "pip install ipykernel"
        ) from exc
    source = tempfile.mkdtemp(prefix="gpumagic-kernelspec-")
    try:
        with open(os.path.join(source, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(kernel_json(nsys, trace, nsys_args, display_name), f, indent=1)
        return KernelSpecManager().install_kernel_spec(
            source, kernel_name=name, user=user and prefix is None, prefix=prefix
        )
    finally:
        shutil.rmtree(source, ignore_errors=True)


def install_main(argv: Sequence[str]) -> int:
    """``python -m gpumagic kernel install --nsys [...]``."""
    ap = argparse.ArgumentParser(
        prog="python -m gpumagic kernel install",
        description="Install a Jupyter kernel that runs under Nsight Systems: %%gpuprofile --nsys "
        "then profiles each cell in place, nothing shipped.",
    )
    ap.add_argument("--nsys", action="store_true", help="the kernel runs under nsys (required)")
    ap.add_argument(
        "--name", default=DEFAULT_NAME, help=f"the spec's name (default {DEFAULT_NAME})"
    )
    ap.add_argument("--display-name", default="", help=f"default: {DISPLAY_NAME!r}")
    ap.add_argument("--nsys-path", default=None, help="the nsys binary (default: PATH at start)")
    ap.add_argument("--trace", default=None, help="what nsys traces (-t; default cuda,nvtx)")
    ap.add_argument("--nsys-args", default="", help="more nsys launch switches, one string")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for this user (the default)")
    where.add_argument("--sys-prefix", action="store_true", help="into sys.prefix (a venv's)")
    where.add_argument("--prefix", default=None, help="into PREFIX/share/jupyter/kernels")
    args = ap.parse_args(argv)
    if not args.nsys:
        ap.error("say which kernel: --nsys (a kernel under Nsight Systems) is the one there is")
    prefix = sys.prefix if args.sys_prefix else args.prefix
    path = install(
        args.name,
        user=prefix is None,
        prefix=prefix,
        nsys=args.nsys_path,
        trace=args.trace,
        nsys_args=args.nsys_args,
        display_name=args.display_name,
    )
    print(f"Installed kernel spec {args.name!r} in {path}")
    print(f"Start it in JupyterLab's launcher as {args.display_name or DISPLAY_NAME!r}, or:")
    print(f"  jupyter console --kernel {args.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
