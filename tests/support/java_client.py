"""The Java client (kafka-clients) as a group member: tests/java/JavaMember.java (compiled once
per Kafka version by `kafka_dist.compiled`) in a JVM of its own, driven over stdin/stdout one command at a time. tests/support/clients.py puts it behind the
same driver interface as the Python-reachable libraries (poll, assignment, commit, close)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.support.kafka_dist import KAFKA_VERSION, compiled, java_command

SOURCE = Path(__file__).resolve().parent.parent / "java" / "JavaMember.java"
# Kafka's class names for the assignors the other libraries name by their protocol names.
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
ANSWER_TIMEOUT_S = 60


class JavaMemberError(RuntimeError):
    """The Java member answered a command with an error, or stopped answering."""


class JavaProcess:
    """One JavaMember JVM: `properties` are its consumer settings (and `commit=sync|async`)."""

    def __init__(self, bootstrap: str, group: str, topic: str, properties: dict[str, str],
                 version: str = KAFKA_VERSION):
        args = [f"{k}={v}" for k, v in properties.items()]
        self.proc = subprocess.Popen(
            java_command("JavaMember", bootstrap, group, topic, *args, cp=compiled(SOURCE, version)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, command: str) -> dict:
        if self.proc.poll() is not None:
            raise JavaMemberError(f"JavaMember exited with {self.proc.returncode}: {self.proc.stderr.read()[-3000:]}")
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(ANSWER_TIMEOUT_S)
            raise JavaMemberError(f"JavaMember exited with {self.proc.returncode} on {command!r}: "
                                  f"{self.proc.stderr.read()[-3000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise JavaMemberError(answer["error"])
        return answer

    def kill(self) -> None:
        """SIGKILL: the member vanishes without leaving the group, as in a crash."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        try:
            self.ask("close")
            self.proc.wait(ANSWER_TIMEOUT_S)
        finally:
            self.kill()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                stream.close()


def java_properties(s, protocol: str = "classic", commits: str = "sync") -> dict[str, str]:
    """Consumer settings for a MemberSettings `s` (tests/support/clients.py)."""
    props = {"client.id": s.client_id, "commit": commits, "metadata.max.age.ms": "1000",
             **{k: str(v).lower() for k, v in s.auto_commit().items()}}
    if protocol == "consumer":
        props["group.protocol"] = "consumer"
    else:
        props |= {"partition.assignment.strategy": ASSIGNORS[s.assignor],
                  "session.timeout.ms": str(s.session_timeout_ms),
                  "heartbeat.interval.ms": str(s.heartbeat_interval_ms)}
    if s.instance_id:
        props["group.instance.id"] = s.instance_id
    if s.security:
        props |= s.security.java()
    return props
