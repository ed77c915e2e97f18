"""EagerFuture: `when_done` callbacks run inside the call that settles the future."""

from __future__ import annotations

import asyncio

import pytest

from storage.eager_future import EagerFuture


async def test_when_done_runs_inside_set_result_before_any_loop_turn():
    fut = EagerFuture(asyncio.get_running_loop())
    heard: list[object] = []
    fut.when_done(lambda f: heard.append(("eager", f.result())))
    fut.add_done_callback(lambda f: heard.append("scheduled"))
    fut.set_result(7)
    assert heard == [("eager", 7)]          # the asyncio callback waits for the loop
    await asyncio.sleep(0)
    assert heard == [("eager", 7), "scheduled"]
    assert await fut == 7


@pytest.mark.parametrize("settle", ["exception", "cancel"])
async def test_when_done_runs_on_failure_and_on_cancel(settle):
    fut = EagerFuture(asyncio.get_running_loop())
    heard: list[EagerFuture] = []
    fut.when_done(heard.append)
    if settle == "exception":
        fut.set_exception(OSError("disk"))
        fut.exception()
    else:
        assert fut.cancel()
        assert not fut.cancel()             # a second cancel settles nothing: no second call
    assert heard == [fut]


async def test_when_done_on_a_done_future_runs_at_once():
    fut = EagerFuture(asyncio.get_running_loop())
    fut.set_result("x")
    heard: list[str] = []
    fut.when_done(lambda f: heard.append(f.result()))
    assert heard == ["x"]


async def test_a_failing_callback_is_reported_and_stops_neither_the_others_nor_the_settler():
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        fut = EagerFuture(loop)
        heard: list[int] = []

        def boom(_f):
            raise RuntimeError("callback bug")
        fut.when_done(boom)
        fut.when_done(lambda f: heard.append(f.result()))
        fut.set_result(3)                   # does not raise
        assert heard == [3]
        assert [type(c["exception"]) for c in reported] == [RuntimeError]
    finally:
        loop.set_exception_handler(None)
