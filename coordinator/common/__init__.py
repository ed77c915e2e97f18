"""What the runtime and the group state machines agree on, one layer below both (Kafka's
`coordinator-common`): the `Result` a handler returns (`result.py`) and the `Timer` it
schedules with (`timer.py`). The runtime runs shards through these and knows no group type.
"""
