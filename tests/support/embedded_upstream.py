"""kgc's embedded upstream as its log announces it (the Tansu broker's pid, node id and
address), kgc's log read whole, and whether a process (that broker) still runs."""

from __future__ import annotations

import re

EMBEDDED_LINE = re.compile(r"embedded upstream: Tansu broker \(pid (\d+), node (\d+)\) on (\S+), memory storage")


def log_text(path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def process_exists(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit may wait for a reaper in a container)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
