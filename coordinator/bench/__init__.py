"""kgc bench: a load generator that speaks the group protocol itself, and a driver that
runs the same workloads against kgc and against another coordinator (the Tansu broker's
own) in one invocation, with medians and kgc/other ratios.

    python -m coordinator.bench compare            # kgc vs Tansu, every workload, 3 repeats
    python -m coordinator.bench run --target HOST:PORT --workloads heartbeat,commit

Layout: `wire` (connection), `messages` (requests at fixed versions), `member` (a
simulated consumer), `targets` (starting and stopping coordinators), `workloads/` (one
module per figure family), `compare` (the driver), `report` (Markdown), `cli`.
"""
