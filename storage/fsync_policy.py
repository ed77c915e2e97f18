"""When a written batch counts as durable: the one place that knows the fsync policy.

- `always` (default): a batch is durable once an fsync that covers it has returned.
  Group commit makes this cheap: one fsync releases every batch written with it.
- `interval:<ms>`: a batch is durable once it is written to the OS; the writer fsyncs at
  most every <ms> (and within <ms> of the last write). The operator accepts losing up to
  that window of acknowledged writes if the machine (not just the process) dies.
- `never`: a batch is durable once it is written to the OS; the write path never
  fsyncs. A process crash loses nothing, a machine crash may lose anything not yet
  flushed by the kernel.

Whatever the policy, a segment is fsynced when it is closed (segment roll, store
close), so only the active segment can ever have a torn tail.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FsyncMode(enum.Enum):
    ALWAYS = "always"
    INTERVAL = "interval"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class FsyncPolicy:
    mode: FsyncMode
    interval_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        name, colon, argument = text.strip().partition(":")
        if name == "always" and not colon:
            return cls(FsyncMode.ALWAYS)
        if name == "never" and not colon:
            return cls(FsyncMode.NEVER)
        if name == "interval" and argument.strip().isdigit() and int(argument) > 0:
            return cls(FsyncMode.INTERVAL, int(argument))
        raise ValueError(
            f"bad fsync policy {text!r}: expected 'always', 'never' or 'interval:<ms>' with ms > 0")

    def fsync_with_write(self, ms_since_fsync: float) -> bool:
        """Whether the write about to happen is followed by an fsync before its batches
        are released."""
        if self.mode is FsyncMode.ALWAYS:
            return True
        return self.mode is FsyncMode.INTERVAL and ms_since_fsync >= self.interval_ms

    def deferred_fsync_in_ms(self, ms_since_fsync: float) -> float | None:
        """How long after the last fsync written-but-unsynced data may wait (None: forever)."""
        if self.mode is FsyncMode.INTERVAL:
            return max(0.0, self.interval_ms - ms_since_fsync)
        return None

    def __str__(self) -> str:
        return f"interval:{self.interval_ms}" if self.mode is FsyncMode.INTERVAL else self.mode.value
