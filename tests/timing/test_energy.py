"""Energy per call from NVML's total-energy counter (``timing/energy.py``): the summary of a
counter's readings, what ``%gputime``'s line and ``--compare``'s table say with it, and the NVML
reader faked at the ctypes boundary."""

from __future__ import annotations

import pytest

from gpumagic.timing import TimingOptions, measure, smclock
from gpumagic.timing.compare import compare_compiled
from gpumagic.timing.energy import BLOCK_SECONDS, SETTLE_SECONDS, pieces_of, summarize_energy
from gpumagic.timing.statement import compile_statement
from gpumagic.timing.work import Work

from .conftest import FakeClock, ScriptedSampler


def test_a_steady_board_gives_its_power_and_power_times_the_call():
    pieces = pieces_of([(0.05 * i, 25_000 * i) for i in range(41)])  # 500 W for 2 s, in mJ
    found = summarize_energy(pieces, 2e-3)
    assert found.watts == pytest.approx(500.0) and found.joules_per_call == pytest.approx(1.0)
    assert found.blocks == int(2.0 / BLOCK_SECONDS) and found.rel_ci == pytest.approx(0.0)
    assert found.segment() == "1 J/call \u00b1 0.0% at 500 W"
    assert found.segment(flops_per_call=1.1e12) == "1 J/call \u00b1 0.0% at 500 W, 1.1 TFLOP/J"


def test_a_counter_that_steps_is_read_over_blocks_and_its_spread_is_the_interval():
    # the driver refreshes the counter every 0.1 s and readings come every 0.03 s, so each reading
    # sees it step; the board alternates 400 W and 600 W by half-seconds (mean 500 W)
    energy, last, out = 0.0, 0.0, []
    for i in range(200):
        t = 0.03 * i
        while last + 0.1 <= t:  # each refresh adds the energy of its 0.1 s
            mid = last + 0.05
            energy += (600 if int(mid / 0.5) % 2 else 400) * 0.1 * 1000
            last += 0.1
        out.append((t, int(energy)))
    found = summarize_energy(pieces_of(out), 1e-3)
    assert 450 < found.watts < 550 and found.blocks >= 8
    assert found.rel_ci is not None and 0.01 < found.rel_ci < 0.25
    low, high = found.watts * (1 - found.rel_ci), found.watts * (1 + found.rel_ci)
    assert low < 500 < high


def test_the_first_second_is_left_out_where_enough_follows_it():
    # a board that overshoots to 750 W for its first second, then holds 690 W for 4 s: the
    # steady state is what a repeat gives; a 1.5 s window keeps all of it (too little follows)
    readings, mj = [(0.0, 0)], 0.0
    for i in range(1, 101):
        mj += (750 if i <= 20 else 690) * 0.05 * 1000
        readings.append((0.05 * i, int(mj)))
    found = summarize_energy(pieces_of(readings), 1e-3)
    assert found.settle_s == pytest.approx(SETTLE_SECONDS) and found.watts == pytest.approx(690)
    assert found.rel_ci == pytest.approx(0.0, abs=1e-3)
    short = summarize_energy(pieces_of(readings[:31]), 1e-3)
    assert short.settle_s == 0 and 700 < short.watts < 750


def test_no_reading_a_counter_that_never_moved_or_a_short_window_gives_no_figure():
    assert summarize_energy([], 1e-3) is None
    assert summarize_energy(pieces_of([(0.0, 1000), (1.0, 1000)]), 1e-3) is None
    assert summarize_energy(pieces_of([(0.0, None), (1.0, 5000)]), 1e-3) is None
    short = summarize_energy(pieces_of([(0.0, 0), (0.3, 150_000)]), 1e-3)
    assert short.watts == pytest.approx(500.0) and short.rel_ci is None  # one block: no interval


class Board:
    """One GPU board's energy counter (mJ), advanced by each lane's watts as its work runs."""

    def __init__(self) -> None:
        self.mj = 0.0


class EnergySampler(ScriptedSampler):
    def __init__(self, clock, per_call, board, watts, **kw) -> None:
        super().__init__(clock, per_call, **kw)
        self.board, self.watts = board, watts

    def collect(self, handle):
        self.board.mj += self.watts * sum(handle) * 1000
        return super().collect(handle)

    def energy_counter(self):
        return True

    def energy_mj(self):
        return int(self.board.mj)


def test_gputime_says_joules_per_call_and_power_and_flop_per_joule():
    clock = FakeClock()
    sampler = EnergySampler(clock, lambda i: 2e-3, Board(), 450.0)
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=sampler,
        wall_clock=clock,
    )
    assert r.energy.watts == pytest.approx(450.0, rel=1e-3)
    assert r.energy.joules_per_call == pytest.approx(0.9, rel=1e-3)
    assert "; 900 mJ/call at 450 W;" in r.line()  # 0.12 s of samples: one block, no interval
    summary = r.summary()
    assert summary["energy_per_call"] == pytest.approx(0.9, rel=1e-3)
    assert summary["power_w"] == pytest.approx(450.0, rel=1e-3)
    assert "energy per call" in r._repr_html_()
    r.work = Work(flops=int(9e11))
    assert "1 TFLOP/J" in r.line()


def test_a_gpu_without_an_energy_counter_says_so_in_its_details_and_not_in_the_line():
    clock = FakeClock()

    class NoCounter(ScriptedSampler):
        def energy_counter(self):
            return False

    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=NoCounter(clock, lambda i: 1e-3),
        wall_clock=clock,
    )
    assert r.energy is None and "J/call" not in r.line()
    assert "NVML has no energy counter for this GPU" in r._repr_html_()
    assert r.summary()["energy_per_call"] is None


class FakeNvml:
    """libnvidia-ml's calls the reader makes, answering through the ctypes references it is
    given."""

    def __init__(self, energy_status: int = 0) -> None:
        self.energy_status = energy_status
        self.mj = 123_456

    def nvmlDeviceGetHandleByIndex_v2(self, index, ref):
        return 0

    def nvmlDeviceGetClockInfo(self, handle, kind, ref):
        ref._obj.value = 1980
        return 0

    def nvmlDeviceGetTotalEnergyConsumption(self, handle, ref):
        if self.energy_status == 0:
            ref._obj.value = self.mj
        return self.energy_status


@pytest.mark.parametrize("status, expected", [(0, 123_456), (3, None)])  # 3: NOT_SUPPORTED
def test_the_nvml_reader_reads_the_energy_counter_or_says_there_is_none(
    monkeypatch, status, expected
):
    monkeypatch.setattr(smclock, "_NVML", FakeNvml(status))
    reader = smclock.open_reader(None, 0)
    assert reader.mhz() == 1980 and reader.energy_mj() == expected


def test_energy_option_samples_on_until_the_energy_is_known_to_five_percent():
    clock = FakeClock()
    sampler = EnergySampler(clock, lambda i: 2e-3, Board(), 450.0)
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(energy=True),
        sampler=sampler,
        wall_clock=clock,
    )
    assert r.stop_reason.endswith("; energy known to 5%")
    assert r.energy.blocks >= 4 and r.energy.rel_ci <= 0.05
    assert "900 mJ/call \u00b1 0.0% at 450 W" in r.line()
    plain, _, _ = run_plain(450.0)
    assert len(r.samples) > len(plain.samples)  # the median alone was stable much sooner


def test_energy_that_stays_unknown_stops_at_its_time_and_says_so():
    clock = FakeClock()

    class Stuck(EnergySampler):
        def energy_mj(self):  # a counter that never advances
            return 1000

    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(energy=True, energy_time=1.0),
        sampler=Stuck(clock, lambda i: 2e-3, Board(), 450.0),
        wall_clock=clock,
    )
    assert r.stop_reason.endswith("energy not known to 5% in 1 s") and r.energy is None
    assert 1.0 <= sum(r.samples) * r.calls_per_sample < 1.2


def run_plain(watts: float):
    clock = FakeClock()
    sampler = EnergySampler(clock, lambda i: 2e-3, Board(), watts)
    r = measure(
        compile_statement("pass", globals={}),
        {},
        TimingOptions(),
        sampler=sampler,
        wall_clock=clock,
    )
    return r, sampler, clock


def test_compare_with_energy_gives_each_statement_its_own_joules_from_blocks_of_its_calls():
    # one board; fp32 at 350 W and 4 ms a call against bf16 at 700 W and 1 ms: each statement's
    # J/call is its own power times its own median, read over blocks of its calls alone
    clock, board = FakeClock(), Board()
    samplers = {
        "fp32": EnergySampler(clock, lambda i: 4e-3, board, 350.0),
        "bf16": EnergySampler(clock, lambda i: 1e-3, board, 700.0),
    }
    statements = {k: compile_statement("pass", globals={}) for k in samplers}
    got = compare_compiled(
        statements, {}, TimingOptions(energy=True), samplers=samplers, wall_clock=clock
    )
    fp32, bf16 = got.results["fp32"].energy, got.results["bf16"].energy
    assert fp32.watts == pytest.approx(350.0, rel=1e-3)
    assert bf16.watts == pytest.approx(700.0, rel=1e-3)
    assert fp32.joules_per_call == pytest.approx(1.4, rel=1e-3)
    assert bf16.joules_per_call == pytest.approx(0.7, rel=1e-3)
    assert all(r.stop_reason.endswith("; energy known to 5%") for r in got.results.values())
    text = str(got)
    assert "1.4 J/call" in text and "700 mJ/call" in text
    df = got.to_dataframe().set_index("label")
    assert df.loc["bf16", "energy_per_call"] == pytest.approx(0.7, rel=1e-3)
    # without --energy the table has no joules, and nothing ran beyond the samples
    clock = FakeClock()
    plain = compare_compiled(
        statements,
        {},
        TimingOptions(),
        samplers={k: EnergySampler(clock, lambda i: 1e-3, Board(), 1.0) for k in samplers},
        wall_clock=clock,
    )
    assert all(r.energy is None for r in plain.results.values())
    assert "J/call" not in str(plain)


def test_a_sweep_with_energy_gives_each_point_its_joules_and_a_column_for_them():
    from gpumagic.timing.sweep import run_sweep

    clock, board = FakeClock(), Board()
    watts = {1: 200.0, 2: 400.0}
    got = run_sweep(
        {"s": "pass"},
        None,
        [{"n": 1}, {"n": 2}],
        {},
        TimingOptions(energy=True),
        sampler_for=lambda point, label: EnergySampler(
            clock, lambda i: 1e-3, board, watts[point["n"]]
        ),
        wall_clock=clock,
    )
    df = got.to_dataframe()
    assert list(df["power_w"].round()) == [200.0, 400.0]
    assert list(df["energy_per_call"].round(3)) == [0.2, 0.4]
    text = str(got)
    assert "Energy" in text and "200 mJ/call" in text and "400 mJ/call" in text
    plain = run_sweep({"s": "pass"}, None, [{"n": 1}], {}, TimingOptions(), wall_clock=clock)
    assert "Energy" not in str(plain)
