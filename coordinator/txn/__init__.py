"""Exactly-once clients through kgc: TxnOffsetCommit with a participant partition upstream
(research/eos.md; docs/exactly-once.md)."""
