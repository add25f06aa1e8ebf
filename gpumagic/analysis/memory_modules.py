"""Which module's forward made an allocation, read off its Python stack and the modules' names.

A stack holds frames of ``forward`` methods (``GPT.forward`` -> ``Block.forward`` ->
``Attention.forward`` -> ``Linear.forward``) but not which instance ran: the four ``Block``s of a
``ModuleList`` share one code. The names (:class:`~gpumagic.capture.memory.names.ModuleTree`) say
which modules have which ``forward``; the instance is then found, level by level from the outermost
frame, by three rules, each used only when the one before leaves a choice:

1. **the class**: the children (or, through containers without a forward of their own such as
   ``ModuleList``, the nearest descendants) of the module found so far whose ``forward`` is this
   frame's code (same file and function; the line inside its range where the file is the same, so a
   different PyTorch's line numbers still match its modules);
2. **the calling line**: of those, the ones whose attribute name the parent's calling line spells
   (``self.ln1(x)`` picks ``ln1`` over ``ln2``), read from the module's source file; for the
   outermost module, the one whose name the user's calling line spells (``net(images)`` picks
   ``net`` over another ``Sequential`` in the namespace), read from the file or the notebook cell;
3. **the order of calls**: consecutive allocations belong to one call of a forward until the line
   inside it goes backwards (a new call) or the code changes; when a parent's call made as many
   calls from one line as there are candidates, the ``i``-th call is the ``i``-th candidate in the
   module's order (``blocks.0`` ... ``blocks.3`` from one loop line).

Where a choice is left the allocation goes to the deepest module found for sure (``model.blocks``),
never to a guess.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..capture.memory.names import ModuleTree
    from ..capture.memory.snapshot import SnapshotData

__all__ = ["allocation_modules"]

_ATTR = re.compile(r"self\.([A-Za-z_][A-Za-z0-9_]*)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: (file tail, function, first line): one forward's code
Code = tuple[str, str, int]


def _tail(filename: str) -> str:
    return "/".join(filename.replace("\\", "/").rsplit("/", 2)[-2:])


class _Matcher:
    """Frame -> the codes of the modules' forwards it is, and code -> modules."""

    def __init__(self, tree: ModuleTree) -> None:
        self.tree = tree
        self._below: dict[tuple[str | None, Code], list[str]] = {}
        self._spelled: dict[tuple[str, int, tuple[str, ...]], list[str]] = {}
        self.by_key: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
        self.modules_of: dict[Code, list[str]] = {}
        self.code_of: dict[str, Code] = {}
        self.file_of: dict[Code, str] = {}
        for name, info in tree.modules.items():
            if not info.function:
                continue
            code = (_tail(info.filename), info.function, info.first)
            self.code_of[name] = code
            self.file_of[code] = info.filename
            if code not in self.modules_of:
                self.by_key.setdefault(code[:2], []).append((info.filename, info.first, info.last))
            self.modules_of.setdefault(code, []).append(name)
        self.local_files = {_tail(i.filename): i.filename for i in tree.modules.values()}
        self.parent: dict[str, str] = {
            c: name for name, info in tree.modules.items() for c in info.children
        }

    def code(self, frame: tuple[str, int, str]) -> Code | None:
        filename, line, function = frame
        options = self.by_key.get((_tail(filename), function))
        if not options:
            return None
        inside = [o for o in options if o[0] == filename and o[1] <= line <= o[2]]
        if not inside:
            inside = [o for o in options if o[1] <= line <= o[2]] or (
                options if len(options) == 1 else []
            )
        return (_tail(filename), function, inside[0][1]) if len(inside) == 1 else None

    def below(self, parent: str | None, code: Code) -> list[str]:
        """The nearest descendants of ``parent`` (the roots first where None) running ``code``."""
        key = (parent, code)
        if key not in self._below:
            self._below[key] = self._search(parent, code)
        return self._below[key]

    def _search(self, parent: str | None, code: Code) -> list[str]:
        mods = self.modules_of.get(code, [])
        if parent is None:
            roots = [m for m in mods if m in self.tree.roots]
            return roots or mods
        level = list(self.tree.modules[parent].children)
        while level:
            hit = [m for m in level if self.code_of.get(m) == code]
            if hit:
                return hit
            level = [c for m in level for c in self.tree.modules[m].children]
        return []

    def spelled(self, parent: str, line: int, options: list[str]) -> list[str]:
        """Of ``options``, those whose attribute under ``parent`` the calling line names."""
        key = (parent, line, tuple(options))
        if key not in self._spelled:
            self._spelled[key] = self._spell(parent, line, options)
        return self._spelled[key]

    def _spell(self, parent: str, line: int, options: list[str]) -> list[str]:
        code = self.code_of.get(parent)
        text = linecache.getline(self.file_of.get(code, ""), line) if code else ""
        attrs = set(_ATTR.findall(text))
        if not attrs:
            return options
        hit = [o for o in options if o[len(parent) + 1 :].split(".", 1)[0] in attrs]
        return hit or options


def _chains(
    snap: SnapshotData, m: _Matcher
) -> tuple[list[tuple[tuple[Code, int], ...]], list[tuple[str, int] | None]]:
    """Per distinct stack, its forward frames outermost first: (code, line in that frame); and
    the line that called the outermost (the innermost frame before it outside ``torch/``)."""
    # each distinct frame read once: stacks share their frames
    codes = [m.code(f) for f in snap.frames]
    user = [_user_python(f[0], f[1]) for f in snap.frames]
    out, callers = [], []
    for frames in snap.stacks:
        chain: list[tuple[Code, int]] = []
        caller = None
        for f in reversed(frames):
            code = codes[f]
            if code is not None:
                chain.append((code, snap.frames[f][1]))
            elif not chain and user[f]:
                caller = snap.frames[f][:2]
        out.append(tuple(chain))
        callers.append(caller)
    return out, callers


def _user_python(filename: str, line: int) -> bool:
    """A Python frame (not one of the C++ frames ``stacks="all"`` mixes in) outside PyTorch."""
    python = filename.endswith(".py") or (filename.startswith("<") and line > 0)
    return python and "/torch/" not in filename.replace("\\", "/")


def _called(m: _Matcher, caller: tuple[str, int] | None, roots: list[str]) -> list[str]:
    """Of the outermost modules ``roots``, those whose name the calling line spells (``net`` in
    ``loss = f(net(x))``); all of them where it spells none, or cannot be read. A file recorded
    elsewhere is read here where one of the modules' own files has its name."""
    text = ""
    if caller:
        filename, line = caller
        text = linecache.getline(filename, line) or linecache.getline(
            m.local_files.get(_tail(filename), ""), line
        )
    words = set(_WORD.findall(text))
    hit = [r for r in roots if r.split("[", 1)[0] in words]
    return hit or roots


def allocation_modules(snap: SnapshotData, allocs: np.ndarray, tree: ModuleTree) -> np.ndarray:
    """For each allocation row in ``allocs`` (the history's rows, in order): the dotted name of the
    module whose forward made it, "" where no module's forward is on its stack (see the module's
    docstring)."""
    out = np.full(len(allocs), "", dtype=object)
    if not len(tree) or not len(allocs):
        return out
    m = _Matcher(tree)
    chains, callers = _chains(snap, m)
    stacks = snap.stack[allocs].tolist()
    # pass 1: call identities. calls[i]: per level (call id, ordinal among its siblings, group)
    # a call's group: (its parent call's id, the parent's line, its code)
    calls: list[list[tuple[int, int, tuple[int, int, Code]]]] = [[] for _ in allocs]
    group_size: dict[tuple[int, int, Code], int] = {}
    prev: Sequence[tuple[Code, int]] = ()
    prev_ids: list[tuple[int, int, tuple[int, int, Code]]] = []
    prev_s, next_id = -1, 0
    for i, s in enumerate(stacks):
        if s < 0:
            continue  # another thread (the autograd engine's): no forward of this one
        chain = chains[s]
        if not chain:
            prev, prev_ids, prev_s = (), [], -1
            continue
        if s == prev_s:  # the same lines at every level: the same calls
            calls[i] = prev_ids
            continue
        ids: list[tuple[int, int, tuple[int, int, Code]]] = []
        same = True
        for j, (code, line) in enumerate(chain):
            if same and j < len(prev) and prev[j][0] == code and line >= prev[j][1]:
                ids.append(prev_ids[j])
                same = line == prev[j][1]
                continue
            same = False
            parent = (ids[j - 1][0], chain[j - 1][1]) if j else (-1, 0)
            group = (*parent, code)
            ordinal = group_size.get(group, 0)
            group_size[group] = ordinal + 1
            ids.append((next_id, ordinal, group))
            next_id += 1
        calls[i] = ids
        prev, prev_ids, prev_s = chain, ids, s
    # pass 2: names, level by level (an allocation in the same calls as the one before: its name)
    last_ids, last = None, ""
    for i, s in enumerate(stacks):
        if s < 0 or not calls[i]:
            continue
        if calls[i] is last_ids:
            out[i] = last
            continue
        last_ids = calls[i]
        chain = chains[s]
        found: str | None = None
        for (code, _), (_, ordinal, group), parent_line in zip(
            chain, calls[i], [0] + [ln for _, ln in chain[:-1]], strict=True
        ):
            options = m.below(found, code)
            if len(options) > 1:
                options = (
                    m.spelled(found, parent_line, options)
                    if found is not None
                    else _called(m, callers[s], options)
                )
            if len(options) > 1 and group_size[group] == len(options):
                options = [options[ordinal]]
            if len(options) != 1:
                break
            found = options[0]
        out[i] = last = found or ""
    return out
