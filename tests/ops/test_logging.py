"""Log output: readable lines by default, JSON objects with --log-format json, group-scoped
lines carrying their group id."""

from __future__ import annotations

import io
import json
import logging

import pytest

from coordinator.logging_setup import setup_logging


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_json_lines_lift_the_group_id_into_a_field(restore_root_logger):
    out = io.StringIO()
    setup_logging("DEBUG", "json", out)
    log = logging.getLogger("coordinator.group.join")
    log.debug("[group=%s] JoinGroup refused: %s", "payments", "UNKNOWN_MEMBER_ID")
    log.info("partition %d loaded", 7)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("unexpected")
    scoped, plain, failed = (json.loads(line) for line in out.getvalue().splitlines())
    assert scoped["group"] == "payments" and scoped["message"] == "JoinGroup refused: UNKNOWN_MEMBER_ID"
    assert scoped["level"] == "DEBUG" and scoped["logger"] == "coordinator.group.join" and scoped["ts"].endswith("+00:00")
    assert "group" not in plain and plain["message"] == "partition 7 loaded"
    assert "ValueError: boom" in failed["exception"]


def test_text_is_the_default_and_respects_the_level(restore_root_logger):
    out = io.StringIO()
    setup_logging("INFO", "text", out)
    log = logging.getLogger("coordinator.group.join")
    log.debug("[group=%s] not shown", "g")
    log.info("[group=%s] stable at generation %d", "g", 3)
    (line,) = out.getvalue().splitlines()
    assert line.endswith(" INFO coordinator.group.join: [group=g] stable at generation 3")
