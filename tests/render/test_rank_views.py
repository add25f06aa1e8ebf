"""Views of a job of many ranks: the rank x figure heatmap, the short per-rank table, and the
timeline that shows the straggler's and the fastest rank's lanes with the others a click away.
Checked on a 64-rank trace built by hand, where every expected figure comes from how it was built
(the numbers below), not from gpumagic."""

# ruff: noqa: E501 (the JavaScript run in the page is carried as a string: its lines are its own)

from __future__ import annotations

import json
import re

import pytest

from gpumagic.render import embed
from gpumagic.render.options import MANY_RANKS
from gpumagic.render.rank_heatmap import COLUMNS, heatmap_values, rank_heatmap_figure
from gpumagic.render.ranks_view import featured_ranks
from gpumagic.render.report import ProfileReport
from gpumagic.render.timeline import _stacked, timeline_figure
from gpumagic.trace import Trace, frame
from gpumagic.units import format_time

from ..helpers import headless_chromium, needs_chromium

ALL_REDUCE = (
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
)
GEMM = (
    "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas"
)
SLOW = 17  # three times the compute of every other rank: the others wait for it in the all-reduce
OVERLAP = 3  # this rank runs a 500 µs kernel beside its all-reduce
GAP, TAIL, BESIDE = 100_000, 300_000, 500_000
HEAT_TITLE = "Per rank: each column on its own scale"


def offset(r: int, n: int) -> int:
    return ((r * 29) % n) * 5_000  # when rank r's first kernel starts (launch skew)


def dur(r: int, n: int) -> int:
    return 3_000_000 if r == SLOW else 1_000_000 + ((r * 37 + 13) % n) * 1_000


def job(n: int = 64, per: int = 3) -> tuple[Trace, dict]:
    """``n`` ranks on 8 GPUs a host: ``per`` GEMMs each, back to back with GAP between them, then
    one all-reduce that every rank enters when its GEMMs end and leaves TAIL after the last one
    entered. (the trace, its numbers)."""
    rows, marks, ends = [], [], {}
    for r in range(n):
        t = offset(r, n)
        for k in range(per):
            rows.append(
                dict(
                    name=GEMM,
                    start=t,
                    end=t + dur(r, n),
                    device=r % 8,
                    stream=7,
                    correlation=k,
                    pid=5000 + r,
                )
            )
            t += dur(r, n) + GAP
        ends[r] = t - GAP
        marks.append({"pid": 5000 + r, "rank": r, "local_rank": r % 8, "world": n})
    end = max(ends.values()) + TAIL
    for r in range(n):
        rows.append(
            dict(
                name=ALL_REDUCE,
                start=ends[r],
                end=end,
                device=r % 8,
                stream=20,
                correlation=999,
                pid=5000 + r,
            )
        )
    if n > OVERLAP:
        beside = dict(
            name=GEMM, start=ends[OVERLAP] + GAP, end=ends[OVERLAP] + GAP + BESIDE, stream=8
        )
        rows.append(dict(beside, device=OVERLAP % 8, correlation=998, pid=5000 + OVERLAP))
    nccl = {r: end - ends[r] for r in range(n)}
    fastest = max(range(n), key=lambda r: (nccl[r], -r))  # the most NCCL time, the first such rank
    return Trace(kernels=frame("kernels", rows), meta={"rank_marks": marks}), {
        "end": end,
        "ends": ends,
        "nccl": nccl,
        "fastest": fastest,
    }


@pytest.fixture(scope="module")
def ranks64() -> tuple[Trace, dict]:
    return job(64)


def expected(r: int, n: int, facts: dict) -> dict[str, float]:
    end, e = facts["end"], facts["ends"][r]
    span = end - offset(r, n)
    shortest = min(end - offset(q, n) for q in range(n))
    nccl = end - e
    beside = BESIDE if r == OVERLAP else 0
    busy = per_rank_compute(r, n) + nccl
    return {
        "busy": busy / span,
        "nccl": nccl / busy,
        "exposed": (nccl - beside) / span,
        "skew": span / shortest - 1,
    }


def per_rank_compute(r: int, n: int) -> int:
    return 3 * dur(
        r, n
    )  # the GEMMs do not overlap one another; the one beside the all-reduce is inside it


def test_the_featured_ranks_are_the_straggler_and_the_rank_that_waited_longest(ranks64):
    t, facts = ranks64
    assert featured_ranks(t) == {"straggler": f"rank {SLOW}", "fastest": f"rank {facts['fastest']}"}
    assert facts["fastest"] != SLOW


def test_the_heatmap_has_a_row_per_rank_and_a_column_per_figure_with_the_built_values(ranks64):
    t, facts = ranks64
    values = heatmap_values(t)
    assert list(values.index) == [f"rank {r}" for r in range(64)]
    for r in (SLOW, OVERLAP):
        want = expected(r, 64, facts)
        for key, _, _ in COLUMNS:
            assert values.loc[f"rank {r}", key] == pytest.approx(want[key], rel=1e-9), (r, key)
    assert (
        expected(OVERLAP, 64, facts)["exposed"] < expected(OVERLAP, 64, facts)["nccl"]
    )  # the overlap counts
    fig = rank_heatmap_figure(t, featured_ranks(t))
    data = fig.renderers[0].data_source.data
    assert len(data["x"]) == 64 * 4 and len(set(data["x"])) == 4 and len(set(data["y"])) == 64
    cell = {
        (row, x): (v, text)
        for row, x, v, text in zip(data["row"], data["x"], data["value"], data["text"])
    }
    assert cell[(f"rank {SLOW}", 0)][0] == f"{expected(SLOW, 64, facts)['busy']:.0%}"
    assert cell[(f"rank {SLOW}", 1)][0] == f"{expected(SLOW, 64, facts)['nccl']:.0%}"
    nccl = facts["nccl"][OVERLAP]
    said = (
        f"{format_time((nccl - BESIDE) * 1e-9)} of its {format_time(nccl * 1e-9)} NCCL ran "
        f"with no other kernel"
    )
    assert cell[(f"rank {OVERLAP}", 2)][1].startswith(said)
    labels = fig.yaxis[0].major_label_overrides
    assert labels[SLOW] == f"rank {SLOW} \u00b7 straggler" and labels[facts["fastest"]].endswith(
        "fastest"
    )
    assert fig.height < 1000  # 64 rows shrink to fit


def test_the_heatmap_thins_its_labels_at_256_ranks():
    t, _ = job(256, per=1)
    fig = rank_heatmap_figure(t, {"straggler": f"rank {SLOW}"})
    ticks = list(fig.yaxis[0].ticker.ticks)
    assert SLOW in ticks and 40 <= len(ticks) <= 80 and fig.height < 1000
    assert len(fig.renderers) == 1  # no values written in cells 3.5 px tall


def test_the_report_shows_the_heatmap_above_a_short_table(ranks64):
    t, facts = ranks64
    rep = ProfileReport(t, label="step")
    html = rep.html("page")
    assert HEAT_TITLE in html and html.index(HEAT_TITLE) < html.index("class='gm-ranks'")
    table = html[html.index("class='gm-ranks'") :]
    table = table[: table.index("</table>")]
    least = sorted(range(64), key=lambda r: (facts["nccl"][r], r))
    shown = {SLOW, facts["fastest"], *least[:3], *least[-3:]}
    assert re.findall(r">(rank \d+)", table) == [f"rank {r}" for r in sorted(shown)]
    assert f"rank {SLOW} \u00b7 straggler" in table
    assert f"Showing {len(shown)} of 64 rows" in html and f"{64 - len(shown)} left out" in html
    assert len(rep.rank_figures()) == 64
    kernels = html[html.index("gm-kernels-by-rank") :]
    assert (
        kernels.count("<tr>") < 20 and "other ranks:" in kernels
    )  # a row per featured rank and end, not 64
    assert HEAT_TITLE not in ProfileReport(t, label="step").html(
        None
    )  # no figures asked for: none drawn


def test_the_timeline_shows_the_straggler_and_the_fastest_rank_and_hides_the_others(ranks64):
    t, facts = ranks64
    fig = timeline_figure(t)
    ranks = {}
    for r in fig.renderers:
        if r.name:
            ranks.setdefault(r.name, []).append(r)
    assert set(ranks) == {f"rank {r}" for r in range(64)}  # every rank is there
    shown = {f"rank {SLOW}", f"rank {facts['fastest']}"}
    assert {name for name, rs in ranks.items() if all(r.visible for r in rs)} == shown
    assert all(not r.visible for name, rs in ranks.items() if name not in shown for r in rs)
    tops = {name: max(max(r.data_source.data["top"]) for r in rs) for name, rs in ranks.items()}
    assert (
        tops[f"rank {SLOW}"]
        > tops[f"rank {facts['fastest']}"]
        > max(tops[n] for n in ranks if n not in shown)
    )
    legend = [lg for lg in fig.below if getattr(lg, "click_policy", None) == "hide"]
    assert len(legend) == 1 and len(legend[0].items) == 64
    assert fig.y_range.start > min(
        min(r.data_source.data["bottom"]) for rs in ranks.values() for r in rs
    )


def test_the_report_of_64_ranks_stays_small():
    t, _ = job(64, per=500)  # 32,000 GEMMs: the hidden ranks' lanes are bucketed
    rep = ProfileReport(t, label="step")
    embed.ONCE.forget()
    notebook = len(rep.html("notebook").encode())  # what a notebook stores: BokehJS (~1.5 MB) once
    page = len(rep.html("page").encode())  # without BokehJS
    embed.ONCE.forget()
    assert notebook < 3_000_000 and page < 1_500_000, (notebook, page)


@pytest.mark.parametrize("n", [2, MANY_RANKS])
def test_a_few_ranks_render_as_before(n):
    t, _ = job(n)
    rep = ProfileReport(t, label="step")
    assert rep.featured_ranks == {}
    html = rep.html("page")
    assert HEAT_TITLE not in html
    assert "gm-ranks-left-out" not in html
    fig = timeline_figure(t)
    assert fig.renderers and all(r.visible for r in fig.renderers) and not fig.below[1:]
    assert (
        len(re.findall(r"<tr>", html[html.index("class='gm-ranks'") :].split("</table>")[0]))
        == n + 1
    )


def test_one_rank_past_the_threshold_gets_the_many_rank_views():
    t, _ = job(MANY_RANKS + 1)
    assert HEAT_TITLE in ProfileReport(t, label="step").html("page")


_CLICK = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var doc = Bokeh.documents[Bokeh.documents.length - 1], legend = null, plot = null;
  doc.all_models.forEach(function (m) {
    if (m.click_policy === 'hide') legend = m;
    if (m.y_range && m.renderers && m.renderers.length > 64) plot = m;
  });
  var five = legend.items.filter(function (it) { return it.label.value === '5'; })[0].renderers;
  five.forEach(function (r) { r.visible = !r.visible; });  // what a click on "5" in the legend does
  setTimeout(function () {  // CustomJS runs asynchronously
    console.log('RESULT ' + JSON.stringify({top: Math.max.apply(null, Array.from(five[0].data_source.data.top)),
      ticks: Array.from(plot.left[0].ticker.ticks).length, start: plot.y_range.start, height: plot.height}));
  }, 500);
}, 1500); });
</script></body>"""


@needs_chromium
def test_showing_a_rank_in_the_browser_stacks_its_lanes_under_the_shown_ones(ranks64, tmp_path):
    t, facts = ranks64
    page = tmp_path / "ranks.html"
    ProfileReport(t, label="step").save_html(page)
    page.write_text(page.read_text(encoding="utf-8").replace("</body>", _CLICK), encoding="utf-8")
    log = headless_chromium(page, tmp_path / "p", "--dump-dom").stderr
    found = re.search(r'RESULT (\{.*?\})"', log)
    assert found, log[-3000:]
    got = json.loads(found.group(1).replace('\\"', '"'))
    order = [f"rank {SLOW}", f"rank {facts['fastest']}", "rank 5"]
    rows, _, _, _, bands, _ = _stacked(t, 2500, order)  # where rank 5 goes when it is shown third
    assert got["top"] == pytest.approx(rows.loc[rows["rank"] == "rank 5", "top"].max())
    assert got["ticks"] == 6 and got["start"] == pytest.approx(min(bands[2][1], -0.5))


def test_findings_at_64_ranks_give_extremes_not_a_figure_per_rank(ranks64):
    from gpumagic.analysis import findings

    trace, _ = ranks64
    f = {x.kind: x for x in findings(trace)}
    slow = f["straggler"]
    assert slow.numbers["rank"] == "rank 17"
    assert "the other 63 ranks" in slow.message and slow.message.count("rank ") < 12
    top = f["top_kernels"].message
    assert "more ranks (the per-rank kernel table has them)" in top and top.count("rank ") < 12
    assert all(len(x.message) < 1200 for x in f.values()), [len(x.message) for x in f.values()]
