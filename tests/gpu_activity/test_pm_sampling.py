"""``--counters`` in this process (CUPTI's PM sampling): the line that names the versions found and
the route that works, and the magics that say it instead of refusing the cell."""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

from gpumagic.gpu_activity.pm_sampling import in_process_counters_line


@pytest.mark.parametrize(
    "binding, cuda, says",
    [
        (None, None, "found cupti-python not installed, torch's CUDA none (CPU build)"),
        ("13.0.1", "13.0", "found cupti-python 13.0.1, torch's CUDA 13.0"),
        ("13.3.0", "13.0", "found cupti-python 13.3.0, torch's CUDA 13.0"),
        ("12.9.0", "13.4", "found cupti-python 12.9.0, torch's CUDA 13.4"),
    ],
)
def test_the_line_names_what_is_missing_and_the_route(binding, cuda, says, monkeypatch):
    monkeypatch.setattr("gpumagic.gpu_activity.pm_sampling._binding_version", lambda: binding)
    line = in_process_counters_line(cuda=cuda) if cuda else in_process_counters_line()
    assert line.startswith("--counters: hardware counters in this process need CUPTI's PM")
    assert "cupti-python 13.3+ and a torch built for CUDA 13.4+" in line
    assert says in line and line.endswith(
        "%%gpuprofile --nsys --counters samples them under Nsight Systems in the same capture."
    )


def test_versions_that_suffice_are_said_plainly_not_called_missing():
    line = in_process_counters_line("13.3.1", "13.4")
    assert "enough), which this gpumagic does not read yet" in line and "need" not in line


def test_gpuprofile_and_gputime_with_counters_run_and_say_the_line(ip):
    with capture_output() as out:
        ip.run_cell_magic("gpuprofile", "--counters -w 0 -o rep --no-timeline", "y = 2 + 3")
    rep = ip.user_ns["rep"]
    assert rep.notes[0].startswith("--counters: hardware counters in this process")
    assert rep.counters().empty and ip.user_ns["y"] == 5
    assert "--counters:" in out.stdout + str(rep)
    with capture_output() as out:
        r = ip.run_line_magic("gputime", "--counters -o -r 20 1 + 1")
    assert any(n.startswith("--counters:") for n in r.notes)
    with capture_output() as out:
        ip.run_cell_magic("gputime", "--compare --counters -r 10", "1 + 1\n2 + 2")
    assert "--counters: hardware counters in this process" in out.stdout
