"""The launcher of ``--nproc``'s ranks: this file run by path (:func:`command`), ``N WORKDIR``.

It does what ``torch.distributed.run --standalone`` did for gpumagic, without importing torch: on
an H100 pair torchrun's own start (its Python, its torch import, its rendezvous) took 2.5 s before
a rank's first line ran, every ``--nproc`` cell. Here the ranks start at once, each
``python -m gpumagic.capture.child.runner WORKDIR`` with the variables that ``init_process_group``'s
default ``env://`` reads and a local rank needs (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` of a free port on this host,
``OMP_NUM_THREADS=1`` unless set); torchrun's elastic ones (``TORCHELASTIC_*``, ``ROLE_*``,
``GROUP_WORLD_SIZE``) are not set. As with torchrun, the first rank that fails (it exits, or writes
its error file: a failing rank's exit can itself wait on NCCL) takes the others down (SIGTERM, then
SIGKILL after :data:`GRACE` seconds: a rank waiting in a collective for the failed one would wait
for ever) and its exit status is the launcher's. The ranks stay in the launcher's process group, so
a stop that reaches nsys' group reaches them too; each carries WORKDIR on its command line as
before (``nsys_ranks.stop_run_processes``).

It is run as a file, not as ``-m gpumagic.capture.nsys.rank_launch``: that would import the gpumagic
package first (pandas, numpy: 0.4 s on a laptop core) for a launcher that needs the standard library
alone. For the same reason it looks for torch without importing it, so that a Python without torch
is named as such before any rank starts.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

#: Seconds the other ranks get to end after the first failure, before SIGKILL.
GRACE = 5.0
#: Seconds between looks at the ranks.
POLL = 0.02


def command(python: str, nproc: int, workdir: str) -> list[str]:
    """The command line that launches ``nproc`` ranks in ``python``: this file, run by path
    (``runpy``, so that its folder is not put first on the ranks' import path)."""
    return [python, "-c", RUN_BY_PATH, os.path.abspath(__file__), str(nproc), workdir]


#: ``python -c`` code that runs the file its first argument names as ``__main__``, the rest its
#: arguments.
RUN_BY_PATH = (
    "import runpy, sys; sys.argv[:] = sys.argv[1:]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def free_port() -> int:
    """A TCP port free on this host now (the kernel's pick): the rendezvous of this run."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, nproc: int, port: int, base: dict[str, str]) -> dict[str, str]:
    """The environment of rank ``rank`` of ``nproc`` on this host."""
    env = dict(base)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(nproc),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default with several ranks
    return env


def launch(nproc: int, workdir: str, python: str = sys.executable) -> int:
    """Run the ranks to their end; the first failing rank's exit status (a signal's as 128 + its
    number), else 0."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [python, "-m", "gpumagic.capture.child.runner", workdir],
            env=rank_env(rank, nproc, port, dict(os.environ)),
        )
        for rank in range(nproc)
    ]
    failed = 0
    looks = 0
    try:
        while True:
            codes = [p.poll() for p in procs]  # every rank, each look
            if all(c is not None for c in codes):
                break
            bad = next((c for c in codes if c not in (None, 0)), None)
            looks += 1
            if bad is None and looks % 10 == 0 and _reported(workdir):
                bad = 3  # a rank said it failed and has not ended yet
            if bad is not None:
                failed = bad
                break
            time.sleep(POLL)
    finally:
        _stop_all(procs)
    if not failed:
        failed = next((p.returncode for p in procs if p.returncode), 0)
    return 128 - failed if failed < 0 else failed


def _reported(workdir: str) -> bool:
    """Whether a rank wrote its failure (``error-rankR.txt``, ``gpus-rankR.txt``) to ``workdir``."""
    try:
        names = os.listdir(workdir)
    except OSError:
        return False
    return any(n.startswith(("error-rank", "gpus-rank")) and n.endswith(".txt") for n in names)


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to the ranks still running, SIGKILL to those left after :data:`GRACE` seconds."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: list[str]) -> int:
    nproc, workdir = int(argv[0]), argv[1]
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # found, not imported (seconds)
        print(f"gpumagic ranks: No module named 'torch' in {sys.executable}", flush=True)
        return 1
    # SIGTERM or SIGINT to the launcher (nsys stopping its group): the ranks go with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    return launch(nproc, workdir)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
