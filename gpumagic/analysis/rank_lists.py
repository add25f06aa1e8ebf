"""How a per-rank finding names its ranks: which of the job's ranks it is about, out of how many,
and what the others showed. A list of the ranks that crossed a line, without the count of the job,
reads as the whole job (six ranks listed of eight is not "the ranks"); past :data:`LIST_RANKS` the
few most affected and "and N more"."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["LIST_RANKS", "SHOWN_AT_SCALE", "between", "listed", "on_ranks", "others_range"]

#: Past this many ranks a finding gives the extremes of a figure, not a figure per rank (it would
#: not be read).
LIST_RANKS = 8
#: Ranks shown by name when there are more than :data:`LIST_RANKS` to show.
SHOWN_AT_SCALE = 3


def on_ranks(hit: int, total: int, labels: Sequence[str] = ()) -> str:
    """ "on both ranks", "on all 8 ranks", "on 6 of 8 ranks"; "in 1 of 2 processes" where ``labels``
     are processes
    (not marked with their rank)."""
    ranks = not any(str(label).startswith("process") for label in labels)
    noun, on = ("ranks", "on") if ranks else ("processes", "in")
    if hit == total:
        return f"{on} both {noun}" if total == 2 else f"{on} all {total} {noun}"
    return f"{on} {hit} of {total} {noun}"


def listed(parts: Sequence[str], more: str = "") -> str:
    """``parts`` joined by "; ", the first :data:`SHOWN_AT_SCALE` and "and N more" (with ``more``, a
    figure's range over them) past :data:`LIST_RANKS`; ``parts`` in the order to show them (most
    affected first)."""
    if len(parts) <= LIST_RANKS:
        return "; ".join(parts)
    rest = len(parts) - SHOWN_AT_SCALE
    return "; ".join(parts[:SHOWN_AT_SCALE]) + f"; and {rest} more{f' ({more})' if more else ''}"


def between(low: str, high: str) -> str:
    """ "97% to 99%", or "99%" where both ends read the same."""
    return low if low == high else f"{low} to {high}"


def others_range(labels: Sequence[str], values: Sequence[str], word: str) -> str:
    """The ranks a finding is not about, with their figure: "the others: rank 6 busy 98%, rank 7
    busy 97%", or past :data:`LIST_RANKS` "the other 60 ranks busy 97% to 99%" (``values``
    formatted, sorted by value)."""
    if len(labels) <= LIST_RANKS:
        each = ", ".join(f"{label} {word} {v}" for label, v in zip(labels, values))
        return f"{'the other' if len(labels) == 1 else 'the others'}: {each}"
    return f"the other {len(labels)} ranks {word} {between(values[0], values[-1])}"
