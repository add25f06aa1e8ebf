"""Which names a cell reads before it binds them: its inputs from the notebook's namespace.

A tool's subprocess (``--nsys``, ``--ncu``, ``--nproc``) runs the cell in a namespace of its own,
so what the cell needs from the notebook must be found first; this walks the cell's AST in
evaluation order (a right-hand side before its targets, a loop's iterable before its body) so that
``x = x + 1`` needs ``x`` while ``y = 1; y + 1`` does not need ``y``.
"""

from __future__ import annotations

import ast
import builtins

__all__ = ["free_names"]


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

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
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

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
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
