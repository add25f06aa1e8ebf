"""The reference pages under docs/ build with MkDocs (``mkdocs.yml``), strictly: a broken link or
anchor, a page left out of the nav, or an API entry that no longer resolves fails here.

What the pages say (options, settings, names, commands) is checked by tests/test_readme.py, on the
README and on every page alike.
"""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[1]
CONFIG = ROOT / "mkdocs.yml"
DOCS = ROOT / "docs"
API_PAGE = DOCS / "api.md"
#: what a script calls, each documented on the API page
PUBLIC = [
    "gputime",
    "compare",
    "sweep",
    "diff",
    "load_trace",
    "load_nsys",
    "load_ncu",
    "load_memory_snapshot",
    "TimingResult",
]


def config() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML comes with the docs extra: .[docs]")
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def nav_files(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [f for item in nav for f in nav_files(item)]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in nav_files(value)]
    return []


def test_the_nav_lists_every_page_once():
    listed = nav_files(config()["nav"])
    assert len(listed) == len(set(listed)), f"pages listed twice: {listed}"
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(listed) == pages, f"nav {sorted(listed)} against the pages {pages}"


def test_the_config_makes_a_broken_link_or_anchor_fail_the_strict_build():
    cfg = config()
    assert cfg["docs_dir"] == "docs"
    assert cfg["theme"]["name"] in ("mkdocs", "readthedocs")  # built in: no theme package needed
    links = cfg["validation"]["links"]
    for kind in ("not_found", "anchors", "absolute_links", "unrecognized_links"):
        assert links[kind] == "warn", kind  # --strict turns each warning into a failure
    plugins = {p if isinstance(p, str) else next(iter(p)) for p in cfg["plugins"]}
    assert {"search", "mkdocstrings"} <= plugins


def api_entries() -> list[str]:
    return re.findall(r"^::: ([\w.]+)\s*$", API_PAGE.read_text(encoding="utf-8"), re.M)


def resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:  # a class attribute, one level down
        owner, _, cls = module.rpartition(".")
        return getattr(getattr(importlib.import_module(owner), cls), name)


def test_the_api_page_documents_each_public_script_function():
    import gpumagic

    entries = api_entries()
    assert len(entries) >= len(PUBLIC)
    documented = [resolve(e) for e in entries]  # an entry whose object moved fails here
    missing = [n for n in PUBLIC if not any(getattr(gpumagic, n) is d for d in documented)]
    assert not missing, f"public names the API page does not document: {missing}"


def mkdocs_build(config_file: pathlib.Path, site: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config_file),
            "-d",
            str(site),
        ],
        cwd=config_file.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def needs_mkdocs(*modules: str) -> None:
    for module in ("mkdocs", *modules):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: pip install -e '.[docs]' builds the docs")


def test_the_docs_build_strictly(tmp_path):
    needs_mkdocs("mkdocstrings", "mkdocstrings_handlers.python")
    site = tmp_path / "site"
    proc = mkdocs_build(CONFIG, site)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    for page in DOCS.glob("*.md"):
        built = site / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        assert built.exists(), page.name
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    for entry in api_entries():
        assert f'id="{entry}"' in api, f"mkdocstrings rendered no entry for {entry}"


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The same validation settings on a two-page site: it builds, until one link points nowhere."""
    needs_mkdocs("yaml")
    yaml = pytest.importorskip("yaml")
    validation = config()["validation"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A section\n")
    cfg = {"site_name": "t", "docs_dir": "docs", "theme": {"name": "mkdocs"}}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(cfg | {"validation": validation}))
    index = tmp_path / "docs" / "index.md"

    index.write_text("# Home\n\n[other](other.md#a-section)\n")
    good = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert good.returncode == 0, good.stderr
    for link in ("no-such-page.md", "other.md#no-such-section"):
        index.write_text(f"# Home\n\n[broken]({link})\n")
        bad = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
        assert bad.returncode != 0 and link.split("#")[-1] in bad.stderr, (link, bad.stderr)
