"""The layout's rules, checked on the code itself: no import cycles, one-way data flow, small
modules."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

PKG = pathlib.Path(__file__).parents[1] / "gpumagic"
#: A guard against a module that does several jobs, not a target: split a module by meaning, never
#: by packing lines to stay under it.
MAX_LINES = 560


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


#: The layers, bottom first: a module imports only from its own package or from a lower layer, so
#: data flows one way (capture -> Trace -> analysis -> render; timing -> result -> history) and the
#: folders read as the architecture. Packages in one layer do not import each other.
LAYERS = [
    {"errors", "units", "version", "_moved", "kernels"},  # the ground: no gpumagic import above it
    {"trace", "gpu_activity", "device_peaks"},  # the data model; GPU activity records; datasheets
    {"capture"},  # readers and backends: files and processes -> Trace
    {"analysis"},  # figures and findings from a Trace
    {"render"},  # HTML and Bokeh: no file is read, nothing is measured
    {"timing"},  # %gputime's engine; its results draw with render
    {"history", "job"},  # the store of results; a job read rank by rank
    {"api"},  # the script functions: capture -> analysis -> render (+ history)
    {"notebook", "cli"},  # the front ends: IPython; the command line
    {"(root)", "__main__"},  # the package's face and python -m gpumagic
]
RANK = {package: n for n, layer in enumerate(LAYERS) for package in layer}
#: What may sit loose at the package root: the error family, units, the version and the old paths.
ROOT_MODULES = {"__init__", "__main__", "_moved", "errors", "units", "version"}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def test_every_package_has_a_layer_and_the_root_holds_no_loose_layers():
    assert {package_of(m) for m in MODULES} <= set(RANK), set(map(package_of, MODULES)) - set(RANK)
    loose = {p.stem for p in PKG.glob("*.py")} - ROOT_MODULES
    assert not loose, f"modules at the package root that belong in a layer: {loose}"


def test_imports_run_down_the_layers_only():
    up = {
        (m, t)
        for m, targets in GRAPH.items()
        for t in targets
        if package_of(m) != package_of(t) and RANK[package_of(m)] <= RANK[package_of(t)]
    }
    assert not up, f"imports sideways or up a layer: {sorted(up)}"


ONE_WAY = [
    # the history knows results, not how they were measured or compared: no capture reader, no diff
    ("gpumagic.history", "gpumagic.capture"),
    ("gpumagic.history", "gpumagic.api"),
    ("gpumagic.trace", "gpumagic.capture"),
    ("gpumagic.kernels", "gpumagic.trace"),
    ("gpumagic.render", "gpumagic.capture"),  # views read no file (gpumagic.load_ncu joins)
    ("gpumagic.device_peaks", "gpumagic.render"),  # peaks are tables; their roofline is render's
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


def test_the_layer_rule_can_fail():
    # A check that cannot fail proves nothing: an import from trace up to capture is caught.
    graph = dict(GRAPH, **{"gpumagic.trace.model": {"gpumagic.capture.reports"}})
    up = [
        (m, t)
        for m, ts in graph.items()
        for t in ts
        if package_of(m) != package_of(t) and RANK[package_of(m)] <= RANK[package_of(t)]
    ]
    assert up == [("gpumagic.trace.model", "gpumagic.capture.reports")]


def test_every_public_name_loads_in_a_fresh_process():
    # In a fresh interpreter nothing else has imported the subpackages that the lazy names live in
    # (an import elsewhere in the suite would hide a name that only loads by accident).
    code = (
        "import gpumagic, sys\n"
        "for name in gpumagic.__all__: getattr(gpumagic, name)\n"
        "assert callable(gpumagic.history) and 'IPython' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_old_import_paths_still_work_for_a_release_and_say_where_to_go():
    code = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        "    import gpumagic.cupti_direct\n"
        "except DeprecationWarning as w:\n"
        "    print(w)\n"
        "warnings.simplefilter('ignore')\n"
        "import gpumagic.records as old, gpumagic.trace.coverage as new\n"
        "assert old is new\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "moved to gpumagic.gpu_activity.cupti_direct" in done.stdout


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
        if package_of(m) not in ("notebook", "(root)", "__main__"):  # the front ends
            assert "IPython" not in names, m


def test_modules_stay_small():
    big = {
        m: n
        for m, p in MODULES.items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not big, big


def test_notebook_advice_lives_in_the_notebook_layer_only():
    for m, p in MODULES.items():
        if package_of(m) != "notebook":
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
