"""Which names a cell needs, and how they travel to the ``--nsys`` subprocess.

A notebook cell's variables live in the kernel, not in a script nsys can launch. The free names the
cell reads (found in its AST) are taken from the user namespace and written to a private directory:
tensors and modules with ``torch.save`` (a CUDA tensor comes back on its device, or with ``--nproc``
on its rank's device), imported modules by name (re-imported in the child), other values with
pickle. What cannot travel (a function or class defined in the notebook, an open file, a generator)
is listed by name before anything runs, with what to do instead.
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import pickle
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ShippingError

__all__ = ["Manifest", "ShippingError", "free_names", "onto", "restore", "ship"]


class _FirstUse(ast.NodeVisitor):
    """Walks code in evaluation order (a right-hand side before its targets) and records, per name,
    whether it is first read or first bound."""

    def __init__(self) -> None:
        self.needed: list[str] = []
        self.bound: set[str] = set()

    def _load(self, name: str) -> None:
        if name not in self.bound and name not in self.needed:
            self.needed.append(name)

    def _bind(self, name: str) -> None:
        self.bound.add(name)

    def visit_Name(self, node: ast.Name) -> None:
        (self._load if isinstance(node.ctx, ast.Load) else self._bind)(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.visit(t)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self._load(node.target.id)  # x += 1 reads x first
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for n in node.body + node.orelse:
            self.visit(n)

    visit_AsyncFor = visit_For

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for cond in node.ifs:
            self.visit(cond)

    def _visit_comp(self, node: ast.AST) -> None:
        for gen in node.generators:  # type: ignore[attr-defined]
            self.visit(gen)
        for field_name in ("elt", "key", "value"):
            if hasattr(node, field_name):
                self.visit(getattr(node, field_name))

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comp

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self._bind(node.name)
        inner = _FirstUse()
        inner.bound = set(self.bound) | {
            a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)
        }
        for n in node.body:
            inner.visit(n)
        for name in inner.needed:
            self._load(name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        inner = _FirstUse()
        inner.bound = set(self.bound) | {
            a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)
        }
        inner.visit(node.body)
        for name in inner.needed:
            self._load(name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for b in node.bases + node.decorator_list:
            self.visit(b)
        self._bind(node.name)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for a in node.names:
            self._bind((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import


def free_names(source: str) -> list[str]:
    """Names the code reads before binding them (its inputs from the namespace), in order; builtins
    excluded."""
    v = _FirstUse()
    v.visit(ast.parse(source))
    return [n for n in v.needed if not hasattr(builtins, n)]


@dataclass
class Manifest:
    tensors: list[str] = field(default_factory=list)  # in tensors.pt
    modules: dict[str, str] = field(default_factory=dict)  # alias -> module name
    pickled: list[str] = field(default_factory=list)  # in values.pkl


def _is_notebook_defined(value: Any) -> bool:
    mod = getattr(value, "__module__", None) or getattr(type(value), "__module__", None)
    return mod in ("__main__", "builtins") and isinstance(value, (types.FunctionType, type))


def ship(
    names: list[str],
    namespace: Mapping[str, Any],
    directory: str,
    checked: Callable[[], None] | None = None,
) -> Manifest:
    """Write the values of ``names`` found in ``namespace`` to ``directory``; raise ShippingError
    listing every name that cannot travel (nothing is run then). ``checked()``, if given, is
    called once every name is known to travel, before the writing (a child may start meanwhile)."""
    manifest = Manifest()
    tensors: dict[str, Any] = {}
    values: dict[str, Any] = {}
    problems: dict[str, str] = {}
    try:
        import torch
    except ImportError:  # pragma: no cover - the nsys path needs torch anyway
        torch = None  # type: ignore[assignment]
    for name in names:
        if name not in namespace:
            continue  # assigned in the cell, or an error the cell itself will raise
        value = namespace[name]
        if name in ("_", "__", "___", "In", "Out", "get_ipython", "exit", "quit"):
            continue
        if isinstance(value, types.ModuleType):
            manifest.modules[name] = value.__name__
            continue
        if torch is not None and isinstance(value, (torch.Tensor, torch.nn.Module)):
            if isinstance(value, torch.nn.Module) and type(value).__module__ == "__main__":
                problems[name] = f"a {type(value).__name__} whose class is defined in the notebook"
                continue
            tensors[name] = value
            continue
        if _is_notebook_defined(value):
            problems[name] = (
                f"a {'class' if isinstance(value, type) else 'function'} defined in the notebook"
            )
            continue
        try:
            pickle.dumps(value)
        except Exception as exc:  # noqa: BLE001 - any pickling failure means: cannot ship
            problems[name] = (
                f"{type(value).__name__} cannot be pickled ({type(exc).__name__}: {exc})"[:200]
            )
            continue
        values[name] = value
    if problems:
        raise ShippingError(problems)
    if checked is not None:
        checked()
    if tensors:
        torch.save(tensors, os.path.join(directory, "tensors.pt"))
        manifest.tensors = list(tensors)
    if values:
        with open(os.path.join(directory, "values.pkl"), "wb") as f:
            pickle.dump(values, f)
        manifest.pickled = list(values)
    with open(os.path.join(directory, "manifest.pkl"), "wb") as f:
        pickle.dump(
            {"tensors": manifest.tensors, "modules": manifest.modules, "pickled": manifest.pickled},
            f,
        )
    return manifest


def restore(directory: str, device: Any = None) -> dict[str, Any]:
    """The namespace ``ship`` wrote (used by the runner in the subprocess). With a CUDA ``device``
    (a rank's, under ``--nproc``) every CUDA tensor, a module's parameters included, comes back on
    that device whatever device it was saved from: each rank gets its own copy on its own GPU; CPU
    tensors stay on the CPU."""
    import importlib

    with open(os.path.join(directory, "manifest.pkl"), "rb") as f:
        m = pickle.load(f)
    ns: dict[str, Any] = {}
    for alias, modname in m["modules"].items():
        ns[alias] = importlib.import_module(modname)
    if m["pickled"]:
        with open(os.path.join(directory, "values.pkl"), "rb") as f:
            ns.update(pickle.load(f))
    if m["tensors"]:
        import torch

        with open(os.path.join(directory, "tensors.pt"), "rb") as f:
            ns.update(
                torch.load(io.BytesIO(f.read()), weights_only=False, map_location=onto(device))
            )
    return ns


def onto(device: Any) -> Any:
    """``torch.load``'s ``map_location`` that puts every CUDA storage on ``device`` (None: where it
    was saved)."""
    if device is None or getattr(device, "type", None) != "cuda":
        return None
    index = device.index if device.index is not None else 0
    return lambda storage, location: (
        storage.cuda(index) if str(location).startswith("cuda") else storage
    )
