"""The broker kgc answers as: FindCoordinator names it for every group, and the listeners'
Metadata answers list it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    node_id: int
    host: str
    port: int
