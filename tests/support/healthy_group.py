"""A real kgc with a healthy classic group on it: the watcher the hostile-request tests keep
beside each attack, to show it affects its own group at most."""

from __future__ import annotations

import contextlib

from tests.support.kgc import running_kgc
from tests.support.wire_client import RawMember, WireClient


@contextlib.asynccontextmanager
async def kgc_with_healthy_group(group: str = "healthy"):
    """kgc in this process, and `group` Stable on it with one raw member: yields (app, member)."""
    async with running_kgc() as app:
        client = await WireClient.open(app.port, "healthy")
        healthy = RawMember(client, group)
        await healthy.until_stable()
        try:
            yield app, healthy
        finally:
            client.close()
