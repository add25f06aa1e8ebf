"""The names a user has for the GPU memory: which storage is which module's parameter, gradient or
buffer, which optimizer's state, which tensor bound to a name.

The allocator knows blocks by address only; the names live in the user's namespace. This walks the
namespace (values directly in it, and one level down in a list, tuple or dict) and gives two plain
tables, with no torch objects left in them, so that the analysis can be fed the same tables from a
file (a fixture recorded on a GPU) as from a live process:

- :class:`NameTable`: storage address (``untyped_storage().data_ptr()``, which is the allocator
  block's address) -> ``name``, ``category``, ``module``, ``bytes`` (the storage's), one row per
  storage. A storage reached twice (a parameter also bound to a name, a view of an input) is named
  once, by :data:`PRECEDENCE`: a module's parameters, then their gradients, then buffers, then
  optimizer state, then other tensors; within one kind, the first name met in the namespace's order.
  Modules that are submodules of another module in the namespace are named from the outer one
  (``model.blocks.2.mlp.0.weight``, not ``blk.mlp.0.weight``); a ``torch.compile``d module is
  named as the module it compiles (``compiled = torch.compile(model)``: one model, named once).
- :class:`ModuleTree`: every module's dotted name, its class's ``forward`` code (file, function,
  first and last line) and its children in order, so that the analysis can read which module's
  forward was running from an allocation's Python stack.

Names skipped: those starting with ``_`` (IPython's ``_``, ``_1``, ``_i3``...), ``In`` and
``Out``.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pandas as pd

from ...edges import TorchValue, UserValue

__all__ = [
    "PRECEDENCE",
    "MemoryNames",
    "ModuleInfo",
    "ModuleTree",
    "NameTable",
    "module_tree",
    "name_storages",
    "owner_module",
]

#: Which name a storage reached twice keeps: the first kind in this order (the category the
#: memory view uses for it in brackets: buffers count as parameters).
PRECEDENCE = ("parameter", "gradient", "buffer", "optimizer state", "input")
_CATEGORY = {
    "parameter": "parameters",
    "gradient": "gradients",
    "buffer": "parameters",
    "optimizer state": "optimizer state",
    "input": "inputs",
}
#: Values looked at inside one list, tuple or dict of the namespace.
CONTAINER_ITEMS = 1000
_SKIP = {"In", "Out", "exit", "quit", "get_ipython"}
_ITEMSIZE = {
    f"torch.{name}": size
    for size, names in (
        (8, ("float64", "int64", "complex64")),
        (4, ("float32", "int32")),
        (2, ("float16", "bfloat16", "int16")),
        (1, ("uint8", "int8", "bool", "float8_e4m3fn", "float8_e5m2")),
    )
    for name in names
}


@dataclass
class NameTable:
    """Storage address -> name, for one moment (the recording's start or end). ``rows``: a frame
    with ``addr``, ``name``, ``kind`` (one of :data:`PRECEDENCE`), ``category`` (the memory view's
    category), ``module`` (the dotted module that holds it: a parameter's, a gradient's and an
    optimizer state's module; the name itself for other tensors), ``bytes`` (the storage's) and
    ``itemsize`` (bytes per element of the tensor that named it; 0 where unknown)."""

    rows: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(
            columns=["addr", "name", "kind", "category", "module", "bytes", "itemsize"]
        )
    )

    def __len__(self) -> int:
        return len(self.rows)

    def lookup(self) -> dict[int, tuple[str, str, str]]:
        """addr -> (name, category, module)."""
        r = self.rows
        return dict(
            zip(
                r["addr"].astype("int64").tolist(),
                zip(r["name"], r["category"], r["module"], strict=True),
                strict=True,
            )
        )

    def to_dataframe(self) -> pd.DataFrame:
        return self.rows.copy()

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> NameTable:
        """A table from plain records (``addr`` or ``data_ptr``, ``name``, ``kind`` or
        ``category`` in :data:`PRECEDENCE`'s words, ``bytes`` or ``storage_bytes``, optional
        ``module``, ``itemsize`` or a ``dtype`` such as "torch.float32"), e.g. a names file
        written on a GPU machine; the precedence applies as in a live walk."""
        found: dict[int, tuple[int, int, str, str, str, int, int]] = {}
        for order, rec in enumerate(records):
            kind = str(rec.get("kind", rec.get("category", "")))
            if kind not in _CATEGORY:
                raise ValueError(
                    f"a name record's kind is {kind!r}; use one of {', '.join(PRECEDENCE)}"
                )
            addr = int(rec.get("addr", rec.get("data_ptr", 0)))
            nbytes = int(rec.get("storage_bytes", rec.get("bytes", 0)))
            name = str(rec["name"])
            module = str(rec.get("module") or owner_module(name, kind))
            itemsize = int(rec.get("itemsize") or _ITEMSIZE.get(str(rec.get("dtype", "")), 0))
            key = (PRECEDENCE.index(kind), order)
            if addr and (addr not in found or key < found[addr][:2]):
                found[addr] = (*key, name, kind, module, nbytes, itemsize)
        return _table((a, *row[2:]) for a, row in found.items())


def _table(rows: Iterable[tuple[int, str, str, str, int, int]]) -> NameTable:
    rows = list(rows)
    df = pd.DataFrame(rows, columns=["addr", "name", "kind", "module", "bytes", "itemsize"])
    df.insert(3, "category", df["kind"].map(_CATEGORY))
    return NameTable(df.astype({"addr": "int64", "bytes": "int64", "itemsize": "int64"}))


def owner_module(name: str, kind: str) -> str:
    """The module a named tensor belongs to: ``model.blocks.0.mlp.0`` for its ``.weight``, its
    ``.weight.grad`` and ``opt.state[model.blocks.0.mlp.0.weight]['exp_avg']``; the name itself
    for other tensors."""
    if kind == "optimizer state" and ".state[" in name:
        optimizer, inner = name.split(".state[", 1)
        inner = inner.rsplit("][", 1)[0]
        if inner.startswith("param_groups["):  # a parameter no module in the namespace holds
            return optimizer
        name, kind = inner, "parameter"
    if kind == "gradient":
        name, kind = name.removesuffix(".grad"), "parameter"
    if kind in ("parameter", "buffer") and "." in name:
        return name.rsplit(".", 1)[0]
    return name


def _values(namespace: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(name, value) for the namespace's values and one level inside its lists, tuples and
    dicts."""
    items = [
        (k, v)
        for k, v in list(namespace.items())
        if isinstance(k, str) and not k.startswith("_") and k not in _SKIP
    ]
    for k, v in items:
        yield k, v
    for k, v in items:
        if isinstance(v, (list, tuple)):
            for i, x in enumerate(v[:CONTAINER_ITEMS]):
                yield f"{k}[{i}]", x
        elif isinstance(v, dict):
            for i, (kk, x) in enumerate(v.items()):
                if i >= CONTAINER_ITEMS:
                    break
                yield f"{k}[{kk!r}]", x


def _modules_and_optimizers(
    torch: ModuleType, namespace: Mapping[str, Any]
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The namespace's outermost modules (a submodule of another one left out), its optimizers,
    and its other values."""
    module_cls, optim_cls = torch.nn.Module, torch.optim.Optimizer
    modules, optimizers, others, seen = [], [], [], set()
    for name, v in _values(namespace):
        if isinstance(v, module_cls) and type(v).__name__ == "OptimizedModule":
            v = getattr(v, "_orig_mod", v)  # torch.compile's wrapper: the model it compiles
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, module_cls):
            modules.append((name, v))
        elif isinstance(v, optim_cls):
            optimizers.append((name, v))
        else:
            others.append((name, v))
    inner: set[int] = set()
    for _, m in modules:
        inner |= {id(s) for s in m.modules() if s is not m}
    return [(n, m) for n, m in modules if id(m) not in inner], optimizers, others


def _torch() -> ModuleType:
    found = sys.modules.get("torch")
    if found is not None:
        return found
    import torch

    return torch


def _tied(others: list[str]) -> str:
    """The other names of a tied parameter, as a name's suffix (a head tied to its embedding is
    both ``llm.tok.weight`` and ``llm.head.weight``)."""
    return f" (tied: {', '.join(others)})" if others else ""


def name_storages(
    namespace: Mapping[str, Any], device: TorchValue | str | int | None = None
) -> NameTable:
    """The :class:`NameTable` of the tensors ``namespace`` reaches (see the module's docstring).
    ``device``: keep only storages on it (a ``torch.device``, "cuda:0", an index for a CUDA
    device); None keeps every device (the CPU too, which is how this is tested)."""
    torch = _torch()
    want = (
        None
        if device is None
        else torch.device(device if not isinstance(device, int) else f"cuda:{device}")
    )
    tensor_cls = torch.Tensor
    found: dict[int, tuple[str, str, str, int, int]] = {}

    def add(t: UserValue, name: str, kind: str, module: str) -> None:
        if not isinstance(t, tensor_cls) or t.is_meta:
            return
        if want is not None and (
            t.device.type != want.type or (want.index is not None and t.device.index != want.index)
        ):
            return
        try:
            s = t.untyped_storage()
            addr = s.data_ptr()
        except (RuntimeError, NotImplementedError):  # sparse, nested, a tensor subclass
            return
        if addr and addr not in found:
            found[addr] = (name, kind, module, int(s.nbytes()), int(t.element_size()))

    modules, optimizers, others = _modules_and_optimizers(torch, namespace)
    param_names: dict[int, str] = {}
    also: dict[int, list[str]] = defaultdict(list)  # a tied parameter's other names
    for root, m in modules:
        for n, p in m.named_parameters(remove_duplicate=False):
            full = f"{root}.{n}"
            first = param_names.setdefault(id(p), full)
            if first != full and full not in also[id(p)]:
                also[id(p)].append(full)
    for _, m in modules:
        for p in m.parameters():
            full = param_names[id(p)]
            add(p, full + _tied(also[id(p)]), "parameter", full.rsplit(".", 1)[0])
    for _, m in modules:
        for p in m.parameters():
            if p.grad is not None:
                full = param_names[id(p)]
                add(p.grad, f"{full}.grad{_tied(also[id(p)])}", "gradient", full.rsplit(".", 1)[0])
    for root, m in modules:
        for n, b in m.named_buffers():
            full = f"{root}.{n}"
            add(b, full, "buffer", full.rsplit(".", 1)[0])
    for oname, opt in optimizers:
        index = {
            id(p): f"param_groups[{g}]['params'][{i}]"
            for g, group in enumerate(opt.param_groups)
            for i, p in enumerate(group["params"])
        }
        for p, state in opt.state.items():
            pname = param_names.get(id(p)) or index.get(id(p), "?")
            module = pname.rsplit(".", 1)[0] if id(p) in param_names else oname
            for key, value in state.items() if isinstance(state, Mapping) else ():
                add(value, f"{oname}.state[{pname}][{key!r}]", "optimizer state", module)
    for name, v in others:
        add(v, name, "input", name)
    return _table((a, *row) for a, row in found.items())


@dataclass(frozen=True)
class ModuleInfo:
    """One module: its class name, its ``forward``'s code (``filename``, ``function``, ``first``
    and ``last`` line; "" and 0 where it has none in Python) and its children's dotted names in
    order."""

    cls: str
    filename: str
    function: str
    first: int
    last: int
    children: tuple[str, ...] = ()


@dataclass
class ModuleTree:
    """Every module the namespace reaches, by dotted name (``model``, ``model.blocks.0``...):
    ``modules`` maps name -> :class:`ModuleInfo`; ``roots`` are the outermost names."""

    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    roots: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.modules)


def _forward_code(cls: type) -> tuple[str, str, int, int]:
    fn = getattr(cls, "forward", None)
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return "", "", 0, 0
    lines = [ln for _, _, ln in code.co_lines() if ln is not None] or [code.co_firstlineno]
    return code.co_filename, code.co_name, code.co_firstlineno, max(lines)


def module_tree(namespace: Mapping[str, Any]) -> ModuleTree:
    """The :class:`ModuleTree` of the namespace's outermost modules."""
    torch = _torch()
    modules, _, _ = _modules_and_optimizers(torch, namespace)
    codes: dict[type, tuple[str, str, int, int]] = {}
    out: dict[str, ModuleInfo] = {}
    for root, m in modules:
        for n, sub in m.named_modules(remove_duplicate=False):
            full = f"{root}.{n}" if n else root
            if full in out:
                continue
            cls = type(sub)
            if cls not in codes:
                codes[cls] = _forward_code(cls)
            children = tuple(f"{full}.{c}" for c, _ in sub.named_children())
            out[full] = ModuleInfo(cls.__name__, *codes[cls], children=children)
    return ModuleTree(out, tuple(r for r, _ in modules))


@dataclass
class MemoryNames:
    """What the names said around one recording: ``start`` (the storages named when it began:
    they name the blocks allocated before it), ``end`` (when it ended: they name the blocks the
    recording made that are still alive, new gradients and optimizer state) and ``modules``."""

    start: NameTable = field(default_factory=NameTable)
    end: NameTable = field(default_factory=NameTable)
    modules: ModuleTree = field(default_factory=ModuleTree)
