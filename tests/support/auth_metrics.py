"""What kgc's metrics say about logins: kgc_authentications_total by mechanism and outcome."""

from __future__ import annotations

from coordinator import metrics


def auth_count(mechanism: str, outcome: str) -> float:
    labels = {"mechanism": mechanism, "outcome": outcome}
    return metrics.REGISTRY.get_sample_value("kgc_authentications_total", labels) or 0.0
