"""What an audit of a topic keeps for the next one, and where `kgc audit --since-report` starts.

A report of a topic (`kgc audit --bootstrap`) keeps, beside the report itself:

    kafka/offsets.json               the topic, the cluster (its id and the --bootstrap given),
                                     the topic's partition count, and per partition the offset
                                     this run read up to (exclusive: where the next run starts);
                                     written last, so the report of a run that stopped is no base
    kafka/records/part-<p>.parquet   every record of partition p judged so far, in the columns
                                     the audit reads (offset, timestamp, key, value, headers)

`--since-report PREV` reads from Kafka only from PREV's offsets to the topic's end now and
audits PREV's records followed by the new ones. The audit of a partition is a replay of
its whole history, and the kept records are that history, so the findings, tables and
report are those of a full run over the same records. The records are kept rather than a
state folded from them: the report's tables hold every commit and rebalance, record-level
findings (regressions, stale generations) fall anywhere in the history, and each run's
`--since`, `--until` and `--now-ms` decide afresh what of the history is reported.

A run refuses (`Refused`, one line) a previous report that kept no offsets or records, read
another topic or cluster, saw another partition count, or read a partition beyond its end
now (the topic was recreated). Where a partition's log now starts beyond the previous run's
end, retention (or DeleteRecords) removed records that no run read: the run reads from the
log start and reports the gap (`Gap`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from coordinator.offline.kafka_source import TopicRead, TopicSource
from coordinator.offline.upstream import TopicOffsets

STATE_DIR = "kafka"
OFFSETS_JSON = "offsets.json"
RECORDS_DIR = "records"
FORMAT = 1
FULL_RUN = "run without --since-report for a full audit"


class Refused(Exception):
    """The previous report cannot be the start of this run: one line that says why."""


@dataclass(frozen=True, slots=True)
class Gap:
    """Records of a partition deleted between two runs, before either read them."""
    partition: int
    read_to: int        # the previous run read up to (not including) this offset
    log_start: int      # the log starts here now

    def describe(self, topic: str) -> str:
        return (f"{topic}-{self.partition}: offsets {self.read_to} to {self.log_start - 1} were deleted "
                f"(retention or DeleteRecords) before any audit read them; their commits are not judged")


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run of a topic reads, and from which report it goes on."""
    now: TopicOffsets
    read: TopicRead
    since_report: str | None = None
    gaps: tuple[Gap, ...] = ()


def records_dir(report_dir: str | Path) -> Path:
    return Path(report_dir).resolve() / STATE_DIR / RECORDS_DIR


def plan(source: TopicSource, now: TopicOffsets, since_report: str | None) -> Plan:
    """The read of a run: the whole topic, or with `since_report` what was written since
    it (Refused if that report cannot be the start)."""
    ending = {p: end for p, (_start, end) in now.partitions.items()}
    if since_report is None:
        return Plan(now, TopicRead(ending=ending))
    state = load(since_report)
    prev = f"--since-report {since_report}"
    if state["topic"] != source.topic:
        raise Refused(f"{prev} audited topic {state['topic']}, not {source.topic}")
    if not _same_cluster(state, source, now):
        raise Refused(f"{prev} read another cluster: {_cluster(state['cluster_id'], state['bootstrap'])}, "
                      f"not {_cluster(now.cluster_id, source.bootstrap)}")
    partitions = len(now.partitions)
    if state["partitions"] != partitions:
        raise Refused(f"{prev} read {source.topic} with {state['partitions']} partitions, it has {partitions} now: "
                      + FULL_RUN)
    read_to = {int(p): int(o) for p, o in state["read_to"].items()}
    ahead = [f"{p}: {o} > {now.partitions[p][1]}" for p, o in sorted(read_to.items()) if o > now.partitions[p][1]]
    if ahead:
        raise Refused(f"{prev} read {source.topic} beyond its end now (partition {', '.join(ahead)}): "
                      f"was the topic recreated? {FULL_RUN}")
    gaps = tuple(Gap(p, o, now.partitions[p][0]) for p, o in sorted(read_to.items()) if now.partitions[p][0] > o)
    starting = {p: max(o, now.partitions[p][0]) for p, o in read_to.items()}
    previous = records_dir(since_report)
    return Plan(now, TopicRead(ending=ending, starting=starting, previous_records=str(previous)),
                since_report=since_report, gaps=gaps)


def load(report_dir: str | Path) -> dict:
    """The offsets a report saved; Refused if it has none (or its records are missing)."""
    prev = f"--since-report {report_dir}"
    path = Path(report_dir) / STATE_DIR / OFFSETS_JSON
    if not Path(report_dir).is_dir():
        raise Refused(f"{prev}: no such directory")
    if not path.is_file():
        raise Refused(f"{prev} has no saved Kafka offsets ({STATE_DIR}/{OFFSETS_JSON}): it is not the report "
                      f"of a finished --bootstrap audit; {FULL_RUN}")
    try:
        state = json.loads(path.read_text())
    except ValueError as e:
        raise Refused(f"{prev}: {STATE_DIR}/{OFFSETS_JSON} is not JSON ({e}); {FULL_RUN}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise Refused(f"{prev}: {STATE_DIR}/{OFFSETS_JSON} is not in format {FORMAT}; {FULL_RUN}")
    if state.get("records_kept") and not records_dir(report_dir).is_dir():
        raise Refused(f"{prev} has no {STATE_DIR}/{RECORDS_DIR}/ (the records read so far); {FULL_RUN}")
    return state


def _same_cluster(state: dict, source: TopicSource, now: TopicOffsets) -> bool:
    """The cluster's id decides where both runs know it (the same cluster may be reached
    through other addresses; another one may sit at the same address); else the servers."""
    if state.get("cluster_id") and now.cluster_id:
        return state["cluster_id"] == now.cluster_id
    return _servers(state["bootstrap"]) == _servers(source.bootstrap)


def _servers(bootstrap: str) -> set[str]:
    return {s.strip() for s in bootstrap.split(",") if s.strip()}


def _cluster(cluster_id: str | None, bootstrap: str) -> str:
    return f"cluster {cluster_id} ({bootstrap})" if cluster_id else bootstrap


def kafka_summary(source: TopicSource, plan: Plan, records_read: int, records_previous: int) -> dict:
    """What the run read of the topic: the report's summary.json has it as "kafka", and
    kafka/offsets.json has it for the next run."""
    read = plan.read
    if read.ending is None:
        raise ValueError("the plan's read has no end: `plan` reads up to the topic's end when planned")
    return {
        "format": FORMAT,
        "topic": source.topic,
        "bootstrap": source.bootstrap,
        "cluster_id": plan.now.cluster_id,
        "partitions": len(plan.now.partitions),
        "since_report": None if plan.since_report is None else str(Path(plan.since_report).resolve()),
        "read_from": "earliest" if read.starting is None else {str(p): o for p, o in sorted(read.starting.items())},
        "read_to": {str(p): o for p, o in sorted(read.ending.items())},
        "records_read": records_read,             # from Kafka, by this run
        "records_previous": records_previous,     # from the previous report's records
        "records_kept": records_read + records_previous,   # in this report's kafka/records/, for the next run
        "gaps": [asdict(g) for g in plan.gaps],
    }


def save(report_dir: str | Path, kafka: dict) -> None:
    """The offsets for the next run, written last (after the records and the report)."""
    directory = Path(report_dir) / STATE_DIR
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (OFFSETS_JSON + ".tmp")
    tmp.write_text(json.dumps(kafka, indent=1, sort_keys=True))
    os.replace(tmp, directory / OFFSETS_JSON)
