"""The wall clock in milliseconds: what stamps records and what the service's timers read.

The lowest layer that needs it owns it, so the runtime, the offline tools and the stores
share one definition; tests inject their own clock instead.
"""

import time


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
