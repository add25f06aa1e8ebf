"""README.md says only what the code does: its options, settings, names, paths and commands are checked here.

- Every option the README gives a magic is in that magic's parser (read from ``gpumagic.notebook.magics``, not listed here).
  An option belongs to a magic where it follows the magic's name (``%gputime -o …``, ``%%gpuprofile --nsys``) and,
  in the sections headed by a magic, where a code span starts with it (``-n N``, ``--top K``). In those sections a
  flag of another tool is written after the tool's name (``nsys profile --capture-range=nvtx``).
- Every ``%config`` setting it names is a trait of ``GpuMagics``, and the Settings table gives each default as it is.
- Every ``gpumagic.…`` name imports; every Python block compiles and its imports run.
- Every command in a fenced ``bash`` block runs, unless its comment says ``needs: …`` (a GPU, nsys, a cluster): those
  are skipped with that reason. A command passes on exit status 0, or on one its comment names (``exit 1: …``).
  ``torchrun`` lines, which need GPUs, are still parsed by torch's own torchrun parser.
- The Set up section has exactly two commands, and they are the ones CI runs (``.ci/run``).
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

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
INVOCATION = re.compile(r"(%%?gputime|%%gpuprofile)\b([^`\n]*)")


@dataclass
class Section:
    h2: str  # the title of the ## section it is in
    title: str
    text: str  # prose and tables, code blocks left out
    blocks: list[tuple[str, str]]  # (language, body) of its fenced blocks


def sections() -> list[Section]:
    out, h2 = [], ""
    for chunk in re.split(r"^(?=#{2,3} )", README, flags=re.M):
        title = chunk.splitlines()[0] if chunk.startswith("#") else ""
        if title.startswith("## "):
            h2 = title
        blocks = [(m.group(1), m.group(2)) for m in FENCE.finditer(chunk)]
        out.append(Section(h2, title, FENCE.sub("", chunk), blocks))
    return out


SECTIONS = sections()


def magic_parsers() -> dict[str, set[str]]:
    from gpumagic.notebook.magics import GpuMagics

    def options(fn) -> set[str]:
        return {s for action in fn.parser._actions for s in action.option_strings}

    gputime, gpuprofile = options(GpuMagics.gputime), options(GpuMagics.gpuprofile)
    return {"%gputime": gputime, "%%gputime": gputime, "%%gpuprofile": gpuprofile}


def magic_of_section(h2: str) -> str | None:
    if "`%%gpuprofile`" in h2:
        return "%%gpuprofile"
    if "`%gputime`" in h2:
        return "%gputime"
    return None


def attributed_flags() -> list[tuple[str, str, str]]:
    """(magic, flag, where) for every flag the README gives a magic."""
    found = []
    for sec in SECTIONS:
        texts = [sec.text] + [body for _, body in sec.blocks]
        for text in texts:
            for m in INVOCATION.finditer(text):
                for flag in FLAG.findall(QUOTED.sub("", m.group(2))):
                    found.append((m.group(1), flag, m.group(0)))
        magic = magic_of_section(sec.h2)
        if magic:
            for span in SPAN.findall(sec.text):
                if span.startswith("-"):
                    found.append((magic, FLAG.match(span).group(1), f"`{span}` in {sec.title}"))
    return found


def test_the_readme_gives_magics_options_and_this_check_sees_them():
    flags = attributed_flags()
    magics = {magic for magic, _, _ in flags}
    assert {"%gputime", "%%gputime", "%%gpuprofile"} <= magics
    # the options tables and the samples are read: a few that must be among them
    seen = {(m.replace("%%gputime", "%gputime"), f) for m, f, _ in flags}
    for pair in [
        ("%gputime", "--steady"),
        ("%gputime", "--vs"),
        ("%%gpuprofile", "--ncu"),
        ("%%gpuprofile", "--nproc"),
    ]:
        assert pair in seen, pair


def test_every_option_the_readme_gives_a_magic_is_in_its_parser():
    parsers = magic_parsers()
    wrong = sorted({(magic, flag, where) for magic, flag, where in attributed_flags() if flag not in parsers[magic]})
    assert not wrong, "options the README gives a magic that its parser does not have:\n" + "\n".join(
        f"  {magic} {flag}   ({where})" for magic, flag, where in wrong
    )


def test_the_check_would_catch_an_option_that_does_not_exist():
    parsers = magic_parsers()
    flags = FLAG.findall(QUOTED.sub("", INVOCATION.search("%gputime --warm-cache A @ A").group(2)))
    assert flags == ["--warm-cache"] and "--warm-cache" not in parsers["%gputime"]


# --- settings -------------------------------------------------------------------------------------------------------
def traits() -> dict[str, object]:
    from gpumagic.notebook.config import GpuMagicsConfig

    config = GpuMagicsConfig()
    return {name: getattr(config, name) for name in GpuMagicsConfig.class_trait_names(config=True)}


def test_every_setting_the_readme_names_exists():
    named = set(re.findall(r"GpuMagics\.([A-Za-z_]\w*)", README))
    assert named, "the README names no setting"
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
    table = next(s for s in SECTIONS if s.title.startswith("### Settings")).text
    rows = re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|", table, re.M)
    assert len(rows) >= 10
    have = traits()
    for names, defaults in rows:
        names = [n.strip().strip("`") for n in names.split(",")]
        values = [_value(v) for v in defaults.split(",")] if len(names) > 1 else [_value(defaults)]
        assert len(values) == len(names), (names, defaults)
        for name, value in zip(names, values):
            code = have[name]
            assert (float(code) if isinstance(code, (int, float)) and not isinstance(code, bool) else code) == value, (
                f"{name}: README says {value!r}, the code {code!r}"
            )


# --- names, paths, Python blocks ------------------------------------------------------------------------------------
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


API = sorted(set(re.findall(r"(?<![\w/.-])gpumagic(?:\.[A-Za-z_]\w*)+", README)))


def test_the_readme_names_apis():
    assert len(API) >= 15 and "gpumagic.load_nsys" in API


@pytest.mark.parametrize("name", API)
def test_every_gpumagic_name_in_the_readme_imports(name):
    resolve(name)


def test_a_name_that_does_not_exist_fails_to_resolve():
    with pytest.raises((ImportError, AttributeError)):
        resolve("gpumagic.diff_of_two_reports")


def test_every_python_block_parses_and_its_imports_resolve():
    blocks = [body for sec in SECTIONS for lang, body in sec.blocks if lang == "python"]
    assert blocks
    for body in blocks:
        for node in ast.walk(ast.parse(body)):  # a syntax error fails here
            if isinstance(node, ast.ImportFrom) and node.module.startswith("gpumagic"):
                module = importlib.import_module(node.module)
                for alias in node.names:  # a name in the module, or a submodule of it, as `from … import` finds it
                    if not hasattr(module, alias.name):
                        importlib.import_module(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)


def test_every_repository_path_the_readme_names_exists():
    paths = {
        p.rstrip("/.,")
        for span in SPAN.findall(README)
        for p in re.findall(r"(?<![\w/])((?:benchmarks|tests|demos|docker|docs|gpumagic)/[\w./-]+)", span)
        if not re.search(r"[*{}…]", p)
    }
    assert len(paths) >= 10
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert not missing, missing


def test_every_kernel_family_listed_is_the_decoders():
    from gpumagic.kernels import FAMILIES

    listed = [f.strip() for f in re.search(r"`family` \(([^)]*)\)", README.replace("\n", " ")).group(1).split(",")]
    assert len(listed) >= 10 and "magma" in listed
    assert not set(listed) - set(FAMILIES), f"families the decoder does not have: {sorted(set(listed) - set(FAMILIES))}"


def test_every_demo_is_in_the_readme():
    for path in sorted((ROOT / "demos").glob("*.ipynb")):
        assert f"`{path.stem}`" in README, path.stem


# --- commands -------------------------------------------------------------------------------------------------------
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


def commands() -> list[Command]:
    out = []
    for sec in SECTIONS:
        for lang, body in sec.blocks:
            if lang != "bash":
                continue
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
                    out.append(Command(cmd, comment, sec.title))
                elif out and comment and not line.startswith("#"):
                    out[-1].comment += " " + comment  # a comment continued on the next line
    return out


COMMANDS = commands()
SETUP = [c for c in COMMANDS if c.section == "## Set up"]
RUNNABLE = [c for c in COMMANDS if c.section != "## Set up" and c.needs is None]


def test_set_up_has_exactly_two_commands_and_ci_runs_them():
    assert len(SETUP) == 2, [c.line for c in SETUP]

    def quiet(line: str) -> str:  # CI adds -q to pip and pytest alike
        return re.sub(r"\s+-q\b", "", line).strip()

    ci = [quiet(line) for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in SETUP:
        for part in command.line.split("&&"):
            assert quiet(part) in ci, f"{part.strip()!r} is not a line of .ci/run"


def test_commands_that_cannot_run_here_say_why():
    skipped = [c for c in COMMANDS if c.needs is not None]
    assert skipped, "no command is marked as needing a GPU or a tool"
    for c in skipped:
        assert len(c.needs) > 3, c.line
    assert RUNNABLE, "no README command runs on the CPU"


TORCHRUN = [c for c in COMMANDS if c.line.startswith("torchrun ")]


@pytest.mark.parametrize("command", TORCHRUN, ids=[f"torchrun-{i}" for i in range(len(TORCHRUN))])
def test_torchrun_lines_parse_with_torchs_own_parser(command):
    run = pytest.importorskip("torch.distributed.run")
    args = run.get_args_parser().parse_args(shlex.split(command.line)[1:])  # SystemExit on an unknown option
    assert args.nnodes and args.nproc_per_node and args.no_python
    assert args.rdzv_backend == "c10d" or args.node_rank is not None
    if args.rdzv_backend == "c10d":
        assert args.rdzv_id != "none" and args.rdzv_endpoint, (
            "a multi-node c10d line needs --rdzv-id and --rdzv-endpoint"
        )


def test_the_readme_gives_both_rendezvous_forms():
    forms = {"c10d" if "--rdzv-backend c10d" in c.line else "static" for c in TORCHRUN}
    assert forms == {"c10d", "static"}
    assert any("--node-rank" in c.line for c in TORCHRUN)
    assert any(c.line.startswith("srun ") for c in COMMANDS)


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["GPUMAGIC_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    return env, tmp_path_factory.mktemp("cwd")


@pytest.mark.parametrize("command", RUNNABLE, ids=[c.line[:60] for c in RUNNABLE])
def test_every_bash_command_that_can_run_on_the_cpu_runs(command, shell_env):
    env, cwd = shell_env  # one history and one folder for the module: the commands of a block build on each other
    proc = subprocess.run(
        ["bash", "-c", command.line], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode in command.accepted, (
        f"{command.line}\nexit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )


def test_a_failing_command_fails_the_check(shell_env):
    env, cwd = shell_env
    bad = Command("python -m gpumagic check no-such-baseline.json", "", "test")
    proc = subprocess.run(["bash", "-c", bad.line], cwd=cwd, env=env, capture_output=True, timeout=60, check=False)
    assert proc.returncode not in bad.accepted
