"""Every setting of gpumagic, as traitlets so that ``%config GpuMagics.<name> = value`` changes it.

The defaults themselves are written once, in the core's option dataclasses (``TimingOptions`` and
``StopRule`` for ``%gputime``, the capture and report options for ``%%gpuprofile``), which scripts
use directly; each trait here reads its default from there. The traits live on a plain
``Configurable`` that the IPython magics class inherits from, and the methods below turn the current
settings back into the core's options.

Every numeric setting is checked when it is set (a ``traitlets.TraitError`` that names the setting,
the range and the default), so a bad value is refused by ``%config`` itself instead of failing a
later run after its work is done. The timing settings use the core's own bounds
(:data:`gpumagic.timing.options.BOUNDS`).
"""

from __future__ import annotations

import warnings
from copy import deepcopy
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from traitlets import Bool, Float, Int, TraitError, TraitType, Unicode, validate
from traitlets.config import Config, Configurable

from ..capture.options import WARMUP, NcuOptions, NsysOptions
from ..errors import InvalidOptionError
from ..render.options import ReportOptions
from ..timing.options import BOUNDS, Bounds, TimingOptions
from ..timing.stats import StopRule

if TYPE_CHECKING:
    from traitlets.utils.bunch import Bunch

_Options = TypeVar("_Options", TimingOptions, NsysOptions, NcuOptions, ReportOptions)

#: The ``%%gpuprofile`` settings' bounds (the timing settings' are the core's :data:`BOUNDS`, by the
#: same names).
PROFILE_BOUNDS = {
    "profile_warmup": Bounds(0, whole=True, what="runs of the cell before the capture"),
    "profile_top": Bounds(1, whole=True, what="rows per table"),
    "timeline_max_glyphs": Bounds(1, whole=True, what="events drawn per timeline lane"),
    "nsys_timeout": Bounds(0, strict=True, what="seconds"),
    "ncu_top": Bounds(0, whole=True, what="kernels profiled (0: every kernel in the cell)"),
    "ncu_timeout": Bounds(0, strict=True, what="seconds"),
}


def _same_names(*names: str) -> dict[str, str]:
    """Fields filled by the settings of the same names."""
    return {name: name for name in names}


#: The setting each option field is read from, per options class: the one place that ties a
#: ``%config`` setting to the core option it fills (each trait reads its default from that field).
#: The stop rule's settings fill ``TimingOptions.stop_rule``.
_SETTING_OF: dict[type, dict[str, str]] = {
    TimingOptions: _same_names(
        "warmup_time",
        "min_warmup_calls",
        "time_budget",
        "target_sample_time",
        "kernel_time",
        "work",
        "steady",
        "steady_time",
        "first_call_ratio",
        "precision",
    ),
    StopRule: _same_names("min_samples", "min_time", "rel_ci", "rel_drift"),
    NsysOptions: {
        "nsys_path": "nsys_path",
        "profile_dir": "profile_dir",
        "trace": "nsys_trace",
        "timeout": "nsys_timeout",
        "warm": "nsys_warm_child",
    },
    NcuOptions: {
        "ncu_path": "ncu_path",
        "profile_dir": "profile_dir",
        "top": "ncu_top",
        "timeout": "ncu_timeout",
        "clock_control": "ncu_clock_control",
        "early_start": "ncu_early_start",
    },
    ReportOptions: {"top": "profile_top", "max_glyphs_per_lane": "timeline_max_glyphs"},
}
#: Text settings whose empty value stands for the option's None (the binary is then looked up on
#: PATH and in the usual install locations).
_EMPTY_IS_NONE = {"nsys_path", "ncu_path"}
#: The timing settings checked against the core's :data:`BOUNDS` (the traits of the same names).
_TIMING_TRAITS = tuple(
    name
    for name in (*_SETTING_OF[TimingOptions].values(), *_SETTING_OF[StopRule].values())
    if name in BOUNDS
)

__all__ = ["GpuMagicsConfig"]


class GpuMagicsConfig(Configurable):
    """Settings of ``%gputime`` and ``%%gpuprofile``."""

    warmup_time = Float(
        TimingOptions.warmup_time,
        help="Seconds of device time to warm up for before sampling (at least "
        "min_warmup_calls calls).",
    ).tag(config=True)
    min_warmup_calls = Int(
        TimingOptions.min_warmup_calls, help="Warm-up calls at least, whatever warmup_time says."
    ).tag(config=True)
    time_budget = Float(
        TimingOptions.time_budget,
        help="Seconds of sampling after which %gputime stops even if the median is not yet stable.",
    ).tag(config=True)
    target_sample_time = Float(
        TimingOptions.target_sample_time,
        help="Seconds one sample should last; calls per sample are chosen for it (CUDA "
        "events resolve ~0.5 µs).",
    ).tag(config=True)
    min_samples = Int(
        StopRule.min_samples, help="Samples at least before the stop rule may stop."
    ).tag(config=True)
    min_time = Float(
        StopRule.min_time, help="Seconds of measured time at least before the stop rule may stop."
    ).tag(config=True)
    rel_ci = Float(
        StopRule.rel_ci,
        help="Stop once the 95% confidence interval of the median is within ± this fraction of it.",
    ).tag(config=True)
    rel_drift = Float(
        StopRule.rel_drift,
        help="... and the medians of the first and second half of the samples agree within "
        "this fraction.",
    ).tag(config=True)
    kernel_time = Bool(
        TimingOptions.kernel_time,
        help="Measure GPU kernel time per call with the profiler (CUPTI) in a short extra pass.",
    ).tag(config=True)
    work = Bool(
        TimingOptions.work,
        help="Count one call's FLOPs and bytes (one extra call, untimed) to show FLOP/s, "
        "GB/s and the share of peak.",
    ).tag(config=True)
    steady = Bool(
        TimingOptions.steady,
        help="Before sampling, run the statement until the GPU's clock has settled (as "
        "%gputime --steady).",
    ).tag(config=True)
    steady_time = Float(
        TimingOptions.steady_time,
        help="Seconds --steady runs at most while waiting for the clock to settle.",
    ).tag(config=True)
    first_call_ratio = Float(
        TimingOptions.first_call_ratio,
        help="Report the first call when it took more than this many times the median.",
    ).tag(config=True)
    precision = Int(TimingOptions.precision, help="Significant digits in printed times.").tag(
        config=True
    )
    profile_warmup = Int(
        WARMUP, help="%%gpuprofile: runs of the cell before the capture (lazy init, autotuning)."
    ).tag(config=True)
    profile_top = Int(
        ReportOptions.top, help="%%gpuprofile: rows in the kernel and other tables."
    ).tag(config=True)
    nsys_path = Unicode(
        NsysOptions.nsys_path or "",
        help="%%gpuprofile --nsys: the nsys binary (default: PATH, then the usual install "
        "locations).",
    ).tag(config=True)
    profile_dir = Unicode(
        NsysOptions.profile_dir,
        help="%%gpuprofile --nsys: where the .nsys-rep and .sqlite files are kept.",
    ).tag(config=True)
    nsys_trace = Unicode(NsysOptions.trace, help="%%gpuprofile --nsys: what nsys traces (-t).").tag(
        config=True
    )
    nsys_timeout = Float(
        NsysOptions.timeout, help="%%gpuprofile --nsys: seconds before the nsys run is stopped."
    ).tag(config=True)
    nsys_warm_child = Bool(
        NsysOptions.warm,
        help="%%gpuprofile --nsys: keep one child under nsys per kernel and reuse it for later "
        "--nsys cells (False: each cell starts nsys, Python and CUDA afresh).",
    ).tag(config=True)
    ncu_path = Unicode(
        NcuOptions.ncu_path or "",
        help="%%gpuprofile --ncu: the ncu binary (default: PATH, then the usual install "
        "locations).",
    ).tag(config=True)
    ncu_top = Int(
        NcuOptions.top,
        help="%%gpuprofile --ncu: kernels profiled, the top ones by GPU time (0: every kernel).",
    ).tag(config=True)
    ncu_timeout = Float(
        NcuOptions.timeout, help="%%gpuprofile --ncu: seconds before the ncu run is stopped."
    ).tag(config=True)
    ncu_early_start = Bool(
        NcuOptions.early_start,
        help="%%gpuprofile --ncu: start the profiled process beside the first pass (it profiles "
        "every kernel where the first pass saw no more than ncu_top names; False: start it after).",
    ).tag(config=True)
    ncu_clock_control = Unicode(
        NcuOptions.clock_control,
        help="%%gpuprofile --ncu: 'base' (ncu locks clocks to base) or 'none'.",
    ).tag(config=True)
    history = Unicode(
        None,
        allow_none=True,
        help="%gputime, %%gpuprofile: the history file every result and profile is saved to "
        "(SQLite). Unset: "
        "$GPUMAGIC_HISTORY, else "
        "$XDG_DATA_HOME/gpumagic/history.sqlite (~/.local/share/...); '' (or 'off') turns "
        "the history off.",
    ).tag(config=True)
    timeline_max_glyphs = Int(
        ReportOptions.max_glyphs_per_lane,
        help="%%gpuprofile: events per timeline lane before they are merged into time buckets.",
    ).tag(config=True)

    @validate(*_TIMING_TRAITS, *PROFILE_BOUNDS)
    def _check_bounds(self, proposal: Bunch) -> float:
        """Refuse a value outside its setting's bounds when it is set, naming the setting, the range
        and the default."""
        name: str = proposal["trait"].name
        value: float = proposal["value"]
        try:
            _bounds(name).check(name, value)
        except InvalidOptionError as exc:
            default = proposal["trait"].default_value
            raise TraitError(f"GpuMagics.{exc}; the default is {default!r}") from None
        return value

    #: Whether construction is over: until then an out-of-bounds value from the config is ignored,
    #: not raised.
    _settled = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._settled = True

    def _load_config(
        self,
        cfg: Config,
        section_names: list[str] | None = None,
        traits: dict[str, TraitType[Any, Any]] | None = None,
    ) -> None:
        """Load settings from a config; while the extension loads, a value outside its bounds is
        dropped with a warning (the default stays) instead of failing the load.

        IPython's ``%config`` hands the new value to every configurable, and the others keep it in
        the shell's config even when this one refuses it: without this, a refused value would make
        the next ``%reload_ext gpumagic`` fail. A value from ``ipython_config.py`` is treated the
        same way.
        """
        if not self._settled:
            cfg = self._within_bounds(cfg)
        super()._load_config(cfg, section_names=section_names, traits=traits)

    def _within_bounds(self, cfg: Config) -> Config:
        cfg = deepcopy(cfg)
        for section in self.section_names():
            values = cfg.get(section, {})
            for name in [n for n in values if n in PROFILE_BOUNDS or n in _TIMING_TRAITS]:
                try:
                    _bounds(name).check(name, values[name])
                except InvalidOptionError as exc:
                    default = self.trait_defaults(name)
                    warnings.warn(
                        f"GpuMagics.{exc}; ignored, the default {default!r} is used", stacklevel=2
                    )
                    del values[name]
        return cfg

    def timing_options(self, **overrides: Any) -> TimingOptions:
        """TimingOptions from the current settings, with per-call ``overrides`` (None values are
        ignored)."""
        stop_rule = StopRule(**self._settings_of(StopRule))
        base = TimingOptions(**self._settings_of(TimingOptions), stop_rule=stop_rule)
        return _with_overrides(base, overrides)

    def nsys_options(self, **overrides: Any) -> NsysOptions:
        """NsysOptions from the current settings, with per-call ``overrides`` (None values are
        ignored)."""
        return _with_overrides(NsysOptions(**self._settings_of(NsysOptions)), overrides)

    def ncu_options(self, **overrides: Any) -> NcuOptions:
        """NcuOptions from the current settings, with per-call ``overrides`` (None values are
        ignored)."""
        return _with_overrides(NcuOptions(**self._settings_of(NcuOptions)), overrides)

    def report_options(self, **overrides: Any) -> ReportOptions:
        """ReportOptions from the current settings, with per-call ``overrides`` (None values are
        ignored)."""
        return _with_overrides(ReportOptions(**self._settings_of(ReportOptions)), overrides)

    def _settings_of(self, options: type) -> dict[str, Any]:
        """The current settings as keyword arguments of ``options``, by :data:`_SETTING_OF`: every
        options class is built from the settings by this one rule."""
        return {
            field: _option_value(name, getattr(self, name))
            for field, name in _SETTING_OF[options].items()
        }


def _with_overrides(base: _Options, overrides: dict[str, Any]) -> _Options:
    """``base`` with the per-call ``overrides`` that were given (None: not given, keep the
    setting)."""
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def _option_value(
    name: str, value: bool | int | float | str | None
) -> bool | int | float | str | None:
    """Setting ``name``'s ``value`` as its option takes it: an empty path is the option's None."""
    return None if name in _EMPTY_IS_NONE and not value else value


def _bounds(name: str) -> Bounds:
    """The valid range of setting ``name``."""
    return PROFILE_BOUNDS.get(name) or BOUNDS[name]
