"""The warning about groups holding offsets of a topic the upstream does not have: at once on
the first refresh (kgc restarted over an upstream that lost its topics), else only for a
topic missing from two refreshes in a row, since a deletion kgc sees takes the offsets in
between (service/deleted_topics.py)."""

import logging

from coordinator.gateway.log_ends import LogEnds

WARNING = "groups g have committed offsets for topic {}, which the upstream does not have"


def refreshed(log_ends: LogEnds, missing: set[str], committed_by: dict[str, set[str]]) -> None:
    log_ends.missing_topics = set(missing)
    log_ends.warn_missing(committed_by)


def test_the_first_refresh_warns_at_once_later_ones_after_two_in_a_row(caplog):
    caplog.set_level(logging.WARNING)
    log_ends = LogEnds(cluster=None)   # warn_missing asks the upstream nothing
    refreshed(log_ends, {"lost"}, {"lost": {"g"}})
    assert WARNING.format("lost") in caplog.text

    refreshed(log_ends, {"lost", "deleted"}, {"lost": {"g"}, "deleted": {"g"}})
    assert WARNING.format("deleted") not in caplog.text
    refreshed(log_ends, {"lost", "deleted"}, {"lost": {"g"}})      # kgc deleted its offsets meanwhile
    assert WARNING.format("deleted") not in caplog.text

    refreshed(log_ends, {"lost", "kept"}, {"lost": {"g"}, "kept": {"g"}})
    refreshed(log_ends, {"lost", "kept"}, {"lost": {"g"}, "kept": {"g"}})
    assert WARNING.format("kept") in caplog.text
    assert caplog.text.count(WARNING.format("lost")) == 1          # once per topic
