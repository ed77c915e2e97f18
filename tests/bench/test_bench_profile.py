"""Folding py-spy's raw stacks into hot spots."""

from __future__ import annotations

from coordinator.bench.profile import hot_spots, render

RAW = """\
<module> (spin.py:9);outer (spin.py:8);inner (spin.py:4) 90
<module> (spin.py:9);outer (spin.py:8);inner (spin.py:5) 6
<module> (spin.py:9);outer (spin.py:8) 4
garbage line
"""


def test_samples_fold_by_function_across_lines_and_files(tmp_path):
    first, second = tmp_path / "a.raw", tmp_path / "b.raw"
    first.write_text(RAW)
    second.write_text("<module> (spin.py:9);helper (/x/lib/python3.11/json/encoder.py:200) 100\n")
    first.with_suffix(".seconds").write_text("2.0\n")
    spots = hot_spots([first, second])
    assert spots.samples == 200
    assert spots.seconds == 2.0
    assert spots.self_time == [("helper (json/encoder.py)", 100), ("inner (spin.py)", 96), ("outer (spin.py)", 4)]
    assert dict(spots.inclusive)["<module> (spin.py)"] == 200
    assert dict(spots.inclusive)["outer (spin.py)"] == 100
    text = render("heartbeat", spots)
    assert "48.0% | `inner (spin.py)`" in text
    assert "busy 40% of 2 s" in text


def test_frames_below_the_event_loop_are_left_out_and_its_own_time_is_named(tmp_path):
    raw = tmp_path / "loop.raw"
    raw.write_text("main (coordinator/cli.py:1);run (asyncio/runners.py:118) 30\n"
                   "main (coordinator/cli.py:1);run (asyncio/runners.py:118);handle (coordinator/service/group_coordinator.py:9) 70\n")
    spots = hot_spots([raw])
    assert spots.self_time == [("handle (coordinator/service/group_coordinator.py)", 70),
                               ("[event loop itself: uvloop's C code, socket I/O, scheduling]", 30)]
    assert "main (coordinator/cli.py)" not in dict(spots.inclusive)
