"""The offline audit and compaction of a data dir (`kgc audit`, `kgc compact`).

The work is partition-local: a group's metadata and offsets live in the same
`__consumer_offsets` partition, so one task per partition (`job.run_partition`) does
everything in Python and returns small results. `runner` runs those tasks in this
process; `spark_engine` hands them to Spark (local mode or a cluster), one Spark task each,
with no shuffle. pyspark is imported only there.
"""
