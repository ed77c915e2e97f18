"""Real Apache Kafka brokers (KRaft, combined broker+controller nodes) for the tests.

`KafkaCluster` formats each node's storage with Kafka's own `StorageTool` and runs
`kafka.Kafka` from the jars `kafka_dist` fetched, on loopback:
- one node on 127.0.0.1 (the suite's default upstream);
- three nodes on 127.0.0.11-13, replication factor 3 and min ISR 2 (`hosts=THREE_HOSTS`);
- `security=KafkaSecurity(...)`: clients reach a SASL_SSL listener (SCRAM-SHA-512 and PLAIN,
  TLS from PEM files) guarded by the StandardAuthorizer; the brokers talk to each other and to
  the controllers over PLAINTEXT listeners that no test client is given.

Nodes start in parallel (a KRaft quorum forms only once a majority runs), each bounded by
`START_TIMEOUT_S` and judged started by the line Kafka logs once the broker is unfenced and
serving. Every node logs into its own directory, which pytest keeps after the run, and a
failed start raises with the tail of that log. Processes are stopped by PID: SIGTERM, then
SIGKILL after a bound (a cluster torn down at once can lose its quorum, and a controlled
shutdown would then wait minutes for it); a broker whose test run died is killed by the kernel.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from tests.support.kafka_dist import KAFKA_VERSION, java_command, run_tool
from tests.support.ports import free_port_on
from tests.support.security import ClientSecurity, TestPki

START_TIMEOUT_S = 120.0
STOP_GRACE_S = 10.0
STARTED = "Kafka Server started"
THREE_HOSTS = ("127.0.0.11", "127.0.0.12", "127.0.0.13")
_PR_SET_PDEATHSIG = 1   # linux/prctl.h
BROKER_JVM = ("-Xmx768m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20")

# What Kafka's own integration tests change for small, fast test clusters: no 3 s delay
# before a classic group's first rebalance, a small log cleaner buffer (allocated on the heap
# at start), background tasks that start at once, and (`_FEW_THREADS`) few threads on a
# 2-core machine.
_TEST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "log.cleaner.dedupe.buffer.size": "2097152",
    "log.initial.task.delay.ms": "100",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
}
# Kafka's defaults are 3, 8, 10 and 4. The benchmarks run Kafka with its defaults
# (`few_threads=False`): the coordinator a team runs, not one the tests slimmed.
_FEW_THREADS = {
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "2",
    "group.coordinator.threads": "1",
}


def die_with_the_test_run() -> None:
    """In a child (a broker, before Kafka starts; a kgc): the kernel kills it when the test
    run that started it dies (a killed pytest runs no teardown), so none outlives its run."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def new_cluster_id() -> str:
    """What `StorageTool random-uuid` prints: 16 random bytes, url-safe base64, no padding."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


@dataclass(frozen=True)
class KafkaSecurity:
    """A SASL_SSL client listener: these users (SCRAM-SHA-512 and PLAIN), TLS from `pki`."""

    pki: TestPki
    users: dict[str, str]
    super_users: tuple[str, ...] = ("admin",)

    def client(self, user: str, mechanism: str = "SCRAM-SHA-512") -> ClientSecurity:
        """How a client logs in to the cluster as `user`."""
        return ClientSecurity("SASL_SSL", mechanism, user, self.users[user], ca_file=self.pki.ca_file)


@dataclass
class KafkaNode:
    node_id: int
    host: str
    port: int              # the listener clients use
    controller_port: int
    internal_port: int     # brokers among themselves (the client listener itself when unsecured)
    directory: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "kafka.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class KafkaCluster:
    def __init__(self, directory: Path, hosts: tuple[str, ...] = ("127.0.0.1",), *,
                 version: str = KAFKA_VERSION, security: KafkaSecurity | None = None,
                 settings: dict[str, str] | None = None, features: tuple[str, ...] = (),
                 few_threads: bool = True):
        self.directory = directory
        self.version = version
        self.security = security
        self.features = features  # StorageTool --feature NAME=LEVEL
        self.cluster_id = new_cluster_id()
        ports = free_port_on(hosts), free_port_on(hosts), free_port_on(hosts) if security else 0
        self.nodes = [KafkaNode(node_id=i + 1, host=host, port=ports[0], controller_port=ports[1],
                                internal_port=ports[2] or ports[0], directory=directory / f"node-{i + 1}")
                      for i, host in enumerate(hosts)]
        replicas = str(min(3, len(hosts)))
        self.settings = {
            **_TEST_SETTINGS,
            **(_FEW_THREADS if few_threads else {}),
            "default.replication.factor": replicas,
            "min.insync.replicas": "2" if len(hosts) >= 3 else "1",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": "2" if len(hosts) >= 3 else "1",
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": "1",
            **(settings or {}),
        }

    # --- addresses -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    # The first node, as the tests that ran on a one-node Tansu name it.
    @property
    def node_id(self) -> int:
        return self.nodes[0].node_id

    @property
    def host(self) -> str:
        return self.nodes[0].host

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    # --- configuration ---------------------------------------------------------------------

    def _voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)

    def _properties(self, node: KafkaNode) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": self._voters(),
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(node.directory / "data"),
            **self.settings,
        }
        controller = f"CONTROLLER://{node.host}:{node.controller_port}"
        if self.security is None:
            listeners = f"PLAINTEXT://{node.address},{controller}"
            props |= {"listeners": listeners, "advertised.listeners": listeners,
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                      "inter.broker.listener.name": "PLAINTEXT"}
        else:
            props |= self._secured_properties(node, controller)
        return props

    def _secured_properties(self, node: KafkaNode, controller: str) -> dict[str, str]:
        sec = self.security
        assert sec is not None
        listeners = f"CLIENT://{node.address},INTERNAL://{node.host}:{node.internal_port},{controller}"
        plain_users = " ".join(f'user_{user}="{password}"' for user, password in sec.users.items())
        admin = sec.super_users[0]
        # The brokers reach each other and the controllers as User:ANONYMOUS over loopback
        # PLAINTEXT listeners that no test client is given, so that principal is a super user.
        supers = ";".join([*(f"User:{u}" for u in sec.super_users), "User:ANONYMOUS"])
        return {
            "listeners": listeners, "advertised.listeners": listeners,
            "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.client.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.client.plain.sasl.jaas.config":
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="{admin}" password="{sec.users[admin]}" {plain_users};',
            "listener.name.client.ssl.keystore.type": "PEM",
            "listener.name.client.ssl.keystore.location": self._broker_pem(),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": supers,
            "allow.everyone.if.no.acl.found": "false",
        }

    def _broker_pem(self) -> str:
        """The broker's key (PKCS#8, the only form Kafka's PEM keystore reads) and chain, one file."""
        path = self.directory / "broker.pem"
        if not path.exists():
            hosts = dict.fromkeys(("127.0.0.1", "localhost", *(n.host for n in self.nodes)))
            cert_file, key_file = self.security.pki.issue("kafka-broker", *hosts)
            key = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
            pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
            path.write_bytes(pkcs8 + Path(cert_file).read_bytes())
        return str(path)

    # --- tools ---------------------------------------------------------------------------

    def admin_tool(self, main_class: str, *args: str) -> subprocess.CompletedProcess:
        """One of Kafka's tools against this cluster, as its first super user when secured;
        fails the test with the tool's output unless it succeeds."""
        login = []
        if self.security is not None:
            config = self.directory / "admin.properties"
            admin = self.security.client(self.security.super_users[0]).java()
            config.write_text("".join(f"{k}={v}\n" for k, v in admin.items()))
            login = ["--command-config", str(config)]
        done = run_tool(main_class, "--bootstrap-server", self.bootstrap, *login, *args, version=self.version)
        assert done.returncode == 0, f"{main_class} {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def create_topic(self, name: str, partitions: int = 1) -> str:
        self.admin_tool("org.apache.kafka.tools.TopicCommand", "--create", "--topic", name,
                        "--partitions", str(partitions), "--replication-factor", self.settings["default.replication.factor"])
        return name

    # --- processes -------------------------------------------------------------------------

    def _format(self, node: KafkaNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        config = node.directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self._properties(node).items()))
        args = ["format", "--config", str(config), "--cluster-id", self.cluster_id, "--ignore-formatted"]
        for feature in self.features:
            args += ["--feature", feature]
        if self.security:
            for user, password in self.security.users.items():
                args += ["--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]"]
        done = subprocess.run(java_command("kafka.tools.StorageTool", *args, version=self.version),
                              capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"formatting Kafka node {node.node_id} failed:\n{done.stdout}{done.stderr}")

    def _launch(self, node: KafkaNode) -> None:
        log = open(node.log_path, "ab")
        try:
            node.proc = subprocess.Popen(
                java_command("kafka.Kafka", str(node.directory / "server.properties"), version=self.version,
                             jvm=BROKER_JVM),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_the_test_run)
        finally:
            log.close()
        node.started_at = node.log_path.stat().st_size  # type: ignore[attr-defined]

    def _wait_started(self, nodes: list[KafkaNode], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        waiting = list(nodes)
        while waiting:
            for node in list(waiting):
                if node.proc.poll() is not None:
                    raise RuntimeError(f"Kafka node {node.node_id} exited with {node.proc.returncode}:\n"
                                       f"{self._tail(node)}")
                with open(node.log_path, "rb") as log:
                    log.seek(node.started_at)  # type: ignore[attr-defined]
                    if STARTED.encode() in log.read():
                        waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                raise TimeoutError(f"Kafka node(s) {[n.node_id for n in waiting]} not started after "
                                   f"{timeout_s}s:\n" + "\n".join(self._tail(n) for n in waiting))
            time.sleep(0.1)

    @staticmethod
    def _tail(node: KafkaNode, lines: int = 40) -> str:
        text = node.log_path.read_text(errors="replace") if node.log_path.exists() else ""
        return f"--- {node.log_path} ---\n" + "\n".join(text.splitlines()[-lines:])

    def start(self, timeout_s: float = START_TIMEOUT_S) -> KafkaCluster:
        for node in self.nodes:
            self._format(node)
        for node in self.nodes:
            self._launch(node)
        try:
            self._wait_started(self.nodes, timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def start_node(self, node_id: int, timeout_s: float = START_TIMEOUT_S) -> None:
        node = self.node(node_id)
        assert not node.running, f"node {node_id} is running"
        self._launch(node)
        self._wait_started([node], timeout_s)

    def kill_node(self, node_id: int) -> None:
        """SIGKILL: the node stops at once, as in a crash."""
        self._signal_and_wait([self.node(node_id)], signal.SIGKILL)

    @contextlib.contextmanager
    def paused(self, node_id: int):
        """SIGSTOP for the block, SIGCONT after: the node answers nothing while its
        connections stay open, as a hung broker's do."""
        pid = self.node(node_id).proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def stop_node(self, node_id: int) -> None:
        """SIGTERM: a controlled shutdown (leadership moves first), SIGKILL after a bound."""
        self._signal_and_wait([self.node(node_id)], signal.SIGTERM)

    def stop(self) -> None:
        self._signal_and_wait([n for n in self.nodes if n.running], signal.SIGTERM)

    def _signal_and_wait(self, nodes: list[KafkaNode], sig: int) -> None:
        for node in nodes:
            if node.running:
                os.kill(node.proc.pid, sig)
        deadline = time.monotonic() + STOP_GRACE_S
        for node in nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.kill(node.proc.pid, signal.SIGKILL)
                node.proc.wait(10)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def partition_leader(bootstrap: str, topic: str, partition: int) -> int:
    """The node id leading a topic's partition, as the cluster's metadata says now."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return next(p["leader_id"] for p in described["partitions"] if p["partition_index"] == partition)
