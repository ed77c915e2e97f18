"""A background job that runs every interval until told to stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def run_every(interval_ms: int, stopping: asyncio.Event, step: Callable[[], Awaitable[object]],
                    what: str) -> None:
    """Waits an interval, runs `step`, repeats; returns as soon as `stopping` is set. A
    failed step is logged and tried again next interval: a background job must not die."""
    while not stopping.is_set():
        try:
            await asyncio.wait_for(stopping.wait(), interval_ms / 1000)
            return
        except TimeoutError:
            pass
        try:
            await step()
        except Exception:
            log.exception("%s failed", what)
