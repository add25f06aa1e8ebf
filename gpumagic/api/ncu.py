"""``gpumagic.load_ncu``: a saved Nsight Compute report, read by the capture layer
(``capture.ncu.backend.load_ncu_data``) and shown by the render layer
(``render.ncu_view.NcuReport``). It lives above both, as the magics do, so that neither layer
imports the other: a reader knows no HTML, a view reads no file."""

from __future__ import annotations

import os

from ..capture.ncu.backend import load_ncu_data
from ..render.ncu_view import NcuReport

__all__ = ["load_ncu"]


def load_ncu(path: str | os.PathLike[str], ncu: str | None = None) -> NcuReport:
    """Open a saved Nsight Compute report (``.ncu-rep``, read with ``ncu --import``; or a saved
    ``ncu --csv --page raw`` text, no ncu needed): an
    :class:`~gpumagic.render.ncu_view.NcuReport`."""
    return NcuReport(load_ncu_data(path, ncu))
