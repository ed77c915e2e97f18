"""One module per workload of issue 6; each `run(ctx)` starts its own targets and
returns figures named the same way on every target."""
