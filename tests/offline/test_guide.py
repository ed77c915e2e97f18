"""Every finding type is explained (what it means, what to do) and has a kind; durations
and sizes in the report read as a person would write them."""

from __future__ import annotations

from coordinator.offline.findings import INTEGRITY_TYPES, UPSTREAM_TYPES, FindingType
from coordinator.offline.guide import GUIDES, HYGIENE, INTEGRITY, UPSTREAM, human_bytes, human_detail, kind_of


def test_every_finding_type_has_a_guide_and_a_kind():
    assert set(GUIDES) == set(FindingType)
    assert {t for t in FindingType if kind_of(t) == INTEGRITY} == INTEGRITY_TYPES
    assert {t for t in FindingType if kind_of(t) == UPSTREAM} == UPSTREAM_TYPES
    assert kind_of(FindingType.OFFSET_REGRESSION) == HYGIENE


def test_human_units():
    assert human_detail("expired by 604800000 ms retention") == "expired by 7 d retention"
    assert human_detail("empty for 93784 s") == "empty for 1 d 2 h"
    assert human_detail("need 9 bytes at 4, have 5") == "need 9 bytes at 4, have 5"
    assert human_detail("took 1500 ms") == "took 1.5 s"
    assert (human_bytes(999), human_bytes(12_345_678)) == ("999 B", "12.3 MB")
