"""A progress bar of partition tasks, drawn on an interactive terminal only.

`Progress(total)` is called with the number of tasks done so far (by the local map after
each task, by the Spark map as its status tracker reports completed tasks) and redraws one
line on stderr; `close()` ends the line. Off a terminal (a cron job, a log file) it draws
nothing, so logs hold no carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 30


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None, force: bool = False):
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = force or self.stream.isatty()
        self.started = time.monotonic()
        self.done = -1

    def __call__(self, done: int) -> None:
        if not self.enabled or done == self.done:
            return
        self.done = done
        filled = WIDTH * done // max(self.total, 1)
        elapsed = time.monotonic() - self.started
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{self.total} "
                          f"partitions, {elapsed:.0f} s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.done >= 0:
            self.stream.write("\n")
            self.stream.flush()
