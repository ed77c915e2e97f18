"""Bounded polling for tests that wait on what another task, thread or process does."""

from __future__ import annotations

import asyncio
import time


async def wait_until(predicate, timeout_s: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
