"""Saving results as they are measured, and ``--vs``: the part of the history the magics and the API
call.

Never in the user's way: a store that cannot be written (locked past the busy timeout, read-only,
full, not a database, newer than this gpumagic) costs one line on stderr, said once per store and
cause, and the result is shown as always. Only what the user asked for and cannot get is an error,
and it comes before the measurement: ``--vs`` with the history off, or a label or id the history
does not hold.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import GpuMagicError
from .provenance import provenance
from .rows import result_row
from .store import ENV, Store, is_kind, resolve_path

if TYPE_CHECKING:
    from ..timing.compare_result import Comparison
    from ..timing.result import TimingResult
    from ..timing.sweep_result import Sweep
    from .versus import Versus

__all__ = [
    "FAILURES",
    "HistoryOffError",
    "Outcome",
    "Recorder",
    "UnknownReferenceError",
    "failure_note",
    "store_for",
]

_STORES: dict[Path, Store] = {}
_SAID: set[tuple[str, str]] = set()


class _Saving(Protocol):
    """What saving fills in of any outcome (a timing's, a profile's, a memory run's): the ids saved
    and the lines for the output."""

    ids: list[int]
    lines: list[str]


class HistoryOffError(GpuMagicError, ValueError):
    """``--vs`` needs the history, and it is off."""

    template = (
        "--vs compares with the history, which is off ({why}): turn it on to save and "
        "compare results"
    )


class UnknownReferenceError(GpuMagicError, LookupError):
    """``--vs REF``: no result with that label or id."""

    template = "--vs {ref}: no result with that label or id in {path}{known}"
    #: what the history holds none of, and how one is saved: each kind of saved run says its own
    none_yet = "no labelled results yet: -l NAME"

    def extra_fields(self) -> dict[str, Any]:
        labels = self.__dict__.get("labels") or []
        return {"known": f" (labels: {', '.join(labels)})" if labels else f" ({self.none_yet})"}


#: What a store can fail with: SQLite's errors and the file system's, and a path that cannot name a
#: file (a NUL byte: ValueError); each is one note, never a failed cell.
FAILURES = (sqlite3.Error, OSError, ValueError)


def store_for(path: Path) -> Store:
    """One open store per path in this process (its connection kept between cells)."""
    text = os.path.expanduser(path)  # Path.expanduser raised RuntimeError for ~nosuchuser
    key = Path(text if text.startswith("~") else os.path.abspath(text))  # the store refuses ~
    if key not in _STORES:
        _STORES[key] = Store(key)
    return _STORES[key]


def failure_note(path: Path, exc: BaseException, doing: str = "not saved") -> str | None:
    """The line for a store that failed: in full the first time, then short for each further result
    of the same cause (a full disk lost 4 of 8 results with one note, for the first)."""
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if (str(path), reason) in _SAID:
        return f"gpumagic history: {doing} ({reason}, as said above)."
    _SAID.add((str(path), reason))
    return (
        f"gpumagic history: {doing} ({reason}: {path}); the result above is complete. "
        f"{ENV}=PATH moves the history, {ENV}=off turns it off."
    )


@dataclass
class Outcome:
    """What saving said: the ids of the saved rows, ``lines`` for the output (``--vs``), ``notes``
    for stderr."""

    ids: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    versus: Versus | None = None

    def print(self, quiet: bool = False) -> None:
        if not quiet:
            for line in self.lines:
                print(line)
        for note in self.notes:
            print(note, file=sys.stderr)


class Recorder:
    """Saves the results of one ``%gputime`` (or API call) to the history at ``setting``
    (``GpuMagics.history``; None: :data:`~gpumagic.history.store.ENV`, else the default place),
    under ``label``; with ``vs``, compares the new result with that reference (``last``, a label or
    a result id), looked up before the measurement."""

    #: Which rows ``--vs`` finds: timings here (a profile has no samples to compare); profiles
    #: (True) or a kind's name (``"memory"``) in a subclass.
    profiles: bool | str = False
    unknown: type[UnknownReferenceError] = UnknownReferenceError
    #: What ``--vs last`` found none of, as its line says it ("no earlier ... on this device").
    noun = "result of this statement"

    def __init__(
        self,
        setting: str | os.PathLike[str] | None = None,
        *,
        label: str | None = None,
        vs: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.path = resolve_path(setting, env)
        self.label = label or None
        self.vs = vs
        self.ref: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.failed: str | None = None  # why the history could not be read or written, if it failed
        if vs is None:
            return
        if self.path is None:
            why = "GpuMagics.history is empty" if setting is not None else f"{ENV} is off"
            raise HistoryOffError(why=why)
        if vs != "last":
            self.ref = self._lookup(vs)

    @property
    def store(self) -> Store | None:
        return store_for(self.path) if self.path is not None else None

    def _note(self, exc: BaseException, doing: str) -> None:
        store = self.store
        if store is not None:
            store.close()  # the next save opens it again: the user may have fixed it meanwhile
        if doing.startswith("--vs"):  # a failed lookup: --vs says it has no comparison, and why
            self.failed = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        note = failure_note(self.path, exc, doing) if self.path is not None else None
        if note:
            self.notes.append(note)

    def _noticed(self) -> None:
        """What the store noticed while saving (its file moved since it was opened), said once."""
        store = self.store
        while store is not None and store.notices:
            self.notes.append(f"gpumagic history: {store.notices.pop(0)} ({store.path}).")

    def _lookup(self, ref: str) -> dict[str, Any] | None:
        """A label first, then an id (``#N`` is always an id): a label that looks like an id (``-l
        1``) was unreachable, ``--vs 1`` finding result #1 of another statement."""
        store = self.store
        assert store is not None
        text = ref.strip()
        try:
            found = (
                None if text.startswith("#") else store.last_labelled(ref, profiles=self.profiles)
            )
            number = text[1:] if text.startswith("#") else text
            if found is None and number.isdigit():
                found = store.get(int(number))
                if found is not None and not is_kind(found.get("kind"), self.profiles):
                    # a profile's id given to %gputime --vs, or a timing's to %%gpuprofile --vs
                    found = None
            labels = store.labels(profiles=self.profiles) if found is None else []
        except FAILURES as exc:
            self._note(exc, f"--vs {ref} could not read the history")
            return None
        if found is None:
            raise self.unknown(ref=ref, path=store.path, labels=labels)
        return found

    # --- saving
    # ----------------------------------------------------------------------------------------------
    def record(self, result: TimingResult, statement: str, setup: str | None = None) -> Outcome:
        """Save one result (a ``TimingResult``); with ``vs``, the comparison line."""
        out = Outcome(notes=self.notes)
        if (
            self.path is None
            or not getattr(result, "samples", None)
            or getattr(result, "interrupted", False)
        ):
            return out
        row = result_row(result, statement, self._context(result), label=self.label, setup=setup)
        ref = self._saved_with_reference(row, out)
        if ref is not None:
            from .versus import versus  # numpy: loaded for --vs alone

            out.versus = versus(
                ref, row, ref_name=self.vs or "", precision=getattr(result, "precision", 3)
            )
            out.lines.append(str(out.versus))
        return out

    def record_many(
        self, result: Comparison | Sweep, statements: Mapping[str, str], setup: str | None = None
    ) -> Outcome:
        """Save each statement of a ``Comparison`` (or each point of a ``Sweep``), as rows of one
        run."""
        out = Outcome(notes=self.notes)
        if self.path is None:
            return out
        run = uuid.uuid4().hex[:16]
        kind = "sweep" if hasattr(result, "points") else "compare"
        rows = [
            result_row(
                r,
                statements.get(name, name),
                self._context(r),
                label=self.label,
                setup=setup,
                kind=kind,
                run=run,
                variant=name,
                params=params,
            )
            for name, r, params in _measured(result)
        ]
        out.ids = self._save(rows)
        return out

    def _last_saved(self, store: Store, row: Mapping[str, Any]) -> dict[str, Any] | None:
        """``--vs last``'s reference: the latest timing of the row's statement on its device (a
        subclass finds its own kind's)."""
        return store.last_of(row["stmt_key"], row["device_key"])

    def _saved_with_reference(self, row: dict[str, Any], out: _Saving) -> dict[str, Any] | None:
        """Save ``row`` (its id into ``out.ids`` and the row) and return ``--vs``'s saved
        reference: for ``last`` the one :meth:`_last_saved` finds, read before the save so that it
        is never the row itself; else the one looked up before the measurement. None without
        ``--vs`` or without a reference (``out.lines`` then says why). The one order of saving and
        finding the reference that timings, profiles and memory runs follow."""
        ref = self.ref
        store = self.store
        if self.vs == "last" and store is not None:
            try:
                ref = self._last_saved(store, row)
            except FAILURES as exc:
                self._note(exc, "--vs last could not read the history")
        out.ids = self._save([row])
        row["id"] = out.ids[0] if out.ids else None
        if self.vs is None or ref is not None:
            return ref
        if self.failed is not None:
            out.lines.append(
                f"vs {self.vs}: no comparison, the history could not be read ({self.failed})"
            )
        elif self.vs == "last":
            saved = "this one is saved" if out.ids else "this one is not saved either"
            out.lines.append(f"vs last: no earlier {self.noun} on this device; {saved}")
        return ref

    def _context(self, result: TimingResult) -> dict[str, Any]:
        return provenance(result.device, result.backend, getattr(result, "meta", None))

    def _save(self, rows: list[dict[str, Any]]) -> list[int]:
        """The ids of ``rows`` saved ([] where none could be: the store's failure is a note)."""
        store = self.store
        try:
            return store.save(rows) if rows and store is not None else []
        except FAILURES as exc:
            n = len(rows)
            self._note(exc, "not saved" if n == 1 else f"{n} results not saved")
            return []
        finally:
            self._noticed()


def _measured(result: Comparison | Sweep) -> Iterator[tuple[str, Any, Mapping[str, Any] | None]]:
    """Each statement of a ``Comparison`` (or point of a ``Sweep``) with samples to save: its name
    in the run, its result and a sweep point's values; an interrupted or failed one is left out."""
    if hasattr(result, "points"):  # a Sweep
        for p in result.points:
            if p.result is not None and p.status == "ok" and p.result.samples:
                yield p.label, p.result, p.params
    else:  # a Comparison
        for name, r in result.results.items():
            if r.samples and not r.interrupted:
                yield name, r, None
