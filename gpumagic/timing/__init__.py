"""Device-correct timing of a statement -> :class:`TimingResult`: the engine behind ``%gputime``. No
IPython import.

The modules, in the order a measurement uses them:

- :mod:`.options`: :class:`TimingOptions`, every knob and the one place each timing default is
  written;
- :mod:`.clocks`: which clock times a statement (:func:`choose_sampler`, from where its tensors
  live);
- :mod:`.samplers`: the clocks (:class:`HostSampler`, :class:`CudaSampler`) behind one
  :class:`Sampler` interface that also declares what each can do;
- :mod:`.measure`: the steps (first call, calibrate, sample, kernel pass, host pass, assemble);
  :mod:`.staged` strings them together: :func:`measure`, :func:`gputime` for scripts, and the halves
  a comparison and a sweep use; :mod:`.steps`, what the steps hand each other;
- :mod:`.steady`: ``steady=True``, running until the GPU's clock settles; :mod:`.smclock`, the SM
  clock (NVML);
- :mod:`.passes`: the kernel pass and the host pass;
- :mod:`.cupti`: GPU busy time per call from the activity records of a pass (and the accuracy
  benchmark's two truths); the records come from :mod:`gpumagic.gpu_activity`: CUPTI directly,
  torch.profiler as the fallback;
- :mod:`.result`: :class:`TimingResult`, the samples and the one line that describes them.
"""

from __future__ import annotations

from .clocks import choose_sampler, tensor_devices
from .cupti import busy_per_call, gpu_activity_names, record_calls, span_and_busy_per_call
from .options import TimingOptions
from .result import TimingResult
from .samplers import CudaSampler, HostSampler, Sampler
from .staged import gputime, measure

__all__ = [
    "CudaSampler",
    "HostSampler",
    "Sampler",
    "TimingOptions",
    "TimingResult",
    "busy_per_call",
    "choose_sampler",
    "gpu_activity_names",
    "gputime",
    "measure",
    "record_calls",
    "span_and_busy_per_call",
    "tensor_devices",
]
