"""kgc's HTTP endpoints for tests: /metrics parsed with prometheus-client's parser, and JSON answers."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

import aiohttp
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.metrics import REGISTRY


@dataclass(frozen=True)
class Samples:
    values: dict[tuple[str, frozenset], float]

    @classmethod
    def parse(cls, text: str) -> Samples:
        return cls({(s.name, frozenset(s.labels.items())): s.value
                    for family in text_string_to_metric_families(text) for s in family.samples})

    def get(self, name: str, **labels: str) -> float:
        """The sample's value; 0 for a labelled child not created yet."""
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum over every sample of `name` carrying these labels (others free)."""
        wanted = set(labels.items())
        return sum(v for (n, have), v in self.values.items() if n == name and wanted <= have)

    def names(self) -> set[str]:
        return {name for name, _ in self.values}


def metrics_of(http_port: int) -> Samples:
    """A kgc process's /metrics, over blocking HTTP (for tests outside an event loop)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as response:
        return Samples.parse(response.read().decode())


def in_process() -> Samples:
    """The registry as it stands, without HTTP (for a baseline before a server starts)."""
    return Samples.parse(generate_latest(REGISTRY).decode())


async def get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


async def get_json(port: int, path: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.json()


async def scrape(port: int) -> Samples:
    status, text = await get(port, "/metrics")
    assert status == 200, text
    return Samples.parse(text)


