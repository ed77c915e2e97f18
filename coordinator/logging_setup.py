"""Log output for `kgc`: human-readable lines by default, one JSON object per line with
`--log-format json`.

Group-scoped messages start with `[group=<id>]`, as Kafka's coordinator logs do; the JSON form lifts the id
into a `group` field, so a log pipeline can select one group's lines without parsing
messages.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import TextIO

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# One of the processes of `kgc serve --processes N`: which one says each line.
PROCESS_TEXT_FORMAT = "%(asctime)s %(levelname)s [process {process}] %(name)s: %(message)s"
_GROUP_PREFIX = re.compile(r"\[group=(?P<group>[^\]]*)\]\s*")


class JsonFormatter(logging.Formatter):
    def __init__(self, process: int | None = None):
        super().__init__()
        self._process = process

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        if self._process is not None:
            entry["process"] = self._process
        scoped = _GROUP_PREFIX.match(message)
        if scoped is not None:
            entry["group"] = scoped["group"]
            message = message[scoped.end():]
        entry["message"] = message
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str, log_format: str, stream: TextIO = sys.stderr, *, process: int | None = None) -> None:
    handler = logging.StreamHandler(stream)
    text = TEXT_FORMAT if process is None else PROCESS_TEXT_FORMAT.format(process=process)
    handler.setFormatter(JsonFormatter(process) if log_format == "json" else logging.Formatter(text))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
