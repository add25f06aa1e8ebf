"""Samplers: one per clock. The orchestrator (:mod:`.measure`) talks only to the :class:`Sampler`
interface, so its logic is tested with a scripted sampler and no clock at all.

A sampler also says what it can do, so the orchestrator never asks which class it holds:

- ``on_device``: it times a GPU, so a kernel-time pass (CUPTI) and a host-issue pass make sense;
- ``supports_graph`` / ``supports_flush_l2``: it can honour ``graph=True`` / ``flush_l2=True`` (the
  host clock cannot: the options are dropped with a note that quotes ``reason``);
- ``reason``: why this clock was chosen, where it is a fallback ("CUDA is not available");
- ``replays_graph``: after :meth:`Sampler.prepare`, one sample unit is one CUDA-graph replay of k
  calls;
- :meth:`Sampler.host_fallback`: the host clock to switch to when the first call shows a CPU
  statement (a device clock chosen only because nothing in the namespace said otherwise), or None
  where the clock is to be kept.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..edges import TorchValue
from .cupti import busy_per_call, gpu_activity_names, record_calls
from .smclock import ClockReader, open_reader

__all__ = ["CudaSampler", "HostSampler", "Sampler"]


class Sampler:
    """A clock that measures batches of calls. Durations are seconds for the whole batch."""

    device: str = "CPU"
    backend: str = "host"
    #: why this clock times the statement, where it is a fallback (quoted in notes about dropped
    #: options)
    reason: str = ""
    #: seconds the profiler's first start took in this process, when this sampler paid for it
    #: (torch.profiler only)
    profiler_startup: float | None = None
    #: which profiler recorded the kernel pass ("cupti" or "torch.profiler"), and why not CUPTI
    #: directly
    kernel_pass_backend: str | None = None
    kernel_pass_fallback: str | None = None
    #: SM clock (MHz) while the kernel pass ran, where the device reports it
    kernel_pass_clock: int | None = None

    # capabilities
    # --------------------------------------------------------------------------------------------
    @property
    def on_device(self) -> bool:
        """Whether this clock times a GPU (so a kernel-time pass and a host-issue pass make
        sense)."""
        return self.backend != "host"

    @property
    def supports_graph(self) -> bool:
        """Whether ``graph=True`` can be honoured (CUDA-graph capture and replay); otherwise it is
        dropped."""
        return self.on_device

    @property
    def supports_flush_l2(self) -> bool:
        """Whether ``flush_l2=True`` can be honoured (a device cache to flush); otherwise it is
        dropped."""
        return self.on_device

    @property
    def replays_graph(self) -> bool:
        """Whether samples are CUDA-graph replays, each of ``calls_per_sample`` calls (set by
        :meth:`prepare`)."""
        return self.backend == "cuda-graph"

    def host_fallback(self, reason: str) -> Sampler | None:
        """The host clock to use instead when the statement turns out to run on the CPU; None to
        keep this one.

        A device clock chosen from the namespace alone (nothing there said CPU) returns a
        :class:`HostSampler`; the host clock itself, and scripted clocks in tests, keep themselves.
        """
        return None

    # measuring
    # ----------------------------------------------------------------------------------------------
    def first_call(self, once: Callable[[], object]) -> tuple[float, object]:
        """Run the statement once, synchronized; return (wall seconds, the statement's value)."""
        raise NotImplementedError

    def batch(self, inner: Callable[[int], None], n: int) -> tuple[float, float]:
        """Run n calls synchronously; return (measured seconds, host seconds spent issuing them)."""
        raise NotImplementedError

    def prepare(self, inner: Callable[[int], None], k: int) -> list[str]:
        """Called once before sampling with the chosen k; returns notes (e.g. a graph-capture
        fallback)."""
        return []

    def start(self, backlog: float) -> None:
        """Begin sampling; ``backlog`` is how much device work to queue ahead of the first
        sample."""

    def enqueue(self, inner: Callable[[int], None], k: int, m: int) -> TorchValue:
        """Issue a round of m samples of k calls each without waiting for them; a handle for
        :meth:`collect` (each clock's own: CUDA events on the device's clock)."""
        raise NotImplementedError

    def collect(self, handle: TorchValue) -> list[float]:  # what enqueue gave
        """Wait for a round issued by :meth:`enqueue`; the duration of each of its samples
        (seconds)."""
        raise NotImplementedError

    def salvage(self, handle: TorchValue) -> list[float]:  # as in collect
        """After an interrupt and :meth:`finish`: the durations of a round that completed, in part
        or whole."""
        try:
            return self.collect(handle)
        except Exception:  # noqa: BLE001 - salvage is best effort
            return []

    def kernel_pass(
        self, inner: Callable[[int], None], calls: int, preload: int = 0
    ) -> tuple[float, float] | None:
        """(busy seconds per call, kernels per call) from a profiler, or None where there is
        none."""
        return None

    def kernel_pass_notes(self) -> list[str]:
        """Sentences about the kernel pass (why a kernel time is missing) for the result."""
        return []

    def host_pass(self, inner: Callable[[int], None], calls: int) -> float:
        """Host seconds per call to issue ``calls`` calls."""
        t0 = time.perf_counter()
        inner(calls)
        return (time.perf_counter() - t0) / calls

    def sm_clock(self) -> int | None:
        """Current SM clock in MHz where the device reports it (NVML), else None."""
        return None

    def clock_reasons(self) -> int | None:
        """NVML's clock-event reason bits now (power cap, thermal, ...), where the device reports
        them."""
        return None

    def energy_mj(self) -> int | None:
        """The device's total-energy counter now (mJ, NVML), where it has one."""
        return None

    def energy_counter(self) -> bool | None:
        """Whether the device has an energy counter: None where NVML does not see the device at
        all (a CPU), False where it sees it without one."""
        return None

    def finish(self) -> None:
        """Wait for everything issued (errors from asynchronous work surface here)."""

    def meta(self) -> dict[str, Any]:  # Any: facts of several types, for JSON
        """Facts about the clock and device for ``TimingResult.meta`` (versions, device index)."""
        return {}


class HostSampler(Sampler):
    """``time.perf_counter`` around each sample: CPU code, or no CUDA."""

    def __init__(self, reason: str = "") -> None:
        self.device = "CPU"
        self.backend = "host"
        self.reason = reason

    def first_call(self, once: Callable[[], object]) -> tuple[float, object]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        t0 = time.perf_counter()
        value = once()
        return time.perf_counter() - t0, value

    def batch(self, inner: Callable[[int], None], n: int) -> tuple[float, float]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        t0 = time.perf_counter()
        inner(n)
        dt = time.perf_counter() - t0
        return dt, dt

    def enqueue(self, inner: Callable[[int], None], k: int, m: int) -> _HostRound:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        return _HostRound(inner, k, m)

    def collect(self, handle: _HostRound) -> list[float]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        inner, k, done = handle.inner, handle.k, handle.done
        clock = time.perf_counter
        for _ in range(handle.m - len(done)):
            t0 = clock()
            inner(k)
            done.append(clock() - t0)
        return done

    def salvage(self, handle: _HostRound) -> list[float]:
        return handle.done


@dataclass
class _HostRound:
    """A round on the host clock, which has no queue to fill: the round runs when it is collected,
    sample by sample (``done``: the seconds of each so far), so an interrupt keeps the samples
    already taken."""

    inner: Callable[[int], None]
    k: int
    m: int
    done: list[float] = field(default_factory=list)


#: Cycles per second of ``torch.cuda._sleep``, per device index, measured once per process (0.0:
#: unusable).
_SLEEP_CYCLES_PER_SECOND: dict[int, float] = {}


class CudaSampler(Sampler):
    """CUDA events on the current stream of ``device``; optional L2 flush or CUDA-graph replay.

    The ``TorchValue`` in this class are torch's: devices, events, graphs, tensors (torch is
    imported when a CUDA clock is made, never by this module)."""

    def __init__(self, device: TorchValue, flush_l2: bool = False, graph: bool = False) -> None:
        import torch

        self.torch = torch
        self.dev = torch.device(device)
        if self.dev.index is None:
            self.dev = torch.device("cuda", torch.cuda.current_device())
        props = torch.cuda.get_device_properties(self.dev)
        self.device = props.name
        self.props = props
        self.stream = torch.cuda.current_stream(self.dev)
        self.flush_l2 = flush_l2
        self.use_graph = graph
        self.graph: TorchValue = None
        self.backend = "cuda-events"
        self._flush_buffer: TorchValue = None
        self._boundary: TorchValue = None
        self.profiler_startup: float | None = None
        self._kernel_pass_notes: list[str] = []
        self._clock_reader: ClockReader | None = None
        self._clock_opened = False  # NVML is asked once, on the first clock read

    # helpers
    # ----------------------------------------------------------------------------------------------
    def _event(self) -> TorchValue:
        e = self.torch.cuda.Event(enable_timing=True)
        e.record(self.stream)
        return e

    def _sync(self) -> None:
        self.torch.cuda.synchronize(self.dev)

    def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        rate = self._sleep_rate()
        if rate:
            with self.torch.cuda.stream(self.stream):
                self.torch.cuda._sleep(int(seconds * rate))

    def _sleep_rate(self) -> float | None:
        """Cycles per second of ``torch.cuda._sleep`` on this device, measured once per process."""
        idx = self.dev.index
        if idx not in _SLEEP_CYCLES_PER_SECOND:
            try:
                with self.torch.cuda.device(self.dev), self.torch.cuda.stream(self.stream):
                    self.torch.cuda._sleep(1000)
                    start = self._event()
                    self.torch.cuda._sleep(5_000_000)
                    end = self._event()
                end.synchronize()
                _SLEEP_CYCLES_PER_SECOND[idx] = 5_000_000 / (start.elapsed_time(end) * 1e-3)
            except (RuntimeError, AttributeError, ZeroDivisionError):
                _SLEEP_CYCLES_PER_SECOND[idx] = 0.0
        return _SLEEP_CYCLES_PER_SECOND[idx] or None

    # interface
    # ----------------------------------------------------------------------------------------------
    def host_fallback(self, reason: str) -> Sampler | None:
        return HostSampler(reason)

    def first_call(self, once: Callable[[], object]) -> tuple[float, object]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        self._sync()
        t0 = time.perf_counter()
        value = once()
        self._sync()
        return time.perf_counter() - t0, value

    def batch(self, inner: Callable[[int], None], n: int) -> tuple[float, float]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        start = self._event()
        t0 = time.perf_counter()
        inner(n)
        host = time.perf_counter() - t0
        end = self._event()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3, host

    def prepare(self, inner: Callable[[int], None], k: int) -> list[str]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        notes: list[str] = []
        if self.flush_l2:
            # Twice the L2 size: a memset of exactly L2 bytes can leave lines of the working set
            # resident.
            size = 2 * int(getattr(self.props, "L2_cache_size", 0) or 64 * 2**20)
            self._flush_buffer = self.torch.empty(size, dtype=self.torch.uint8, device=self.dev)
        if self.use_graph:
            blocker = self._sync_inside(inner, k)
            if blocker:
                notes.append(
                    f"--graph: the statement synchronizes with the host ({blocker}), which a "
                    f"CUDA graph cannot "
                    "capture; timed without a graph."
                )
                return notes
            graph = self.torch.cuda.CUDAGraph()
            try:
                self._sync()
                with self.torch.cuda.graph(graph):
                    inner(k)
                graph.replay()
                self._sync()
            except Exception as exc:  # noqa: BLE001 - any capture failure means: time without a graph
                try:
                    self._sync()
                except Exception:  # noqa: BLE001
                    pass
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                notes.append(
                    f"--graph: the statement cannot be captured in a CUDA graph ({first}); "
                    f"timed without a graph."
                )
            else:
                self.graph = graph
                self.backend = "cuda-graph"
        return notes

    def _sync_inside(self, inner: Callable[[int], None], k: int) -> str | None:
        """Run the calls once with synchronizing operations turned into errors; the error text, if
        any.

        A capture that fails half-way leaves PyTorch's RNG and allocator in capture state ("Offset
        increment outside graph capture"), so statements that would fail are screened out before
        capturing.
        """
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        torch = self.torch
        previous = torch.cuda.get_sync_debug_mode()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Synchronization debug mode is a prototype feature"
            torch.cuda.set_sync_debug_mode("error")
        try:
            inner(k)
        except RuntimeError as exc:
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        finally:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.cuda.set_sync_debug_mode(previous)
        self._sync()
        return None

    def start(self, backlog: float) -> None:
        self._sync()
        self._sleep(backlog)
        self._boundary = self._event()

    def enqueue(
        self, inner: Callable[[int], None], k: int, m: int
    ) -> list[tuple[TorchValue, TorchValue]]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        pairs = []
        for _ in range(m):
            if self.flush_l2:
                self._flush_buffer.zero_()
                start = self._event()
            else:
                start = self._boundary
            if self.graph is not None:
                self.graph.replay()
            else:
                inner(k)
            end = self._event()
            pairs.append((start, end))
            self._boundary = end
        return pairs

    def collect(self, handle: list[tuple[TorchValue, TorchValue]]) -> list[float]:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        handle[-1][1].synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in handle]

    def kernel_pass(
        self, inner: Callable[[int], None], calls: int, preload: int = 0
    ) -> tuple[float, float] | None:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        exclude: frozenset[str] = frozenset()
        run = inner
        if self.graph is not None:
            graph = self.graph

            def replay(n: int) -> None:  # a unit is one replay of calls_per_sample calls
                for _ in range(n):
                    graph.replay()

            run = replay
        elif self.flush_l2:
            # The kernel time must be the cold-cache one the samples measure: flush before each call
            # here too, and leave the flush's own activity out by name.
            buf = self._flush_buffer
            exclude = gpu_activity_names(buf.zero_)
            preload = 0

            def flushed(n: int) -> None:
                for _ in range(n):
                    buf.zero_()
                    inner(1)

            run = flushed
        rec = record_calls(self._clocked(run), calls, preload)
        self.kernel_pass_backend, self.kernel_pass_fallback = rec.backend, rec.fallback
        if rec.startup is not None:
            self.profiler_startup = rec.startup
        found = busy_per_call(rec, calls, self.dev.index, exclude)
        if found is None and exclude:
            self._kernel_pass_notes.append(
                "GPU kernel time not reported with --flush-l2: the statement's kernels share "
                "a name with the flush."
            )
        return found

    def _clocked(self, run: Callable[[int], None]) -> Callable[[int], None]:
        """``run`` that reads the SM clock right after issuing its calls, while the GPU runs them:
        the clock the kernel pass ran at (:attr:`kernel_pass_clock`, the last reading: the captured
        calls')."""

        def clocked(n: int) -> None:
            run(n)
            self.kernel_pass_clock = self.sm_clock()

        return clocked

    def kernel_pass_notes(self) -> list[str]:
        return list(self._kernel_pass_notes)

    def host_pass(self, inner: Callable[[int], None], calls: int) -> float:
        __tracebackhide__ = True  # an error of the user's statement shows from their own code
        self._sync()
        t0 = time.perf_counter()
        inner(calls)
        host = time.perf_counter() - t0
        self._sync()
        return host / calls

    def finish(self) -> None:
        self._sync()

    def _clocks(self) -> ClockReader | None:
        if not self._clock_opened:
            uuid = getattr(self.props, "uuid", None)
            try:
                self._clock_reader = open_reader(str(uuid) if uuid else None, self.dev.index or 0)
            except Exception:  # noqa: BLE001 - no NVML: clocks are not reported
                self._clock_reader = None
            self._clock_opened = True
        return self._clock_reader

    def sm_clock(self) -> int | None:
        reader = self._clocks()
        return reader.mhz() if reader is not None else None

    def clock_reasons(self) -> int | None:
        reader = self._clocks()
        return reader.reasons() if reader is not None else None

    def energy_mj(self) -> int | None:
        reader = self._clocks()
        return reader.energy_mj() if reader is not None else None

    def energy_counter(self) -> bool | None:
        reader = self._clocks()
        return None if reader is None else reader.energy_mj() is not None

    def meta(self) -> dict[str, Any]:
        torch = self.torch
        return {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "device_index": self.dev.index,
            "sm_count": self.props.multi_processor_count,
            **(
                {"kernel_pass_backend": self.kernel_pass_backend}
                if self.kernel_pass_backend
                else {}
            ),
        }
