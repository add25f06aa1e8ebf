"""Allocator snapshots with fields of the wrong type or size: refused naming the file, and a device
index the snapshot does not have refused (issue 57, round 3)."""

from __future__ import annotations

import pickle

import pytest

import gpumagic
from gpumagic.capture.memory.snapshot import SnapshotFormatError
from gpumagic.errors import InvalidOptionError


def _snapshot(**fields):
    block = {"address": 0, "size": 512, "state": "active_allocated", "frames": []}
    segment = {"device": 0, "address": 0, "total_size": 1024, "blocks": [block], "stream": 0}
    segment.update(segment_type="large", allocated_size=512, active_size=512, requested_size=512)
    alloc = {"action": "alloc", "addr": 0, "size": 512, "stream": 0, "time_us": 1, "frames": []}
    return {"segments": [segment], "device_traces": [[alloc]], **fields}


def _write(tmp_path, data):
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(data))
    return path


def test_a_device_the_snapshot_does_not_have_is_refused(tmp_path):
    path = _write(tmp_path, _snapshot())
    with pytest.raises(InvalidOptionError, match="none of the snapshot's devices"):
        gpumagic.load_memory_snapshot(path, device=-1)  # read the last and called it "device -1"


@pytest.mark.parametrize(
    "fields",
    [
        {"segments": 5},
        {"segments": [{"device": "gpu0", "blocks": []}]},
        {"device_traces": [[{"action": "alloc", "addr": 0, "size": 2**70, "time_us": 1}]]},
    ],
    ids=["segments-an-int", "device-gpu0", "size-2**70"],
)
def test_fields_of_the_wrong_type_or_size_name_the_file(tmp_path, fields):
    path = _write(tmp_path, _snapshot(**fields))
    with pytest.raises(SnapshotFormatError) as err:  # was TypeError / ValueError / OverflowError
        gpumagic.load_memory_snapshot(path)
    assert str(path) in str(err.value)
