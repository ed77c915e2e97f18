"""`LoopTimer`'s deadline heap: one loop handle per partition, entries moved rather than copied.

The behaviour tests (expiry enqueued on the partition, reschedule after expiry wins,
cancel on unload) are in test_runtime.py; these pin what the heap adds: ordering, a later
reschedule that only moves the deadline, an earlier one that re-arms, and a heap that stays
bounded under heartbeats and cancels.
"""

from __future__ import annotations

import asyncio

import pytest

from coordinator.common.result import Result
from coordinator.runtime.loop_timer import LoopTimer, TimerEntry


def _op(tag: str):
    return lambda: Result(response=tag)


def _timer(expired: list[TimerEntry]) -> LoopTimer:
    return LoopTimer(asyncio.get_running_loop(), lambda t, entry: expired.append(entry))


@pytest.mark.looptime
async def test_expiries_come_in_deadline_order_not_schedule_order():
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    timer.schedule("c", 3_000, _op("c"))
    timer.schedule("a", 1_000, _op("a"))
    timer.schedule("b", 2_000, _op("b"))
    await asyncio.sleep(3.5)
    assert [e.key for e in expired] == ["a", "b", "c"]


@pytest.mark.looptime
async def test_a_later_reschedule_moves_the_deadline_and_runs_the_newest_op():
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    timer.schedule("heartbeat-g-m", 1_000, _op("old"))
    for _ in range(5):
        await asyncio.sleep(0.5)
        timer.schedule("heartbeat-g-m", 1_000, _op("new"))
    assert len(timer._heap) == 1    # moved in place, not pushed again
    await asyncio.sleep(0.9)
    assert expired == []
    await asyncio.sleep(0.2)
    [entry] = expired
    op = timer.claim(entry)
    assert op is not None and op().response == "new"


@pytest.mark.looptime
async def test_a_reschedule_under_an_equal_key_keeps_the_newer_key_object():
    # A member takes over the timer of its pending id with a key of its own: the timer must
    # let go of the pending key (and the id strings in it), not keep it as the dict key.
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    pending_key = ("heartbeat", "g", "".join(["m", "-1"]))
    member_key = ("heartbeat", "g", "m-1")
    assert pending_key == member_key and pending_key is not member_key
    timer.schedule(pending_key, 1_000, _op("pending"))
    timer.schedule(member_key, 2_000, _op("member"))
    assert [k for k in timer._entries if k is member_key] == [member_key]
    await asyncio.sleep(2.1)
    [entry] = expired
    op = timer.claim(entry)
    assert entry.key is member_key and op is not None and op().response == "member"


@pytest.mark.looptime
async def test_an_earlier_reschedule_rearms_the_loop_handle():
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    timer.schedule(("join", "g"), 10_000, _op("late"))
    timer.schedule(("join", "g"), 1_000, _op("early"))
    await asyncio.sleep(1.1)
    [entry] = expired
    op = timer.claim(entry)
    assert op is not None and op().response == "early"
    await asyncio.sleep(10)
    assert len(expired) == 1


@pytest.mark.looptime
async def test_a_cancelled_timer_never_expires_and_drops_its_op():
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    timer.schedule("a", 1_000, _op("a"))
    timer.schedule("b", 2_000, _op("b"))
    timer.cancel("a")
    await asyncio.sleep(2.5)
    assert [e.key for e in expired] == ["b"]
    assert not timer.is_scheduled("a")


@pytest.mark.looptime
async def test_heartbeats_and_cancels_do_not_grow_the_heap():
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    for round_ in range(50):
        for i in range(100):
            timer.schedule(f"heartbeat-g-{i}", 6_000, _op("hb"))
        for i in range(100, 200):
            timer.schedule(f"heartbeat-g-{i}-{round_}", 6_000, _op("short-lived"))
            timer.cancel(f"heartbeat-g-{i}-{round_}")
        await asyncio.sleep(0.1)
    assert len(timer) == 100
    assert len(timer._heap) <= 2 * 100 + 64
    await asyncio.sleep(7)
    assert sorted(e.key for e in expired) == sorted(f"heartbeat-g-{i}" for i in range(100))


@pytest.mark.looptime
async def test_cancel_all_disarms_the_loop_handle():
    expired: list[TimerEntry] = []
    timer = _timer(expired)
    timer.schedule("a", 1_000, _op("a"))
    timer.cancel_all()
    await asyncio.sleep(2)
    assert expired == [] and len(timer) == 0
