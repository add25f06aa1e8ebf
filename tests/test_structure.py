"""The layout's rules, checked on the code itself: no import cycles, one-way data flow, small
modules."""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).parents[1] / "gpumagic"
MAX_LINES = 460


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path) -> set[str]:
    """Every gpumagic module ``path`` imports, at module level or inside a function (a lazy import
    still ties)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("gpumagic")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("gpumagic"):
                found.add(target)
                found |= {f"{target}.{a.name}" for a in node.names}
    return found


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}
GRAPH = {m: {t for t in imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}


def test_no_import_cycles():
    # A package's face (__init__) may re-export its own submodules; a cycle among the others is a
    # real one.
    def edges(m: str) -> set[str]:
        return {
            t for t in GRAPH[m] if not (MODULES[m].name == "__init__.py" and t.startswith(m + "."))
        }

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in edges(m):
            if state.get(t) == 1:
                pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(t) :], t]))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


ONE_WAY = [
    ("gpumagic.capture", "gpumagic.render"),
    ("gpumagic.capture", "gpumagic.analysis"),
    ("gpumagic.render", "gpumagic.notebook.magics"),
    ("gpumagic.analysis", "gpumagic.render"),
    ("gpumagic.kernels", "gpumagic.trace"),
    ("gpumagic.timing", "gpumagic.notebook.magics"),
    ("gpumagic.timing", "gpumagic.capture"),
    (
        "gpumagic.capture",
        "gpumagic.timing",
    ),  # both use gpumagic.gpu_activity.profiler_start, below them
    (
        "gpumagic.render",
        "gpumagic.timing",
    ),  # timing's results draw with render, never the other way
    (
        "gpumagic.render",
        "gpumagic.capture",
    ),  # views read no file: the readers are capture's (gpumagic.load_ncu joins)
    (
        "gpumagic.device_peaks",
        "gpumagic.render",
    ),  # peaks are tables and arithmetic; their roofline is render's
    ("gpumagic.device_peaks", "gpumagic.capture"),
]


@pytest.mark.parametrize("layer, forbidden", ONE_WAY)
def test_data_flows_one_way(layer, forbidden):
    bad = {
        m: t
        for m, ts in GRAPH.items()
        if m.startswith(layer)
        for t in ts
        if t.startswith(forbidden)
    }
    assert not bad, bad


def test_the_core_never_imports_ipython_and_no_module_imports_both_torch_and_bokeh():
    for m, p in MODULES.items():
        text = p.read_text(encoding="utf-8")
        names = {
            (a.name if isinstance(n, ast.Import) else (n.module or "")).split(".")[0]
            for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in (n.names if isinstance(n, ast.Import) else [n])
        }
        assert not ({"torch", "bokeh"} <= names), m
        if m not in ("gpumagic.notebook.magics", "gpumagic", "gpumagic.__main__"):  # the front ends
            assert "IPython" not in names, m


def test_modules_stay_small():
    big = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not big, big


def test_notebook_advice_lives_in_the_magics_layer_only():
    for m, p in MODULES.items():
        if m != "gpumagic.notebook.magics":
            assert "%config" not in p.read_text(encoding="utf-8").replace("``%config", ""), m


def test_moved_names_stay_where_users_import_them():
    import gpumagic
    from gpumagic.api.ncu import load_ncu
    from gpumagic.capture import chrome_trace
    from gpumagic.render.calls_roofline import roofline
    from gpumagic.render.report import ProfileReport
    from gpumagic.trace.chrome_export import write_chrome_trace

    assert gpumagic.load_ncu is load_ncu and gpumagic.roofline is roofline
    assert (
        chrome_trace.write_chrome_trace is write_chrome_trace
    )  # the reader's module still offers the writer
    assert callable(ProfileReport.to_chrome_trace)
