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
    {"errors", "units", "version", "kernels", "edges"},  # the ground: no gpumagic import above it
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
#: What may sit loose at the package root: the error family, units, the version and the names of
#: third-party values (edges).
ROOT_MODULES = {"__init__", "__main__", "edges", "errors", "units", "version"}


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
    graph = dict(GRAPH, **{"gpumagic.trace.model": {"gpumagic.job.reports"}})
    up = [
        (m, t)
        for m, ts in graph.items()
        for t in ts
        if package_of(m) != package_of(t) and RANK[package_of(m)] <= RANK[package_of(t)]
    ]
    assert up == [("gpumagic.trace.model", "gpumagic.job.reports")]


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
    from gpumagic.capture.chrome import reader as chrome_trace
    from gpumagic.render.calls_roofline import roofline
    from gpumagic.render.report import ProfileReport
    from gpumagic.trace.chrome_export import write_chrome_trace

    assert gpumagic.load_ncu is load_ncu and gpumagic.roofline is roofline
    assert (
        chrome_trace.write_chrome_trace is write_chrome_trace
    )  # the reader's module still offers the writer
    assert callable(ProfileReport.to_chrome_trace)


def _rooms_of(package: str) -> dict[str, set[str]]:
    """The rooms of ``package``: each module or folder directly inside it, with the rooms of the
    same package it imports (a folder's modules count as the folder)."""
    depth = package.count(".") + 1

    def room(module: str) -> str | None:
        parts = module.split(".")
        if module == package or not module.startswith(package + "."):
            return None
        return ".".join(parts[: depth + 1])

    rooms: dict[str, set[str]] = {}
    for m, targets in GRAPH.items():
        r = room(m)
        if r is None:
            continue
        rooms.setdefault(r, set())
        rooms[r] |= {t for t in map(room, targets) if t and t != r}
    return rooms


def _floors(rooms: dict[str, set[str]]) -> dict[str, int]:
    floors: dict[str, int] = {}

    def floor(r: str, seen: tuple[str, ...] = ()) -> int:
        if r in seen:
            pytest.fail("rooms import each other: " + " -> ".join([*seen, r]))
        if r not in floors:
            floors[r] = 1 + max((floor(t, (*seen, r)) for t in rooms[r]), default=0)
        return floors[r]

    for r in rooms:
        floor(r)
    return floors


def test_capture_is_in_rooms_by_tool_on_few_floors():
    # A newcomer finds their tool's folder: at most 20 rooms, at most 5 floors, no circle.
    rooms = _rooms_of("gpumagic.capture")
    assert len(rooms) <= 20, sorted(rooms)
    floors = _floors(rooms)
    assert max(floors.values()) <= 5, floors
    for tool in ("torch", "nsys", "ncu", "chrome", "memory", "marks", "child"):
        face = PKG / "capture" / tool / "__init__.py"
        assert ast.get_docstring(ast.parse(face.read_text(encoding="utf-8"))), face


def test_the_room_rule_can_fail():
    with pytest.raises(pytest.fail.Exception):
        _floors({"a": {"b"}, "b": {"a"}})
    assert _floors({"a": {"b"}, "b": {"c"}, "c": set()}) == {"a": 3, "b": 2, "c": 1}


def test_tests_mirror_the_packages():
    tests = pathlib.Path(__file__).parent
    apart = {"data", "gpu", "browser", "fake_nsys", "fake_ncu"}
    for folder in tests.rglob("*"):
        rel = folder.relative_to(tests)
        if not folder.is_dir() or rel.parts[0] in apart or "__pycache__" in rel.parts:
            continue
        if any(folder.glob("test_*.py")):
            assert (PKG / rel).is_dir(), f"tests/{rel} mirrors no gpumagic/{rel}"


def test_every_folder_says_what_it_holds_and_is_on_the_map():
    page = (PKG.parent / "docs" / "development.md").read_text(encoding="utf-8")
    for init in PKG.rglob("__init__.py"):
        folder = init.parent.relative_to(PKG.parent).as_posix()
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), folder
        if folder != "gpumagic":  # the root is the page itself
            assert f"`{folder}/`" in page, f"docs/development.md does not map {folder}/"
