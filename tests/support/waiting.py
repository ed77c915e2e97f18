"""Bounded polling for tests that wait on something happening over real sockets."""

from __future__ import annotations

import asyncio
import time


async def wait_until(predicate, timeout_s: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
