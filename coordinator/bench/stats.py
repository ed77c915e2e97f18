"""What a workload reports: figures, and the latency samples behind percentiles."""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Figure:
    metric: str            # the same name on every target, so figures can be paired
    value: float | None    # None: not measured on this target (the note says why)
    unit: str
    better: str            # "lower" or "higher"
    config: str = ""       # the target's configuration for this figure
    note: str = ""


def not_measured(metric: str, unit: str, better: str, reason: str, config: str = "") -> Figure:
    return Figure(metric, None, unit, better, config, f"n/a: {reason}")


class Latencies:
    """Round-trip times in nanoseconds; percentiles by nearest rank, in milliseconds."""

    def __init__(self) -> None:
        self._ns = array("q")

    def add(self, ns: int) -> None:
        self._ns.append(ns)

    def __len__(self) -> int:
        return len(self._ns)

    def percentile_ms(self, p: float) -> float | None:
        if not self._ns:
            return None
        ordered = sorted(self._ns)
        rank = max(0, math.ceil(p / 100 * len(ordered)) - 1)
        return ordered[rank] / 1e6


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
