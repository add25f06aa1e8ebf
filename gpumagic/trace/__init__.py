"""The Trace: the one data model every capture fills and every analysis and view reads.

:mod:`.model` holds the tables and their fixed columns; around it, what is derived from a Trace
alone and needs no capture, analysis or drawing: the ``nsys stats`` summaries (:mod:`.summaries`),
the analysis window (:mod:`.window`), unions of intervals (:mod:`.intervals`), what a capture
recorded (:mod:`.coverage`), NCCL collectives (:mod:`.collectives`), the ops that launched each
kernel (:mod:`.launching_ops`), the Chrome/Perfetto export (:mod:`.chrome_export`), the device
capabilities read from names (:mod:`.device_caps`), and where the GPU time goes in the user's code,
by module and by line, forward and backward (:mod:`.by_code`, :mod:`.code_frames`,
:mod:`.code_rows`).
"""

from .model import (
    COLUMNS,
    RANK_MARK,
    WINDOW_TEXT,
    TableSource,
    Trace,
    empty_frame,
    frame,
    id_column,
    nesting_depth,
    union_ns,
)

__all__ = [
    "COLUMNS",
    "RANK_MARK",
    "WINDOW_TEXT",
    "TableSource",
    "Trace",
    "empty_frame",
    "frame",
    "id_column",
    "nesting_depth",
    "union_ns",
]
