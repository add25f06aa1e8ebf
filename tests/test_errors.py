"""One error family: fields that say what happened, messages from one template, advice respelled per
front end."""

from __future__ import annotations

import inspect

import pytest
from IPython.core.error import UsageError

from gpumagic import errors
from gpumagic.errors import (
    GpuMagicError,
    Hint,
    NsysFailedError,
    NsysNotFoundError,
    NsysTimeoutError,
    ShippingError,
)
from gpumagic.notebook.magics import notebook_advice


def test_every_error_is_a_gpumagic_error_and_keeps_its_builtin_base():
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, Exception)
    ]
    assert len(classes) >= 12
    assert all(issubclass(c, GpuMagicError) for c in classes)
    assert issubclass(errors.NsysExportError, ValueError) and issubclass(
        errors.NsysError, RuntimeError
    )
    assert issubclass(errors.InvalidOptionError, ValueError) and issubclass(
        ShippingError, ValueError
    )


def test_errors_carry_their_fields_and_build_the_message_from_them():
    e = NsysFailedError(
        ["nsys", "profile", "x"], 7, "line 1\r50%\rdone\n\nfatal: no GPU\n", ["/p/a.qdstrm"]
    )
    assert (
        e.returncode == 7 and e.command == ["nsys", "profile", "x"] and e.files == ["/p/a.qdstrm"]
    )
    assert (
        str(e) == "nsys exited with status 7. Its output ends with:\ndone\nfatal: no GPU\nFiles: "
        "/p/a.qdstrm"
    )
    t = NsysTimeoutError(2.5, [])
    assert t.timeout == 2.5 and "within 2.5 s" in str(t) and "No partial files" in str(t)
    s = ShippingError({"f": "a function defined in the notebook"})
    assert s.problems == {"f": "a function defined in the notebook"} and "  f: a function" in str(s)


def test_the_core_speaks_to_scripts_and_the_magic_respells_for_notebooks():
    e = NsysNotFoundError(["PATH", "/opt/*/nsys"])
    assert e.looked == ["PATH", "/opt/*/nsys"] and e.configured is None
    assert "nsys_path='/path/to/nsys'" in str(e) and "%config" not in str(e)
    assert "%config GpuMagics.nsys_path = '/path/to/nsys'" in notebook_advice(str(e), e.hints)
    assert notebook_advice("kernel_time=False skips it", [Hint("kernel_time", "False")]) == (
        "%config GpuMagics.kernel_time = False skips it"
    )
    assert "configured path '/x'" in str(NsysNotFoundError(["/x"], configured="/x"))


def test_the_magic_catches_the_base_and_shows_one_usage_line(ip, monkeypatch):
    pytest.importorskip("torch")

    class NewBackendError(GpuMagicError):
        template = "the backend broke on {what}; try {hint}"

    def broken(*args, **kwargs):
        raise NewBackendError(
            hints=[Hint("profile_top", "5")], what="purpose", hint="profile_top=5"
        )

    monkeypatch.setattr("gpumagic.capture.torch.backend.capture", broken)
    with pytest.raises(
        UsageError,
        match=r"^%%gpuprofile: the backend broke on purpose; try %config GpuMagics\.profile",
    ):
        ip.run_cell_magic("gpuprofile", "", "x = 1")


def test_gputime_prints_notebook_advice_where_the_result_speaks_to_scripts(ip, monkeypatch):
    from IPython.utils.capture import capture_output

    from gpumagic.timing import TimingResult

    result = TimingResult(
        samples=[1e-3] * 5,
        calls_per_sample=1,
        device="CPU",
        backend="host",
        notes=["A longer run: time_budget=2"],
        hints=[Hint("time_budget", "2")],
    )
    monkeypatch.setattr("gpumagic.notebook.gputime_magic.measure", lambda *a, **k: result)
    with capture_output() as cap:
        got = ip.run_line_magic("gputime", "-o 1 + 1")
    assert "A longer run: %config GpuMagics.time_budget = 2" in cap.stdout
    assert "time_budget=2" in str(got)  # the object itself still speaks to scripts


def test_bad_timing_options_are_invalid_option_errors_with_fields():
    from gpumagic.timing import TimingOptions

    with pytest.raises(errors.InvalidOptionError) as info:
        TimingOptions(samples=0).validate()
    assert info.value.option == "samples" and info.value.value == 0
