"""The history store under hostile use: nothing lost, nothing said that is false, nothing of
someone else's changed (issue 57, round 3)."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

from gpumagic.history import saving as recorder_mod
from gpumagic.history.saving import Recorder
from gpumagic.history.store import Store, default_path

from ..helpers import fake_result

pytestmark = pytest.mark.usefixtures("fresh_recorder")


def _count(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM results").fetchone()[0]
    finally:
        conn.close()


def test_a_plain_copy_taken_between_saves_holds_every_result(tmp_path):
    path = tmp_path / "h.sqlite"
    rec = Recorder(str(path))
    for _ in range(3):
        rec.record(fake_result(), "x")
    shutil.copy(path, tmp_path / "copy.sqlite")  # the -wal file left behind, as `cp` does
    assert _count(tmp_path / "copy.sqlite") == 3  # before: no such table: results


def test_a_store_moved_while_open_keeps_its_rows_and_the_move_is_said(tmp_path):
    path = tmp_path / "h.sqlite"
    rec = Recorder(str(path))
    rec.record(fake_result(), "x")
    rec.record(fake_result(), "x")
    os.rename(path, tmp_path / "moved.sqlite")
    out = rec.record(fake_result(), "x")
    assert _count(tmp_path / "moved.sqlite") == 2  # before: 0 (the rows sat in the old -wal)
    assert out.ids == [1] and any("moved, deleted or replaced" in n for n in out.notes)


def test_a_file_written_where_a_store_was_moved_from_is_not_overwritten(tmp_path):
    path = tmp_path / "h.sqlite"
    rec = Recorder(str(path))
    rec.record(fake_result(), "x")
    os.rename(path, tmp_path / "moved.sqlite")
    path.write_text("my notes\n")
    out = rec.record(fake_result(), "x")
    assert path.read_bytes() == b"my notes\n"  # before: SQLite pages appended to it
    assert out.ids == [] and "file is not a database" in out.notes[0]


def test_another_applications_database_is_left_untouched(tmp_path):
    path = tmp_path / "app.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER)")
    conn.commit()
    conn.close()
    out = Recorder(str(path)).record(fake_result(), "x")
    assert out.ids == [] and "not a gpumagic history" in out.notes[0] and "orders" in out.notes[0]
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert tables == ["orders"] and mode == "delete"  # before: results added, switched to WAL


@pytest.mark.parametrize("bad", ["~nosuchuser_gpumagic/h.sqlite", "/tmp/a\0b.sqlite"])
def test_an_unusable_path_is_a_note_never_a_failed_save(bad):
    out = Recorder(bad).record(fake_result(), "x")  # before: RuntimeError / ValueError
    assert out.ids == [] and len(out.notes) == 1 and "not saved" in out.notes[0]


def test_every_unsaved_result_is_said_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "h.sqlite"
    monkeypatch.setattr(Store, "save", _full)
    outs = [Recorder(str(path)).record(fake_result(), "x") for _ in range(4)]  # one per cell
    assert all(o.ids == [] and len(o.notes) == 1 for o in outs)  # before: a note for the first only
    assert all("not saved (database or disk is full" in o.notes[0] for o in outs)


def test_vs_last_never_says_saved_when_nothing_was(tmp_path, monkeypatch):
    path = tmp_path / "h.sqlite"
    Recorder(str(path)).record(fake_result(), "warm the note")
    monkeypatch.setattr(Store, "save", _full)
    Recorder(str(path)).record(fake_result(), "y")  # the full note said once
    out = Recorder(str(path), vs="last").record(fake_result(), "z")
    assert out.ids == [] and not any("this one is saved" in line for line in out.lines)
    assert out.lines == [
        "vs last: no earlier result of this statement on this device; this one is not saved either"
    ]


def _full(self, rows):
    raise sqlite3.OperationalError("database or disk is full")


def test_vs_a_label_on_an_unreadable_store_says_why(tmp_path, monkeypatch):
    path = tmp_path / "h.sqlite"
    Recorder(str(path), label="base").record(fake_result(), "x")
    recorder_mod._STORES.clear()

    def broken(self, *a, **k):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Store, "last_labelled", broken)
    Recorder(str(path), vs="base")  # the note said once
    out = Recorder(str(path), vs="base").record(fake_result(), "x")
    assert out.lines == ["vs base: no comparison, the history could not be read (disk I/O error)"]


def test_a_label_that_looks_like_an_id_is_found_and_hash_n_is_the_id(tmp_path):
    path = tmp_path / "h.sqlite"
    Recorder(str(path)).record(fake_result(), "another statement")  # result #1
    Recorder(str(path), label="1").record(fake_result(), "x")  # result #2, labelled "1"
    assert Recorder(str(path), vs="1").ref["id"] == 2  # before: #1, another statement
    assert Recorder(str(path), vs="#1").ref["id"] == 1


def test_a_relative_xdg_data_home_is_ignored():
    path = default_path({"XDG_DATA_HOME": "relative/data"})
    assert path.is_absolute() and str(path).endswith(".local/share/gpumagic/history.sqlite")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads through file modes"
)
def test_a_store_in_a_read_only_folder_can_be_listed(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    Recorder(str(folder / "h.sqlite")).record(fake_result(), "x")
    recorder_mod._STORES.clear()
    for f in folder.iterdir():
        if f.name != "h.sqlite":
            f.unlink()
    os.chmod(folder, 0o555)
    try:
        assert Store(folder / "h.sqlite", readonly=True).count() == 1
    finally:
        os.chmod(folder, 0o755)
