"""Failures inside the state machine that are bugs or corruption, never client errors."""

from __future__ import annotations


class CorruptStateError(RuntimeError):
    """A replayed record breaks an invariant (e.g. a tombstone for a group with members).

    The runtime fails the partition: its log and its state no longer agree.
    """
