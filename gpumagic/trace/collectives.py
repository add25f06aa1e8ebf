"""One collective across ranks: the NCCL kernels of several processes matched as the same
collective.

NCCL requires every rank to issue the same collectives in the same order, so the k-th kernel of one
collective's name in one process and the k-th of that name in another are the same collective. Both
the clock alignment of per-rank reports (``job/reports.py``: the end of the first collective
every rank ran) and the split of an NCCL kernel's time into waiting and moving data
(``analysis/rank_kernels.py``) match kernels this way.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["collective_instances"]


def collective_instances(
    pid: np.ndarray, code: np.ndarray, order: np.ndarray, nccl: np.ndarray
) -> pd.DataFrame:
    """The NCCL kernels among the rows (``nccl``: a boolean mask over them), one row each: ``row``
    (its index in the arrays), ``pid``, ``code`` (its name's code) and ``nth``, its place among that
    process's kernels of that name by ``order`` (their start or end times). Rows with equal ``(code,
    nth)`` are one collective."""
    rows = np.flatnonzero(nccl)
    frame = pd.DataFrame({"row": rows, "pid": pid[rows], "code": code[rows], "order": order[rows]})
    frame = frame.sort_values(["pid", "code", "order"], kind="stable")
    frame["nth"] = frame.groupby(["pid", "code"]).cumcount()
    return frame.drop(columns="order")
