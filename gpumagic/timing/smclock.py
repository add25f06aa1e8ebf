"""The SM clock of a GPU (and its energy counter), read through NVML, and what a series of clock
readings says about it.

Why: under sustained fp16/bf16 GEMMs an H100 at its 700 W cap drops its SM clock from 1980 MHz to
1065-1470 MHz, and the same matmul reads 1.69 ms and 1.64 ms a second apart. A figure that is to be
repeatable has to say at which clock it was taken. NVML answers in tens of microseconds, so the
clock can be read once per round of samples.

The reader talks to ``libnvidia-ml.so.1`` through ctypes (the library ships with the driver,
wherever CUDA runs; ``pynvml`` is the same calls and may not be installed). Anything missing (no
driver library, a device NVML cannot find, a call that fails) makes :func:`open_reader` return None:
clocks are then simply not reported.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import stats

__all__ = ["ClockReader", "ClockSummary", "open_reader", "reason_words", "summarize_clocks"]

#: NVML_CLOCK_SM
_NVML_CLOCK_SM = 1
#: NVML clock-event ("throttle") reason bits that explain a lower clock, in the words the line uses.
_REASONS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal",
    0x40: "thermal",
    0x80: "power brake",
}

#: Clock readings within this fraction of the prevailing clock count as taken at it.
PREVAILING_BAND = 0.02
#: A clock that moved more than this fraction over a run (highest vs lowest reading) has moved.
CLOCK_MOVED = 0.03


class ClockReader:
    """Reads one device's SM clock (MHz) and its clock-event reasons; every call is cheap and never
    raises."""

    def __init__(
        self,
        read_mhz: Callable[[], int | None],
        read_reasons: Callable[[], int | None],
        read_energy: Callable[[], int | None] = lambda: None,
    ) -> None:
        self._read_mhz = read_mhz
        self._read_reasons = read_reasons
        self._read_energy = read_energy

    def mhz(self) -> int | None:
        try:
            value = self._read_mhz()
        except Exception:  # noqa: BLE001 - a clock that cannot be read is not reported
            return None
        return int(value) if value else None

    def reasons(self) -> int | None:
        try:
            return self._read_reasons()
        except Exception:  # noqa: BLE001
            return None

    def energy_mj(self) -> int | None:
        """The board's total energy since the driver loaded (mJ, NVML), or None where the GPU
        has no such counter (older GPUs, some unified-memory devices)."""
        try:
            return self._read_energy()
        except Exception:  # noqa: BLE001 - an unread counter is not reported
            return None


_NVML: ctypes.CDLL | None = None  # the NVML library loaded through ctypes
_NVML_FAILED = False


def _nvml() -> ctypes.CDLL | None:
    """The NVML library, initialised once per process; None where there is none."""
    global _NVML, _NVML_FAILED
    if _NVML is not None or _NVML_FAILED:
        return _NVML
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        init = getattr(lib, "nvmlInit_v2", None) or lib.nvmlInit
        if init() != 0:
            raise OSError("nvmlInit failed")
    except (OSError, AttributeError):
        _NVML_FAILED = True
        return None
    _NVML = lib
    return lib


def _handle(lib: ctypes.CDLL, uuid: str | None, index: int) -> ctypes.c_void_p | None:
    handle = ctypes.c_void_p()
    if uuid:
        text = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        if lib.nvmlDeviceGetHandleByUUID(text.encode(), ctypes.byref(handle)) == 0:
            return handle
    get = getattr(lib, "nvmlDeviceGetHandleByIndex_v2", None) or lib.nvmlDeviceGetHandleByIndex
    if get(ctypes.c_uint(index), ctypes.byref(handle)) == 0:
        return handle
    return None


def open_reader(uuid: str | None, index: int) -> ClockReader | None:
    """A reader of the SM clock of the device with this UUID (as torch reports it), else NVML index
    ``index``.

    The UUID is preferred because ``CUDA_VISIBLE_DEVICES`` renumbers devices for CUDA but not for
    NVML.
    """
    lib = _nvml()
    if lib is None:
        return None
    try:
        handle = _handle(lib, uuid, index)
    except (OSError, AttributeError):
        return None
    if handle is None:
        return None

    def read_mhz() -> int | None:
        value = ctypes.c_uint()
        return (
            value.value
            if lib.nvmlDeviceGetClockInfo(handle, _NVML_CLOCK_SM, ctypes.byref(value)) == 0
            else None
        )

    def read_reasons() -> int | None:
        value = ctypes.c_ulonglong()
        get = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        if get is None:
            return None
        return value.value if get(handle, ctypes.byref(value)) == 0 else None

    def read_energy() -> int | None:
        value = ctypes.c_ulonglong()
        get = getattr(lib, "nvmlDeviceGetTotalEnergyConsumption", None)
        if get is None:
            return None
        return value.value if get(handle, ctypes.byref(value)) == 0 else None

    reader = ClockReader(read_mhz, read_reasons, read_energy)
    return reader if reader.mhz() is not None else None


def reason_words(bits: int | None) -> list[str]:
    """The clock-event reasons set in ``bits`` that explain a lower clock, in words, each once."""
    words: list[str] = []
    for bit, word in _REASONS.items():
        if bits and bits & bit and word not in words:
            words.append(word)
    return words


@dataclass(frozen=True)
class ClockSummary:
    """What the SM clock did while the samples were taken.

    ``low``/``high``: the lowest and highest reading; ``prevailing``: the clock most samples were
    taken at (the median reading of the second half, where a sustained load has settled);
    ``prevailing_median``: the median of the samples taken within ``PREVAILING_BAND`` of it (None
    when too few were); ``prevailing_samples``: how many.
    """

    low: int
    high: int
    prevailing: int
    prevailing_median: float | None
    prevailing_samples: int

    @property
    def moved(self) -> float:
        """How far the clock moved, as a fraction of the highest reading."""
        return (self.high - self.low) / self.high if self.high else 0.0

    @property
    def has_moved(self) -> bool:
        return self.moved > CLOCK_MOVED


def summarize_clocks(
    samples: Sequence[float], clocks: Sequence[int | None], min_samples: int = 5
) -> ClockSummary | None:
    """Summarize the clock readings taken beside ``samples`` (one reading per sample, None where
    none was read).

    None when fewer than two samples carry a reading. The prevailing clock is the median reading of
    the second half of the readings: a GPU under sustained load ends at the clock it holds, and the
    first samples are the ones taken while it was still falling.
    """
    pairs = [(s, c) for s, c in zip(samples, clocks) if c]
    if len(pairs) < 2:
        return None
    readings = [c for _, c in pairs]
    prevailing = round(stats.median(readings[len(readings) // 2 :]))
    near = [s for s, c in pairs if abs(c - prevailing) <= PREVAILING_BAND * prevailing]
    return ClockSummary(
        low=min(readings),
        high=max(readings),
        prevailing=prevailing,
        prevailing_median=stats.median(near) if len(near) >= min_samples else None,
        prevailing_samples=len(near),
    )
