"""A Future that can also call back in the very call that settles it.

An asyncio Future schedules each done-callback for a later turn of the loop. A commit
under `--fsync always` is answered through a chain of them (the batch's durable
future, the request's future, the response frame's future), one loop turn each after
the writer thread's answer, while the client waits. `EagerFuture.when_done` callbacks
run inside `set_result` / `set_exception` / `cancel` instead, so that chain runs
through in the callback that hears of the fsync.

Only code written for it registers with `when_done` (a callback that tolerates running
inside whatever settled the future); `add_done_callback` and `await` keep asyncio's
scheduling. A `when_done` callback that raises is reported to the loop's exception
handler, as asyncio reports a failing done-callback, and does not stop the others or the
code that settled the future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class EagerFuture(asyncio.Future):
    __slots__ = ("_eager",)

    def __init__(self, loop: asyncio.AbstractEventLoop):
        super().__init__(loop=loop)
        self._eager: list[Callable[[EagerFuture], Any]] = []

    def when_done(self, callback: Callable[[EagerFuture], Any]) -> None:
        """Call `callback(self)` as soon as this future is done: now if it already is."""
        if self.done():
            self._call(callback)
        else:
            self._eager.append(callback)

    def set_result(self, result: Any) -> None:
        super().set_result(result)
        self._settled()

    def set_exception(self, exception: Any) -> None:
        super().set_exception(exception)
        self._settled()

    def cancel(self, msg: Any = None) -> bool:
        if not super().cancel(msg):
            return False
        self._settled()
        return True

    def _settled(self) -> None:
        callbacks, self._eager = self._eager, []
        for callback in callbacks:
            self._call(callback)

    def _call(self, callback: Callable[[EagerFuture], Any]) -> None:
        try:
            callback(self)
        except Exception as exc:
            self.get_loop().call_exception_handler({
                "message": f"Exception in when_done callback {callback!r}", "exception": exc, "future": self})
