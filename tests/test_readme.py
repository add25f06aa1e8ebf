"""README.md and the docs/ pages say only what the code does: their options, settings, names, paths
and commands are checked here, on the README and on every page alike (``PAGES``).

- Every option a page gives a magic is in that magic's parser (read from
  ``gpumagic.notebook.magics``, not listed here). An option belongs to a magic where it follows the
  magic's name (``%gputime -o …``, ``%%gpuprofile --nsys``) and, in the sections headed by a magic
  (a ``##`` heading that names it, else the page's ``#`` title), where a code span starts with it
  (``-n N``, ``--top K``). In those sections a flag of another tool is written after the tool's
  name (``nsys profile --capture-range=nvtx``).
- Every ``%config`` setting named is a trait of ``GpuMagics``, and the Settings table gives each
  default as it is.
- Every ``gpumagic.…`` name imports; every Python block compiles and its imports run; every
  repository path in a code span exists.
- Every command in a fenced ``bash`` block runs, unless its comment says ``needs: …`` (a GPU,
  nsys, a cluster). A command passes on exit status 0, or on one its comment names
  (``exit 1: …``). The commands of one block run in order in one folder with one history, so they
  may build on each other. ``torchrun`` lines, which need GPUs, are still parsed by torch's own
  torchrun parser.
- The README's Set up section has exactly two commands, and they are the ones CI runs
  (``.ci/run``); a page with a Set up section gives the same two.
- The README starts a user in a minute: at most 250 lines, and every relative link in it (and each
  ``#anchor``) resolves; it links every docs page. The docs build itself is tests/test_docs.py's.
"""

from __future__ import annotations

import ast
import importlib
import os
import pathlib
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
#: every page checked: the README and each docs page, by its path from the repository root
PAGES = {"README.md": README} | {
    p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in DOC_PAGES
}
ALL_TEXT = "\n".join(PAGES.values())

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
INVOCATION = re.compile(r"(%%?gputime|%%gpuprofile)\b([^`\n]*)")
SET_UP = re.compile(r"^#{1,2} Set up$")


@dataclass
class Section:
    page: str  # README.md or docs/….md
    h1: str  # the page's title
    h2: str  # the title of the ## section it is in ("" before the first)
    title: str  # its own heading
    text: str  # prose and tables, code blocks left out
    blocks: list[tuple[str, str]]  # (language, body) of its fenced blocks


def sections(page: str, markdown: str) -> list[Section]:
    """The page cut at its #, ## and ### headings (a ``#`` inside a code block is no heading)."""
    out: list[Section] = []
    h1 = h2 = title = ""
    chunk: list[str] = []
    fence = False

    def close() -> None:
        text = "".join(chunk)
        blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]
        out.append(Section(page, h1, h2, title, FENCE.sub("", text), blocks))

    for line in markdown.splitlines(keepends=True):
        if line.startswith("```"):
            fence = not fence
        heading = None if fence else re.match(r"(#{1,3}) ", line)
        if heading:
            close()
            chunk, title = [], line.strip()
            if len(heading.group(1)) == 1:
                h1, h2 = title, ""
            elif len(heading.group(1)) == 2:
                h2 = title
        chunk.append(line)
    close()
    return out


SECTIONS = [sec for page, text in PAGES.items() for sec in sections(page, text)]


def test_pages_are_cut_at_headings_outside_code_blocks():
    secs = sections("x.md", "# T\n```bash\n# a comment\n```\n## `%gputime`\ntext `-n N`\n### Sub\n")
    assert [s.title for s in secs] == ["", "# T", "## `%gputime`", "### Sub"]
    assert secs[1].blocks == [("bash", "# a comment\n")] and secs[3].h2 == "## `%gputime`"
    assert len(DOC_PAGES) >= 10, "the reference pages under docs/ are read too"


# --- options --------------------------------------------------------------------------------------
def magic_parsers() -> dict[str, set[str]]:
    from gpumagic.notebook.magics import GpuMagics

    def options(fn) -> set[str]:
        return {s for action in fn.parser._actions for s in action.option_strings}

    gputime, gpuprofile = options(GpuMagics.gputime), options(GpuMagics.gpuprofile)
    return {"%gputime": gputime, "%%gputime": gputime, "%%gpuprofile": gpuprofile}


def magic_of_heading(heading: str) -> str | None:
    if "`%%gpuprofile`" in heading or "`%%gpuprofile " in heading:
        return "%%gpuprofile"
    if "`%gputime`" in heading or "`%gputime " in heading:
        return "%gputime"
    return None


def magic_of_section(sec: Section) -> str | None:
    """The magic a section's option spans belong to: its ## heading's, else its page title's."""
    return magic_of_heading(sec.h2) or magic_of_heading(sec.h1)


def attributed_flags() -> list[tuple[str, str, str]]:
    """(magic, flag, where) for every flag a page gives a magic."""
    found = []
    for sec in SECTIONS:
        texts = [sec.text] + [body for _, body in sec.blocks]
        for text in texts:
            for m in INVOCATION.finditer(text):
                for flag in FLAG.findall(QUOTED.sub("", m.group(2))):
                    found.append((m.group(1), flag, f"{m.group(0)} in {sec.page}"))
        magic = magic_of_section(sec)
        if magic:
            for span in SPAN.findall(sec.text):
                if span.startswith("-"):
                    where = f"`{span}` in {sec.page} {sec.title}"
                    found.append((magic, FLAG.match(span).group(1), where))
    return found


def test_the_pages_give_magics_options_and_this_check_sees_them():
    flags = attributed_flags()
    magics = {magic for magic, _, _ in flags}
    assert {"%gputime", "%%gputime", "%%gpuprofile"} <= magics
    # the options tables and the samples are read: a few that must be among them
    seen = {(m.replace("%%gputime", "%gputime"), f) for m, f, _ in flags}
    for pair in [
        ("%gputime", "--steady"),
        ("%gputime", "--vs"),
        ("%gputime", "--zip"),
        ("%%gpuprofile", "--ncu"),
        ("%%gpuprofile", "--nproc"),
        ("%%gpuprofile", "--no-clock-control"),
    ]:
        assert pair in seen, pair


def test_every_option_a_page_gives_a_magic_is_in_its_parser():
    parsers = magic_parsers()
    wrong = sorted({(m, f, w) for m, f, w in attributed_flags() if f not in parsers[m]})
    assert not wrong, "options a page gives a magic that its parser does not have:\n" + "\n".join(
        f"  {magic} {flag}   ({where})" for magic, flag, where in wrong
    )


def test_the_check_would_catch_an_option_that_does_not_exist():
    parsers = magic_parsers()
    flags = FLAG.findall(QUOTED.sub("", INVOCATION.search("%gputime --warm-cache A @ A").group(2)))
    assert flags == ["--warm-cache"] and "--warm-cache" not in parsers["%gputime"]
    page = "# `%%gpuprofile`\n\nOptions: `--top K`, `--warm-cache`.\n"
    sec = sections("x.md", page)[1]
    assert magic_of_section(sec) == "%%gpuprofile"
    assert [s for s in SPAN.findall(sec.text) if s.startswith("-")] == ["--top K", "--warm-cache"]
    assert "--warm-cache" not in parsers["%%gpuprofile"]


# --- settings -------------------------------------------------------------------------------------
def traits() -> dict[str, object]:
    from gpumagic.notebook.config import GpuMagicsConfig

    config = GpuMagicsConfig()
    return {name: getattr(config, name) for name in GpuMagicsConfig.class_trait_names(config=True)}


def test_every_setting_the_pages_name_exists():
    named = set(re.findall(r"GpuMagics\.([A-Za-z_]\w*)", ALL_TEXT))
    assert len(named) >= 5, "the pages name no setting"
    assert not named - set(traits()), f"settings that do not exist: {sorted(named - set(traits()))}"


def _value(text: str) -> object:
    text = text.strip().strip("`")
    if text == "(unset)":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return float(text)
    except ValueError:
        return text


def test_the_settings_table_gives_each_default_as_the_code_has_it():
    tables = [s for s in SECTIONS if re.match(r"#{2,3} Settings$", s.title)]
    assert len(tables) == 1, [f"{s.page}: {s.title}" for s in tables]
    rows = re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|", tables[0].text, re.M)
    assert len(rows) >= 10
    have = traits()
    for names, defaults in rows:
        names = [n.strip().strip("`") for n in names.split(",")]
        values = [_value(v) for v in defaults.split(",")] if len(names) > 1 else [_value(defaults)]
        assert len(values) == len(names), (names, defaults)
        for name, value in zip(names, values):
            code = have[name]
            if isinstance(code, (int, float)) and not isinstance(code, bool):
                code = float(code)
            assert code == value, f"{name}: the table says {value!r}, the code {code!r}"


# --- names, paths, Python blocks ------------------------------------------------------------------
def resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


API_NAME = re.compile(r"(?<![\w/.-])gpumagic(?:\.[A-Za-z_]\w*)+")
API = sorted({name for text in PAGES.values() for name in API_NAME.findall(text)})


def test_the_pages_name_apis():
    assert len(API) >= 15 and "gpumagic.load_nsys" in API
    assert "gpumagic.load_nsys" in API_NAME.findall(README)


@pytest.mark.parametrize("name", API)
def test_every_gpumagic_name_on_a_page_imports(name):
    resolve(name)


def test_a_name_that_does_not_exist_fails_to_resolve():
    with pytest.raises((ImportError, AttributeError)):
        resolve("gpumagic.diff_of_two_reports")


def test_every_python_block_parses_and_its_imports_resolve():
    blocks = [(s.page, body) for s in SECTIONS for lang, body in s.blocks if lang == "python"]
    assert len(blocks) >= 3 and any(page == "README.md" for page, _ in blocks)
    for page, body in blocks:
        for node in ast.walk(ast.parse(body, filename=page)):  # a syntax error fails here
            if isinstance(node, ast.ImportFrom) and node.module.startswith("gpumagic"):
                module = importlib.import_module(node.module)
                for alias in node.names:  # a name in the module, or a submodule as `from` finds it
                    if not hasattr(module, alias.name):
                        importlib.import_module(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)


REPO_PATH = re.compile(r"(?<![\w/])((?:benchmarks|tests|demos|docker|docs|gpumagic)/[\w./-]+)")


def test_every_repository_path_the_pages_name_exists():
    paths = {
        (page, p.rstrip("/.,"))
        for page, text in PAGES.items()
        for span in SPAN.findall(text)
        for p in REPO_PATH.findall(span)
        if not re.search(r"[*{}…]", p)
    }
    assert len(paths) >= 10
    missing = sorted(f"{page}: {p}" for page, p in paths if not (ROOT / p).exists())
    assert not missing, missing


def test_every_kernel_family_listed_is_the_decoders():
    from gpumagic.kernels import FAMILIES

    listed = re.search(r"`family` \(([^)]*)\)", ALL_TEXT.replace("\n", " ")).group(1)
    listed = [f.strip() for f in listed.split(",")]
    assert len(listed) >= 10 and "magma" in listed
    unknown = sorted(set(listed) - set(FAMILIES))
    assert not unknown, f"families the decoder does not have: {unknown}"


def test_every_demo_is_on_a_page():
    demos = sorted((ROOT / "demos").glob("*.ipynb"))
    assert demos
    for path in demos:
        assert f"`{path.stem}`" in ALL_TEXT, path.stem


# --- the README: short, and its links resolve -----------------------------------------------------
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"^#+\s*", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def broken_links(page: pathlib.Path, markdown: str) -> list[str]:
    """A page's relative links and images whose file (or #anchor, in a Markdown file) is absent."""
    broken = []
    for target in LINK.findall(FENCE.sub("", markdown)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            headings = [s.title for s in sections(file.name, file.read_text(encoding="utf-8"))]
            if anchor not in {github_slug(h) for h in headings if h}:
                broken.append(target)
    return broken


def test_the_readme_is_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_every_relative_link_in_the_readme_resolves():
    links = LINK.findall(FENCE.sub("", README))
    assert len(links) >= 10
    broken = broken_links(ROOT / "README.md", README)
    assert not broken, f"README links that lead nowhere: {broken}"


def test_a_broken_link_is_caught():
    text = "[a](docs/no-such-page.md) [b](#no-such-heading) [c](#set-up) [d](https://x.org/y)"
    assert broken_links(ROOT / "README.md", text) == ["docs/no-such-page.md", "#no-such-heading"]
    assert github_slug("## `%gputime` and `--vs`: faster?") == "gputime-and---vs-faster"


def test_the_readme_links_every_docs_page():
    linked = {
        (ROOT / t.partition("#")[0]).resolve()
        for t in LINK.findall(README)
        if t.startswith("docs/")
    }
    unlinked = [p.name for p in DOC_PAGES if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not lead to: {unlinked}"


# --- commands -------------------------------------------------------------------------------------
@dataclass
class Command:
    line: str
    comment: str
    section: str

    @property
    def needs(self) -> str | None:
        m = re.match(r"needs:\s*(.*)", self.comment)
        return m.group(1).strip() if m else None

    @property
    def accepted(self) -> set[int]:
        return {0} | {int(n) for n in re.findall(r"\bexit (\d+)", self.comment)}


@dataclass
class Block:
    page: str
    section: str
    commands: list[Command]

    @property
    def set_up(self) -> bool:
        return bool(SET_UP.match(self.section))


def _split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing comment: the first # outside quotes that starts a word."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def parse_commands(body: str, section: str) -> list[Command]:
    out: list[Command] = []
    lines, pending = [], ""
    for raw in body.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    for line in lines:
        cmd, comment = _split_comment(line)
        if cmd:
            out.append(Command(cmd, comment, section))
        elif out and comment and not line.startswith("#"):
            out[-1].comment += " " + comment  # a comment continued on the next line
    return out


BLOCKS = [
    Block(sec.page, sec.title, parse_commands(body, sec.title))
    for sec in SECTIONS
    for lang, body in sec.blocks
    if lang == "bash"
]
COMMANDS = [c for b in BLOCKS for c in b.commands]
SETUP = [c for b in BLOCKS if b.page == "README.md" and b.set_up for c in b.commands]
RUNNABLE = [b for b in BLOCKS if not b.set_up and any(c.needs is None for c in b.commands)]


def quiet(line: str) -> str:  # CI adds -q to pip and pytest alike
    return re.sub(r"\s+-q\b", "", line).strip()


def test_set_up_has_exactly_two_commands_and_ci_runs_them():
    assert len(SETUP) == 2, [c.line for c in SETUP]
    ci = [quiet(line) for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in SETUP:
        for part in command.line.split("&&"):
            assert quiet(part) in ci, f"{part.strip()!r} is not a line of .ci/run"


def test_a_page_with_a_set_up_section_gives_the_readmes_two_commands():
    pages = [b for b in BLOCKS if b.page != "README.md" and b.set_up]
    assert pages, "the set-up page gives the set-up commands"
    for block in pages:
        assert [c.line for c in block.commands] == [c.line for c in SETUP], block.page


def test_commands_that_cannot_run_here_say_why():
    skipped = [c for c in COMMANDS if c.needs is not None]
    assert skipped, "no command is marked as needing a GPU or a tool"
    for c in skipped:
        assert len(c.needs) > 3, c.line
    assert RUNNABLE, "no command on the pages runs on the CPU"


TORCHRUN = [c for c in COMMANDS if c.line.startswith("torchrun ")]


@pytest.mark.parametrize("command", TORCHRUN, ids=[f"torchrun-{i}" for i in range(len(TORCHRUN))])
def test_torchrun_lines_parse_with_torchs_own_parser(command):
    run = pytest.importorskip("torch.distributed.run")
    args = run.get_args_parser().parse_args(shlex.split(command.line)[1:])  # SystemExit if unknown
    assert args.nnodes and args.nproc_per_node and args.no_python
    assert args.rdzv_backend == "c10d" or args.node_rank is not None
    if args.rdzv_backend == "c10d":
        assert args.rdzv_id != "none" and args.rdzv_endpoint, (
            "a multi-node c10d line needs --rdzv-id and --rdzv-endpoint"
        )


def test_the_pages_give_both_rendezvous_forms():
    forms = {"c10d" if "--rdzv-backend c10d" in c.line else "static" for c in TORCHRUN}
    assert forms == {"c10d", "static"}
    assert any("--node-rank" in c.line for c in TORCHRUN)
    assert any(c.line.startswith("srun ") for c in COMMANDS)


def shell(tmp_path: pathlib.Path) -> tuple[dict[str, str], pathlib.Path]:
    """An environment with this interpreter first on PATH and a history of its own, and a folder."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["GPUMAGIC_HISTORY"] = str(tmp_path / "history.sqlite")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return env, cwd


def _run(command: Command, env: dict[str, str], cwd: pathlib.Path, timeout: float = 300):
    return subprocess.run(
        ["bash", "-c", command.line],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize(
    "block", RUNNABLE, ids=[f"{b.page}:{b.commands[0].line[:50]}" for b in RUNNABLE]
)
def test_every_bash_command_that_can_run_on_the_cpu_runs(block, tmp_path):
    env, cwd = shell(
        tmp_path
    )  # one history and one folder per block: its commands build on each other
    for command in block.commands:
        if command.needs is not None:
            continue
        proc = _run(command, env, cwd)
        assert proc.returncode in command.accepted, (
            f"{block.page}: {command.line}\nexit {proc.returncode}\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )


def test_a_failing_command_fails_the_check(tmp_path):
    env, cwd = shell(tmp_path)
    bad = Command("python -m gpumagic check no-such-baseline.json", "", "test")
    assert _run(bad, env, cwd, timeout=60).returncode not in bad.accepted
