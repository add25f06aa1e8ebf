"""Every module, file or name a docstring, comment or doc page points at exists: a pointer to a
module that moved sends a reader nowhere, and nothing else would notice."""

from __future__ import annotations

import pathlib
import re

import pytest

from .test_readme import resolve

ROOT = pathlib.Path(__file__).parents[1]
PKG = ROOT / "gpumagic"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted(PKG.rglob("*.py"))

#: ``gpumagic.a.b`` (a module, or a name in one), written anywhere.
DOTTED = re.compile(r"(?<![\w./-])gpumagic(?:\.[A-Za-z_]\w*)+")
#: ``:mod:`.name``` and ``:func:`..a.b```: Sphinx roles relative to the module's package.
RELATIVE_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr):`~?(\.+[A-Za-z_][\w.]*)`")
#: ``capture/nsys/warm.py``, ``benchmarks/x.py``: a path of this repository or of the package.
PATH = re.compile(r"(?<![\w./-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_]\w*\.(?:py|md|json|sh)(?:\.gz)?)\b")


def resolves(dotted: str) -> bool:
    """``dotted`` names a module, or an attribute reached from the longest module prefix."""
    try:
        resolve(dotted.rstrip("."))
    except (ImportError, AttributeError):
        return False
    return True


#: Where a path of this project starts; others (``torch/optim/lr_scheduler.py``, a library's
#: ``src/device/generate.py``) are other projects' files, quoted as sources.
LOCAL = {p.name for p in ROOT.iterdir() if p.is_dir()} | {
    p.name for p in PKG.iterdir() if p.is_dir()
}
#: ``name.py`` alone, in code quotes: a module of this package by its file name.
BARE = re.compile(r"``([A-Za-z_]\w*\.py)``")
FILE_NAMES = {p.name for p in ROOT.rglob("*.py")}
#: File names of other projects that the code quotes as its sources.
ELSEWHERE = {"generator.py", "ipython_config.py", "contextlib.py"}


def path_exists(path: str, near: pathlib.Path) -> bool:
    """``path`` from the repository root, from the package, or from the file's own folder."""
    if path.split("/")[0] not in LOCAL:
        return True
    return any((base / path).exists() for base in (ROOT, PKG, near.parent, ROOT / "tests"))


def module_of(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def broken_pointers(path: pathlib.Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    bad = [f"{name}" for name in set(DOTTED.findall(text)) if not resolves(name)]
    bad += [f"{p}" for p in set(PATH.findall(text)) if not path_exists(p, path)]
    bad += [name for name in set(BARE.findall(text)) if name not in FILE_NAMES | ELSEWHERE]
    if path.suffix == ".py":
        here = module_of(path)
        package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
        for rel in set(RELATIVE_ROLE.findall(text)):
            dots = len(rel) - len(rel.lstrip("."))
            base = package.split(".")[: len(package.split(".")) - dots + 1]
            if not resolves(".".join([*base, rel.lstrip(".")])):
                bad.append(rel)
    return sorted(bad)


@pytest.mark.parametrize("path", SOURCES + PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_pointer_in_a_docstring_or_page_exists(path):
    assert not broken_pointers(path), f"{path.relative_to(ROOT)} points at what is not there"


def test_the_pointer_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See ``gpumagic.capture.no_such_module``, ``capture/nsys/nowhere.py`` and "
        "``gpumagic.trace.Trace`` (which exists).",
        encoding="utf-8",
    )
    assert broken_pointers(page) == ["capture/nsys/nowhere.py", "gpumagic.capture.no_such_module"]
