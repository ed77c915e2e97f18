"""The replicated store: group state in a compacted topic on the upstream cluster (DESIGN.md §7)."""
