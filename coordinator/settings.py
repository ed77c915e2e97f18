"""Server settings: `ServerConfig`, and the one schema `kgc serve` loads.

Every duration is an int in milliseconds. The group settings (`GroupConfig`, Kafka's
defaults) live with the group layer in `coordinator.group.config`; `ServerConfig.group`
holds them.

`SETTINGS` is the schema: each setting has one name, which is its TOML key, its flag
(`--name-with-dashes`) and its environment variable (`KGC_NAME`). Sources, lowest
precedence first: the dataclass defaults, a TOML file (`--config` / `KGC_CONFIG`), `KGC_*`
environment variables, flags. `load_config` validates every value as it reads it and
raises `ConfigError` naming the setting and where the bad value came from; an unknown
key in the file is an error, an unknown `KGC_*` variable a warning (environments carry
strays). The TOML file is flat: `port = 9092`, `min_session_timeout_ms = 500`.

One default differs between the dataclass and the schema: `http_port` is None (no HTTP
server) for code that builds a `ServerConfig` itself, such as tests running several
coordinators in one process, and 9180 for `kgc serve`.
"""

from __future__ import annotations

import ipaddress
import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from coordinator.group.config import GroupConfig
from coordinator.net.server import DEFAULT_BACKLOG
from coordinator.security.acl import AclError, load_acl_file
from coordinator.security.principal import parse_rules
from protocol.api_keys import GROUP_API_FLOORS
from storage.fsync_policy import FsyncPolicy

DEFAULT_NODE_ID = 2_000_000_000


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None       # None: the bind host
    node_id: int = DEFAULT_NODE_ID           # kgc's own node; no upstream broker may use it
    data_dir: str | None = None              # None: in-memory log (nothing survives a restart)
    fsync: str = "always"
    # local: the data dir (or memory); replicated: a compacted topic on the upstream
    # (coordinator/replicated), so no instance depends on one disk.
    store: str = "local"
    state_topic: str = "kgc-group-state"
    state_topic_replication_factor: int = 3          # Kafka's offsets.topic.replication.factor
    state_topic_min_insync_replicas: int = 2
    # How long the upstream waits for a silent instance before its partitions move: Kafka's
    # group.min.session.timeout.ms, the shortest it allows, so a failover takes no longer
    # than Kafka's own (its broker.session.timeout.ms is 9 s). kgc heartbeats every second.
    ownership_session_timeout_ms: int = 6_000
    # Several processes on this machine, each serving a fixed share of the 50 partitions
    # on its own port (coordinator.process_split): kgc's work on more than one core.
    processes: int = 1
    process_index: int | None = None         # set by `kgc serve --processes N` for each of its children
    segment_bytes: int = 100 * 2**20
    upstream: tuple[tuple[str, int], ...] = ()
    standalone: bool = False                 # no upstream, not even the embedded one
    adopt_from_upstream: bool = True         # first use of an unknown group adopts it from upstream
    delete_offsets_of_deleted_topics: bool = True   # as Kafka: a topic deleted upstream takes its offsets
    broker_port_base: int = 19092
    broker_ports: tuple[tuple[int, int], ...] = ()   # explicit (node id, port) listeners
    max_frame_bytes: int = 100 * 2**20      # Kafka's socket.request.max.bytes
    max_in_flight: int = 1000                # per connection, before reading pauses
    sasl_server_max_receive_size: int = 524_288     # Kafka's: largest frame before login
    connections_max_idle_ms: int = 600_000          # Kafka's (-1: never)
    socket_listen_backlog_size: int = DEFAULT_BACKLOG   # Kafka's socket.listen.backlog.size, not its 50
    max_connections_per_ip: int = 2**31 - 1         # Kafka's (its default: Integer.MAX_VALUE)
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()   # (address, limit)
    http_host: str = "127.0.0.1"
    http_port: int | None = None             # None: no HTTP server; 0: any free port
    log_level: str = "INFO"
    log_format: str = "text"
    cleaner_interval_ms: int = 300_000       # 0: no online cleaner
    delete_retention_ms: int = 86_400_000    # tombstones kept this long (Kafka's delete.retention.ms)
    shutdown_timeout_ms: int = 10_000        # graceful stop: how long in-flight requests may take
    # Kafka's offsets.commit.timeout.ms: how long an answer waits for its write to be durable
    offsets_commit_timeout_ms: int = 5_000
    metrics_sample_interval_ms: int = 1_000  # group states and rebalances are sampled this often
    security_protocol: str = "plaintext"     # of every client listener, as Kafka names them
    sasl_mode: str = "terminate"
    sasl_mechanisms: tuple[str, ...] = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
    sasl_credentials_file: str | None = None
    sasl_passthrough_insecure_upstream: bool = False
    sasl_oauthbearer_sub_claim_name: str = "sub"   # Kafka's sasl.oauthbearer.sub.claim.name
    upstream_sasl_mechanism: str | None = None
    upstream_sasl_username: str | None = None
    upstream_sasl_password_file: str | None = None
    sasl_max_reauth_ms: int = 0              # Kafka's connections.max.reauth.ms (0: sessions never expire)
    sasl_failure_delay_ms: int = 100         # Kafka's connection.failed.authentication.delay.ms
    min_group_api_versions: str = "kafka3"   # a key of protocol.api_keys.GROUP_API_FLOORS
    lag_refresh_interval_ms: int = 10_000  # log ends of committed partitions are fetched this often
    lag_metrics_per_partition: bool = False  # kgc_consumer_lag_partition series (else group+topic only)
    tls_cert_file: str | None = None         # PEM chain, leaf first, of every kgc listener
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None
    tls_client_auth: str = "none"            # none | requested | required (mTLS)
    tls_reload_interval_ms: int = 60_000     # certificate files checked for changes (0: never)
    ssl_principal_mapping_rules: str = "DEFAULT"
    upstream_security_protocol: str = "plaintext"
    upstream_tls_ca_file: str | None = None  # None: the system's CAs
    upstream_tls_cert_file: str | None = None
    upstream_tls_key_file: str | None = None
    upstream_tls_check_hostname: bool = True
    http_tls_cert_file: str | None = None
    http_tls_key_file: str | None = None
    http_auth_token_file: str | None = None  # a file holding the bearer token HTTP clients must send
    authorizer: str = "none"                 # none: every group API allowed | file: acl_file
    acl_file: str | None = None
    super_users: tuple[str, ...] = ()        # Kafka's super.users
    allow_everyone_if_no_acl_found: bool = False
    acl_refresh_interval_ms: int = 30_000
    group: GroupConfig = GroupConfig()

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("sasl_")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("ssl", "sasl_ssl")

    @property
    def advertised(self) -> str:
        return self.advertised_host or self.host


class ConfigError(ValueError):
    """A setting with a bad value, a bad config file, or settings that contradict each other."""


# ---- value parsers: raw (a string from a flag or the environment, or a TOML value) -> value


Parser = Callable[[Any], Any]

_INT_TEXT = re.compile(r"-?[0-9][0-9_]*")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def integer(low: int, high: int = 2**63 - 1) -> Parser:
    def parse(raw: Any) -> int:
        if isinstance(raw, str) and _INT_TEXT.fullmatch(raw.strip()):
            raw = int(raw.strip())
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError(f"expected an integer, got {raw!r}")
        if not low <= raw <= high:
            raise ValueError(f"must be between {low} and {high}, got {raw}")
        return raw
    return parse


def text(*, choices: tuple[str, ...] = (), nullable: bool = False, check: Callable[[str], Any] | None = None,
         fold: Callable[[str], str] = str) -> Parser:
    def parse(raw: Any) -> str | None:
        if not isinstance(raw, str):
            raise ValueError(f"expected a string, got {raw!r}")
        value = fold(raw.strip())
        if not value:
            if nullable:
                return None
            raise ValueError("must not be empty")
        if choices and value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {raw!r}")
        if check is not None:
            check(value)
        return value
    return parse


def boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise ValueError(f"expected true or false, got {raw!r}")


def _items(raw: Any) -> list[Any]:
    """A TOML array, or a comma-separated string (environment, flags)."""
    if isinstance(raw, str):
        return [part.strip() for part in raw.split(",") if part.strip()]
    if isinstance(raw, list):
        return raw
    raise ValueError(f"expected a list or a comma-separated string, got {raw!r}")


def _port(text_: str, what: str) -> int:
    if not text_.isdigit() or not 1 <= int(text_) <= 65535:
        raise ValueError(f"{what} has no port between 1 and 65535")
    return int(text_)


def host_ports(raw: Any) -> tuple[tuple[str, int], ...]:
    out = []
    for item in _items(raw):
        if not isinstance(item, str):
            raise ValueError(f"expected HOST:PORT strings, got {item!r}")
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"expected HOST:PORT, got {item!r}")
        out.append((host, _port(port, repr(item))))
    return tuple(out)


def broker_ports(raw: Any) -> tuple[tuple[int, int], ...]:
    """NODE_ID=PORT items; in TOML also a table `{ 1 = 19093 }`."""
    items = [f"{k}={v}" for k, v in raw.items()] if isinstance(raw, dict) else _items(raw)
    out = []
    for item in items:
        node, sep, port = str(item).partition("=")
        if not sep or not re.fullmatch(r"-?[0-9]+", node.strip()):
            raise ValueError(f"expected NODE_ID=PORT, got {item!r}")
        out.append((int(node), _port(port.strip(), repr(item))))
    return tuple(out)


def host_counts(raw: Any) -> tuple[tuple[str, int], ...]:
    """Kafka's `max.connections.per.ip.overrides`: ADDRESS:COUNT items (the count after the
    last colon, so IPv6 addresses work); in TOML also a table `{ "10.0.0.7" = 50 }`. Kafka
    also takes host names and resolves them; kgc matches the client's address, so a name
    is refused rather than never matching."""
    items = [f"{k}:{v}" for k, v in raw.items()] if isinstance(raw, dict) else _items(raw)
    out = []
    for item in items:
        host, sep, count = str(item).strip().rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"expected ADDRESS:COUNT, got {item!r}")
        try:
            address = str(ipaddress.ip_address(host.strip()))
        except ValueError:
            raise ValueError(f"{host.strip()!r} is not an IP address (host names are not resolved)") from None
        out.append((address, int(count)))
    return tuple(out)


def idle_ms(raw: Any) -> int:
    """Kafka's `connections.max.idle.ms`: -1 closes nothing, else at least 1 ms."""
    value = integer(-1)(raw)
    if value == 0:
        raise ValueError("must be -1 (never) or at least 1")
    return value


def names(*, choices: tuple[str, ...]) -> Parser:
    """A non-empty list of distinct names from `choices`, as a tuple."""
    def parse(raw: Any) -> tuple[str, ...]:
        items = _items(raw)
        if not items:
            raise ValueError("must not be empty")
        for item in items:
            if item not in choices:
                raise ValueError(f"expected some of {', '.join(choices)}, got {item!r}")
        if len(set(items)) != len(items):
            raise ValueError(f"names a value twice: {', '.join(items)}")
        return tuple(items)
    return parse


def principals(raw: Any) -> tuple[str, ...]:
    """Principals as `User:NAME`; Kafka's `;`-separated form is read too."""
    items = [p.strip() for item in _items(raw) for p in str(item).split(";") if p.strip()]
    for item in items:
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected principals like User:alice, got {item!r}")
    return tuple(items)


def _mapping_rules(value: str) -> None:
    parse_rules(value)


def _fsync_policy(value: str) -> None:
    FsyncPolicy.parse(value)


# ---- the schema -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    parse: Parser
    help: str
    in_group: bool = False           # a GroupConfig field (else ServerConfig)
    default: Any = None              # None: the dataclass default
    flag: str | None = None          # None: --name-with-dashes
    repeatable: bool = False         # the flag may be given several times
    metavar: str | None = None

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "KGC_" + self.name.upper()


_MS = integer(0)
_POSITIVE_MS = integer(1)
_PORT_OR_ANY = integer(0, 65535)

SETTINGS: tuple[Setting, ...] = (
    Setting("host", text(), "address the Kafka listeners bind"),
    Setting("port", _PORT_OR_ANY, "bootstrap/coordinator listener port (0: any free port)"),
    Setting("advertised_host", text(nullable=True), "host clients are told to connect to (default: host; required when host is 0.0.0.0 or ::)"),
    Setting("node_id", integer(0, 2**31 - 1), "kgc's own node id; no upstream broker may use it"),
    Setting("data_dir", text(nullable=True), "directory of the 50-partition log (unset: in memory)"),
    Setting("fsync", text(check=_fsync_policy), "always | interval:<ms> | never"),
    Setting("store", text(choices=("local", "replicated")), "local: the 50 partitions in data_dir (or memory); "
            "replicated: a compacted topic on the upstream, written transactionally (needs upstream)"),
    Setting("state_topic", text(), "the replicated store's topic (50 partitions, cleanup.policy=compact)"),
    Setting("state_topic_replication_factor", integer(1, 32767), "replication factor of a state topic kgc creates"),
    Setting("state_topic_min_insync_replicas", integer(1, 32767),
            "min.insync.replicas of a state topic kgc creates: a write is acknowledged once on this many"),
    Setting("ownership_session_timeout_ms", integer(1),
            "store replicated: an instance silent this long loses its partitions to the others (the upstream's "
            "group.min/max.session.timeout.ms bound it)"),
    Setting("processes", integer(1, 50),
            "store local: run this many kgc processes on this machine, process i serving every partition p with "
            "p % processes == i on port + i (node_id + i, http_port + i) and every process the broker listeners"),
    Setting("process_index", integer(0, 49), "which of the processes this one is: set by kgc for the processes "
            "it starts, not by hand"),
    Setting("segment_bytes", integer(1024), "segment size at which the log rolls"),
    Setting("upstream", host_ports, "HOST:PORT,... of the Kafka cluster (unset: the embedded broker)",
            metavar="HOST:PORT[,HOST:PORT...]"),
    Setting("standalone", boolean, "run without any upstream, not even the embedded broker"),
    Setting("adopt_from_upstream", boolean, "on first use of a group kgc does not know, adopt its state and "
            "offsets from the upstream cluster's coordinator (waiting while it has members there)"),
    Setting("delete_offsets_of_deleted_topics", boolean, "delete every group's offsets of a topic the upstream "
            "deletes, as Kafka does (false: keep them; docs/operations.md, \"Deleted topics take their offsets\")"),
    Setting("broker_port_base", _PORT_OR_ANY, "kgc listener for upstream broker N is this + N"),
    Setting("broker_ports", broker_ports, "NODE_ID=PORT: an explicit listener port for one upstream broker",
            flag="--broker-port", repeatable=True, metavar="NODE_ID=PORT"),
    Setting("max_frame_bytes", integer(1024), "largest request frame accepted (socket.request.max.bytes)"),
    Setting("max_in_flight", integer(1), "requests in flight per connection before reading pauses"),
    Setting("sasl_server_max_receive_size", integer(64),
            "largest request frame accepted before a SASL login completes (Kafka's sasl.server.max.receive.size)"),
    Setting("connections_max_idle_ms", idle_ms,
            "close a client connection idle this long with no response owed (-1: never)"),
    Setting("socket_listen_backlog_size", integer(1),
            "connections each listener's kernel queue holds until kgc accepts them (at most net.core.somaxconn)"),
    Setting("max_connections_per_ip", integer(0, 2**31 - 1),
            "client connections open at once from one address, over every listener"),
    Setting("max_connections_per_ip_overrides", host_counts,
            "ADDRESS:COUNT,...: per-address exceptions to max_connections_per_ip (IP addresses)", metavar="ADDRESS:COUNT[,...]"),
    Setting("http_host", text(), "address the HTTP server (metrics, health, groups) binds"),
    Setting("http_port", _PORT_OR_ANY, "HTTP server port (0: any free port)", default=9180),
    Setting("log_level", text(choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), fold=str.upper),
            "DEBUG | INFO | WARNING | ERROR | CRITICAL"),
    Setting("log_format", text(choices=("text", "json"), fold=str.lower), "text (human-readable) | json"),
    Setting("cleaner_interval_ms", _MS, "online cleaner pass interval (0: no cleaner)"),
    Setting("delete_retention_ms", _MS, "tombstones are kept this long by the cleaner"),
    Setting("shutdown_timeout_ms", _MS, "on SIGTERM, how long in-flight requests may take"),
    Setting("offsets_commit_timeout_ms", _POSITIVE_MS,
            "Kafka's offsets.commit.timeout.ms: an answer not durable by then is a retriable error "
            "(COORDINATOR_NOT_AVAILABLE) while the write goes on"),
    Setting("metrics_sample_interval_ms", _POSITIVE_MS, "how often group states are sampled for metrics"),
    Setting("security_protocol", text(choices=("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"), fold=str.lower),
            "plaintext | ssl | sasl_plaintext | sasl_ssl: of every client listener"),
    Setting("sasl_mode", text(choices=("terminate", "passthrough"), fold=str.lower),
            "terminate: kgc checks SASL credentials itself (sasl_credentials_file) | passthrough: the "
            "upstream checks them, on the client's own upstream connection (the default when "
            "upstream_sasl_mechanism is set, else terminate)"),
    Setting("sasl_passthrough_insecure_upstream", boolean,
            "allow passthrough over a plaintext upstream connection (tests only: passwords in clear)"),
    Setting("upstream_sasl_mechanism", text(choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), nullable=True,
                                            fold=str.upper),
            "kgc's own SASL login upstream, on its own connections and (except under passthrough) on "
            "those it opens for clients (unset: none)"),
    Setting("upstream_sasl_username", text(nullable=True), "kgc's upstream SASL user"),
    Setting("upstream_sasl_password_file", text(nullable=True), "file holding kgc's upstream SASL password"),
    Setting("sasl_mechanisms", names(choices=("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER")),
            "SASL mechanisms offered, in order (OAUTHBEARER: passthrough only)", metavar="MECHANISM[,MECHANISM...]"),
    Setting("sasl_oauthbearer_sub_claim_name", text(),
            "passthrough OAUTHBEARER: the JWT claim naming the principal (the upstream validates the token)"),
    Setting("sasl_credentials_file", text(nullable=True), "SCRAM credential file (kgc scram-credential writes it)"),
    Setting("sasl_max_reauth_ms", _MS, "SASL session lifetime before re-authentication (0: none)"),
    Setting("sasl_failure_delay_ms", _MS, "delay before answering a failed authentication"),
    Setting("min_group_api_versions", text(choices=tuple(GROUP_API_FLOORS), fold=str.lower),
            "kafka3: serve every group API version Kafka 3.9 served | kafka4: refuse what Kafka 4.0 "
            "removed (OffsetCommit v0-1, OffsetFetch v0) with UNSUPPORTED_VERSION"),
    Setting("lag_refresh_interval_ms", _MS, "how often log-end offsets are fetched for lag (0: only on demand)"),
    Setting("lag_metrics_per_partition", boolean, "export lag per partition too, not only per group and topic"),
    Setting("tls_cert_file", text(nullable=True), "PEM certificate chain of the listeners (ssl, sasl_ssl)"),
    Setting("tls_key_file", text(nullable=True), "PEM private key of tls_cert_file"),
    Setting("tls_client_ca_file", text(nullable=True), "CA that signs client certificates (mTLS)"),
    Setting("tls_client_auth", text(choices=("none", "requested", "required"), fold=str.lower),
            "none | requested | required: client certificates (mTLS)"),
    Setting("tls_reload_interval_ms", _MS, "how often certificate files are checked for changes (0: never)"),
    Setting("ssl_principal_mapping_rules", text(check=_mapping_rules),
            "Kafka's ssl.principal.mapping.rules: certificate DN to user name"),
    Setting("upstream_security_protocol", text(choices=("plaintext", "ssl"), fold=str.lower),
            "plaintext | ssl: kgc's connections to the upstream brokers"),
    Setting("upstream_tls_ca_file", text(nullable=True), "CA of the upstream brokers (unset: the system's CAs)"),
    Setting("upstream_tls_cert_file", text(nullable=True), "kgc's client certificate for the upstream (mTLS)"),
    Setting("upstream_tls_key_file", text(nullable=True), "private key of upstream_tls_cert_file"),
    Setting("upstream_tls_check_hostname", boolean, "check that upstream certificates name the broker"),
    Setting("http_tls_cert_file", text(nullable=True), "PEM certificate chain: serve HTTP over TLS"),
    Setting("http_tls_key_file", text(nullable=True), "PEM private key of http_tls_cert_file"),
    Setting("http_auth_token_file", text(nullable=True),
            "file holding a bearer token HTTP clients must send (all paths but /healthz, /readyz)"),
    Setting("authorizer", text(choices=("none", "file", "upstream"), fold=str.lower),
            "none: every group API allowed | file: Kafka ACLs from acl_file | upstream: the upstream's ACLs "
            "(DescribeAcls)"),
    Setting("acl_refresh_interval_ms", _POSITIVE_MS, "authorizer upstream: how often the ACLs are read again"),
    Setting("acl_file", text(nullable=True), "TOML file of ACL bindings (authorizer = file)"),
    Setting("super_users", principals, "principals allowed everything (Kafka's super.users)",
            metavar="User:NAME[,User:NAME...]"),
    Setting("allow_everyone_if_no_acl_found", boolean, "Kafka's allow.everyone.if.no.acl.found"),
    Setting("initial_rebalance_delay_ms", _MS, "Kafka's group.initial.rebalance.delay.ms", in_group=True),
    Setting("min_session_timeout_ms", _POSITIVE_MS, "Kafka's group.min.session.timeout.ms", in_group=True),
    Setting("max_session_timeout_ms", _POSITIVE_MS, "Kafka's group.max.session.timeout.ms", in_group=True),
    Setting("new_member_join_timeout_ms", _POSITIVE_MS, "how long a new member's parked join may wait",
            in_group=True),
    Setting("group_max_size", integer(1, 2**31 - 1), "Kafka's group.max.size", in_group=True),
    Setting("offset_metadata_max_bytes", integer(0), "Kafka's offset.metadata.max.bytes", in_group=True),
    Setting("offsets_retention_ms", _POSITIVE_MS, "Kafka's offsets.retention.minutes, in ms (KIP-211)",
            in_group=True),
    Setting("offsets_retention_check_interval_ms", _POSITIVE_MS, "Kafka's offsets.retention.check.interval.ms",
            in_group=True),
    Setting("consumer_session_timeout_ms", _POSITIVE_MS, "Kafka's group.consumer.session.timeout.ms (KIP-848)",
            in_group=True),
    Setting("consumer_heartbeat_interval_ms", _POSITIVE_MS,
            "Kafka's group.consumer.heartbeat.interval.ms (KIP-848)", in_group=True),
    Setting("consumer_max_size", integer(1, 2**31 - 1), "Kafka's group.consumer.max.size (KIP-848)",
            in_group=True),
    Setting("consumer_assignment_interval_ms", _MS,
            "Kafka's group.consumer.assignment.interval.ms (KIP-1263): the least time between two target "
            "assignments of a consumer group; 0 computes one at every change", in_group=True),
    Setting("consumer_migration_policy",
            text(choices=("bidirectional", "upgrade", "downgrade", "disabled"), fold=str.lower),
            "bidirectional | upgrade | downgrade | disabled: Kafka's group.consumer.migration.policy, which "
            "way a classic group with members converts when the first KIP-848 member joins it (upgrade) or "
            "the last one leaves (downgrade)", in_group=True),
)

BY_NAME: Mapping[str, Setting] = {s.name: s for s in SETTINGS}
CONFIG_ENV = "KGC_CONFIG"


def default_of(setting: Setting) -> Any:
    if setting.default is not None:
        return setting.default
    owner = GroupConfig if setting.in_group else ServerConfig
    return next(f.default for f in fields(owner) if f.name == setting.name)


# ---- loading ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: ServerConfig
    sources: Mapping[str, str]                     # setting name -> where its value came from
    warnings: tuple[str, ...] = field(default=())


def _parse(setting: Setting, raw: Any, source: str) -> Any:
    try:
        return setting.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"bad {setting.name} from {source}: {exc}") from None


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None


def load_config(flags: Mapping[str, Any], environ: Mapping[str, str], *, config_file: str | None = None) -> LoadedConfig:
    """The effective configuration. `flags` maps setting names to the raw values of the
    flags given (absent flags are absent); `config_file` is the `--config` flag."""
    values = {s.name: default_of(s) for s in SETTINGS}
    sources = dict.fromkeys(values, "default")
    warnings: list[str] = []

    path = config_file or environ.get(CONFIG_ENV) or None
    if path:
        for key, raw in _read_file(path).items():
            setting = BY_NAME.get(key)
            if setting is None:
                raise ConfigError(f"config file {path}: unknown setting {key!r}")
            values[key] = _parse(setting, raw, f"config file {path}")
            sources[key] = f"file {path}"

    for var, raw in sorted(environ.items()):
        if not var.startswith("KGC_") or var == CONFIG_ENV:
            continue
        setting = BY_NAME.get(var[4:].lower())
        if setting is None:
            warnings.append(f"ignoring unknown environment variable {var}")
            continue
        values[setting.name] = _parse(setting, raw, f"environment {var}={raw!r}")
        sources[setting.name] = f"environment {var}"

    for name, raw in flags.items():
        setting = BY_NAME[name]
        if setting.repeatable:
            raw = ",".join(raw)
        values[name] = _parse(setting, raw, f"flag {setting.option} {raw!r}")
        sources[name] = f"flag {setting.option}"

    if sources["sasl_mode"] == "default" and values["upstream_sasl_mechanism"] is not None:
        # The upstream holds the passwords and enforces its own ACLs and quotas: relaying the
        # clients' logins keeps both, so that is the default unless the operator says otherwise.
        values["sasl_mode"] = "passthrough"
        sources["sasl_mode"] = "default (passthrough: the upstream uses SASL)"

    group = GroupConfig(**{s.name: values[s.name] for s in SETTINGS if s.in_group})
    config = ServerConfig(group=group, **{s.name: values[s.name] for s in SETTINGS if not s.in_group})
    check(config)
    if config.http_port is not None and config.http_auth_token_file is None and config.http_host not in LOOPBACK:
        warnings.append(f"http_host {config.http_host} lets anyone who reaches port {config.http_port} read /metrics "
                        "and /v1/groups (member and client ids and hosts): set http_auth_token_file "
                        "(--http-auth-token-file, KGC_HTTP_AUTH_TOKEN_FILE)")
    return LoadedConfig(config, sources, tuple(warnings))


# Addresses only this machine reaches, and those that mean "every interface": a listener
# may bind one of these, but no client can connect to it.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", "*"})


def check(config: ServerConfig) -> None:
    """Rules between settings, which no single value can break."""
    g = config.group
    if g.min_session_timeout_ms > g.max_session_timeout_ms:
        raise ConfigError(f"min_session_timeout_ms ({g.min_session_timeout_ms}) is above "
                          f"max_session_timeout_ms ({g.max_session_timeout_ms})")
    if config.standalone and config.upstream:
        raise ConfigError("standalone and upstream exclude each other: standalone means no upstream")
    if config.http_port and config.http_port == config.port:
        raise ConfigError(f"http_port and port are both {config.port}")
    if config.advertised in WILDCARDS:
        raise ConfigError(f"advertised host {config.advertised} is not an address clients can connect to: set "
                          "advertised_host (--advertised-host, KGC_ADVERTISED_HOST) to the name or address they "
                          "reach kgc by")
    if config.store == "replicated" and not config.upstream:
        raise ConfigError("store replicated keeps group state in a topic of the upstream cluster: set upstream "
                          "(--upstream, KGC_UPSTREAM)")
    if config.state_topic_min_insync_replicas > config.state_topic_replication_factor:
        raise ConfigError(f"state_topic_min_insync_replicas ({config.state_topic_min_insync_replicas}) is above "
                          f"state_topic_replication_factor ({config.state_topic_replication_factor}): no write "
                          "could be acknowledged")
    if config.data_dir is not None and Path(config.data_dir).exists() and not Path(config.data_dir).is_dir():
        raise ConfigError(f"data_dir {config.data_dir} exists and is not a directory")
    _check_processes(config)
    _check_security(config)


def _check_processes(config: ServerConfig) -> None:
    n = config.processes
    if config.process_index is not None and config.process_index >= n:
        raise ConfigError(f"process_index {config.process_index} is not below processes ({n})")
    if n == 1:
        return
    if config.store == "replicated":
        raise ConfigError("processes and store replicated exclude each other: on the replicated store run several "
                          "instances instead (README, \"The replicated store\")")
    if n > config.group.num_partitions:
        raise ConfigError(f"processes ({n}) is above the {config.group.num_partitions} partitions they share")
    # Each process tells clients where the others listen: ports that every process knows.
    if config.port == 0:
        raise ConfigError("processes needs a fixed port: process i listens on port + i (set port, not 0)")
    if config.upstream and config.broker_port_base == 0 and not config.broker_ports:
        raise ConfigError("processes needs fixed broker listener ports, which every process shares: set "
                          "broker_port_base (not 0) or broker_ports")
    if config.port + n - 1 > 65535:
        raise ConfigError(f"processes ({n}) from port {config.port} run past port 65535")
    if config.http_port and config.port - n < config.http_port < config.port + n:
        raise ConfigError(f"http_port ({config.http_port}) + i and port ({config.port}) + i overlap for "
                          f"{n} processes")


def _check_security(config: ServerConfig) -> None:
    _check_tls(config)
    _check_authorizer(config)
    _check_upstream_login(config)
    if config.sasl and config.sasl_mode == "passthrough":
        if not config.upstream:
            raise ConfigError("sasl_mode passthrough needs an upstream cluster with SASL (set upstream)")
        if config.upstream_security_protocol != "ssl" and not config.sasl_passthrough_insecure_upstream:
            raise ConfigError("sasl_mode passthrough relays passwords upstream: it needs upstream_security_protocol "
                              "= ssl (sasl_passthrough_insecure_upstream = true allows plaintext, for tests)")
        if config.sasl_credentials_file is not None:
            raise ConfigError("sasl_credentials_file is for sasl_mode terminate; passthrough leaves passwords "
                              "to the upstream")
    elif config.sasl:
        if "OAUTHBEARER" in config.sasl_mechanisms:
            raise ConfigError("sasl_mode terminate does not support OAUTHBEARER (kgc validates no tokens): "
                              "use sasl_mode passthrough, where the upstream validates them")
        if config.sasl_credentials_file is None:
            raise ConfigError(f"security_protocol {config.security_protocol} with sasl_mode terminate needs "
                              "sasl_credentials_file: kgc checks the passwords")
        if not Path(config.sasl_credentials_file).is_file():
            raise ConfigError(f"sasl_credentials_file {config.sasl_credentials_file} is not a file")
    elif config.sasl_credentials_file is not None:
        raise ConfigError(f"sasl_credentials_file is set but security_protocol is {config.security_protocol}: "
                          "no listener uses SASL (set security_protocol = sasl_plaintext)")


def _check_upstream_login(config: ServerConfig) -> None:
    given = [config.upstream_sasl_mechanism, config.upstream_sasl_username, config.upstream_sasl_password_file]
    if any(v is not None for v in given) and not all(v is not None for v in given):
        raise ConfigError("upstream_sasl_mechanism, upstream_sasl_username and upstream_sasl_password_file "
                          "go together")
    if config.upstream_sasl_password_file is not None and not Path(config.upstream_sasl_password_file).is_file():
        raise ConfigError(f"upstream_sasl_password_file {config.upstream_sasl_password_file} is not a file")


def _check_authorizer(config: ServerConfig) -> None:
    if config.authorizer == "file":
        if config.acl_file is None:
            raise ConfigError("authorizer file needs acl_file")
        try:
            load_acl_file(config.acl_file)
        except AclError as exc:
            raise ConfigError(str(exc)) from None
    elif config.acl_file is not None:
        raise ConfigError(f"acl_file is set but authorizer is {config.authorizer}: set authorizer = file to use it")
    if config.authorizer == "upstream" and not config.upstream:
        raise ConfigError("authorizer upstream reads the upstream cluster's ACLs: set upstream")


def _check_tls(config: ServerConfig) -> None:
    listener_files = ("tls_cert_file", "tls_key_file", "tls_client_ca_file")
    if config.tls:
        for name in ("tls_cert_file", "tls_key_file"):
            if getattr(config, name) is None:
                raise ConfigError(f"security_protocol {config.security_protocol} needs {name}")
        if config.tls_client_auth != "none" and config.tls_client_ca_file is None:
            raise ConfigError(f"tls_client_auth {config.tls_client_auth} needs tls_client_ca_file: "
                              "the CA client certificates are checked against")
    else:
        given = [name for name in listener_files if getattr(config, name) is not None]
        if given or config.tls_client_auth != "none":
            raise ConfigError(f"{', '.join(given) or 'tls_client_auth'} set but security_protocol is "
                              f"{config.security_protocol}: the listeners do not use TLS "
                              "(set security_protocol = ssl or sasl_ssl)")
    upstream_files = ("upstream_tls_ca_file", "upstream_tls_cert_file", "upstream_tls_key_file")
    if config.upstream_security_protocol != "ssl":
        given = [name for name in upstream_files if getattr(config, name) is not None]
        if given:
            raise ConfigError(f"{', '.join(given)} set but upstream_security_protocol is plaintext")
    if (config.upstream_tls_cert_file is None) != (config.upstream_tls_key_file is None):
        raise ConfigError("upstream_tls_cert_file and upstream_tls_key_file go together")
    if (config.http_tls_cert_file is None) != (config.http_tls_key_file is None):
        raise ConfigError("http_tls_cert_file and http_tls_key_file go together")
    http_files = ("http_tls_cert_file", "http_tls_key_file", "http_auth_token_file")
    if config.http_auth_token_file is not None and Path(config.http_auth_token_file).is_file() \
            and not Path(config.http_auth_token_file).read_text().strip():
        raise ConfigError(f"http_auth_token_file {config.http_auth_token_file} is empty")
    for name in (*listener_files, *upstream_files, *http_files):
        path = getattr(config, name)
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{name} {path} is not a file")


# ---- printing ---------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"no TOML form for {value!r}")


def _raw_form(setting: Setting, value: Any) -> Any:
    """The value as a TOML file spells it for this setting."""
    if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    if setting.parse is host_ports:
        return [f"{host}:{port}" for host, port in value]
    if setting.parse is broker_ports:
        return [f"{node}={port}" for node, port in value]
    return value


def render_toml(loaded: LoadedConfig) -> str:
    """The effective configuration as a TOML file `--config` accepts, each line with its source."""
    config = loaded.config
    lines = []
    for setting in SETTINGS:
        value = getattr(config.group if setting.in_group else config, setting.name)
        source = loaded.sources[setting.name]
        if value is None:
            lines.append(f"# {setting.name}: unset  # {source}")
            continue
        raw = _raw_form(setting, value)
        shown = "[" + ", ".join(map(_toml_value, raw)) + "]" if isinstance(raw, list) else _toml_value(raw)
        lines.append(f"{setting.name} = {shown}  # {source}")
    return "\n".join(lines) + "\n"
