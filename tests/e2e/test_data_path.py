"""Bulk data through kgc: 100 MB from an idempotent acks=all producer to a consumer, both
bootstrapped against kgc. `transfer` fails unless every record is acknowledged and then
fetched exactly once, in order per partition. Throughput is measured by
`python -m tests.e2e.throughput`, only logged here."""

from __future__ import annotations

import logging
import os

import pytest

from tests.e2e.throughput import transfer

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

# 100 MB takes about 15 s here; KGC_E2E_TRANSFER_MB makes it smaller (or larger) on demand.
TRANSFER_MB = float(os.environ.get("KGC_E2E_TRANSFER_MB", "100"))


def test_100_mb_through_kgc_arrive_complete_and_in_order_per_partition(kgc):
    result = transfer(kgc.bootstrap, TRANSFER_MB)
    log.info("%d records (%.0f MB) through kgc: produce %.1f MB/s, fetch %.1f MB/s", result.records,
             result.payload_bytes / 2**20, result.produce_mb_s, result.fetch_mb_s)
