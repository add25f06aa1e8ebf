"""The type checker at the door: mypy (configured in pyproject.toml) strict on the whole package,
with no finding; the one relaxation (IPython's untyped magic decorators) is named in pyproject."""

from __future__ import annotations

import collections
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[1]
#: Flags of mypy's --strict that pyproject's override sets on every gpumagic module.
STRICT_FLAGS = (
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_any_generics",
    "disallow_subclassing_any",
    "check_untyped_defs",
    "warn_return_any",
    "warn_unused_ignores",
)
FINDING = re.compile(r"^gpumagic/([A-Za-z_]+)(?:/|\.py)[^:]*:\d+: error:", re.M)


def findings_by_package(output: str) -> collections.Counter[str]:
    return collections.Counter(FINDING.findall(output))


@pytest.fixture(scope="module")
def mypy_output() -> str:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", "/tmp/gpumagic-mypy"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 2: mypy itself failed
    return done.stdout


def test_the_package_has_no_finding(mypy_output):
    found = [line for line in mypy_output.splitlines() if FINDING.match(line)]
    assert not found, f"{dict(findings_by_package(mypy_output))}\n" + "\n".join(found[:30])


def test_strict_covers_every_module():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    everywhere = [o for o in overrides if "gpumagic.*" in o["module"]]
    assert everywhere, "no mypy override covers gpumagic.*"
    assert all(everywhere[0].get(flag) is True for flag in STRICT_FLAGS), everywhere[0]
    relaxed = {
        m: {k for k, v in o.items() if v is False}
        for o in overrides
        for m in o["module"]
        if any(v is False for v in o.values())
    }
    assert relaxed == {"gpumagic.notebook.magics": {"disallow_untyped_decorators"}}, relaxed


def test_the_count_can_fail():
    out = "gpumagic/trace/model.py:3: error: x  [misc]\ngpumagic/units.py:9: error: y  [misc]\n"
    assert findings_by_package(out) == {"trace": 1, "units": 1}


def untyped_returns(namespace: object, names: list[str]) -> list[str]:
    """Public functions, and public methods of public classes, whose return is unannotated or
    ``Any``: what a script gets back from gpumagic must say what it is."""
    import inspect

    def bare(f: object) -> bool:
        ret = inspect.signature(f).return_annotation  # type: ignore[arg-type]
        return ret is inspect.Signature.empty or ret in ("Any", "typing.Any")

    out = []
    for name in names:
        obj = getattr(namespace, name)
        if inspect.isfunction(obj) and bare(obj):
            out.append(name)
        elif inspect.isclass(obj):
            out += [
                f"{name}.{m}"
                for m, f in vars(obj).items()
                if inspect.isfunction(f) and not m.startswith("_") and bare(f)
            ]
    return out


def test_the_front_door_says_what_it_returns():
    import gpumagic

    assert not untyped_returns(gpumagic, list(gpumagic.__all__))


def test_the_return_check_can_fail():
    import types
    from typing import Any

    def typed() -> int:
        return 1

    def loose():
        return 1

    class Result:
        def to_dataframe(self) -> Any:
            return None

    ns = types.SimpleNamespace(typed=typed, loose=loose, Result=Result)
    assert untyped_returns(ns, ["typed", "loose", "Result"]) == ["loose", "Result.to_dataframe"]


def bare_any(source: str) -> list[tuple[int, str]]:
    """(line, what) of each annotation in ``source`` that is ``Any`` itself: a parameter, a return
    or a variable. ``*args: Any`` and ``**kwargs: Any`` pass values on as they came and are not
    counted; a module's ``__getattr__`` (PEP 562) returns whatever the name is."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs:
                if arg.annotation is not None and ast.unparse(arg.annotation) == "Any":
                    found.append((arg.lineno, f"{node.name}({arg.arg})"))
            returns = ast.unparse(node.returns) if node.returns is not None else ""
            if returns == "Any" and node.name != "__getattr__":
                found.append((node.lineno, f"{node.name} ->"))
        elif isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) == "Any":
            found.append((node.lineno, ast.unparse(node.target)))
    return found


def test_any_is_only_where_a_third_party_value_enters():
    """A bare ``Any`` says nothing of the value: the package names each third-party value with an
    alias of ``gpumagic.edges`` that says why it is ``Any``, and types its own values."""
    found = {}
    for path in sorted((ROOT / "gpumagic").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "gpumagic/edges.py":
            continue
        for line, what in bare_any(path.read_text(encoding="utf-8")):
            found[f"{rel}:{line}"] = what
    assert not found, f"{len(found)} bare Any annotations: " + ", ".join(
        f"{k} {v}" for k, v in list(found.items())[:40]
    )


def test_the_any_check_can_fail():
    src = (
        "from typing import Any\n"
        "def f(a: Any, *args: Any, b: int = 0, **kw: Any) -> Any: ...\n"
        "def __getattr__(name: str) -> Any: ...\n"
        "x: Any = 1\n"
        "def g(c: dict[str, Any]) -> list[Any]: ...\n"
    )
    assert bare_any(src) == [(2, "f(a)"), (2, "f ->"), (4, "x")]
