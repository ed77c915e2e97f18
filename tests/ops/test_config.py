"""Configuration: defaults, TOML file, KGC_* environment, flags, their precedence, and a
clear error for each kind of bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli import build_parser, main
from coordinator.group.config import GroupConfig
from coordinator.settings import SETTINGS, ConfigError, ServerConfig, load_config


def flags_of(*argv: str) -> tuple[dict, str | None]:
    """What `kgc serve` hands `load_config` for these flags."""
    args = build_parser().parse_args(["serve", *argv])
    return {s.name: getattr(args, s.name) for s in SETTINGS if hasattr(args, s.name)}, args.config


def load(*argv: str, env: dict[str, str] | None = None):
    flags, config_file = flags_of(*argv)
    return load_config(flags, env or {}, config_file=config_file)


def write(tmp_path, text: str) -> str:
    path = tmp_path / "kgc.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_the_dataclass_defaults_except_that_serve_turns_http_on():
    loaded = load()
    assert loaded.config == ServerConfig(http_port=9180)
    assert loaded.config.group == GroupConfig()
    assert set(loaded.sources.values()) == {"default"}


def test_each_source_sets_values_of_every_kind(tmp_path):
    path = write(tmp_path, 'port = 19092\ndata_dir = "/var/lib/kgc"\nupstream = ["k1:9092", "k2:9092"]\n'
                           'broker_ports = { 1 = 19093 }\nmin_session_timeout_ms = 500\n')
    from_file = load("--config", path).config
    assert (from_file.port, from_file.data_dir, from_file.group.min_session_timeout_ms) == (19092, "/var/lib/kgc", 500)
    assert from_file.upstream == (("k1", 9092), ("k2", 9092)) and from_file.broker_ports == ((1, 19093),)

    from_env = load(env={"KGC_PORT": "19093", "KGC_UPSTREAM": "k1:9092,k2:9093", "KGC_STANDALONE": "false",
                         "KGC_BROKER_PORTS": "1=19093,2=19094", "KGC_LOG_LEVEL": "debug",
                         "KGC_GROUP_MAX_SIZE": "10"}).config
    assert (from_env.port, from_env.log_level, from_env.group.group_max_size) == (19093, "DEBUG", 10)
    assert from_env.upstream == (("k1", 9092), ("k2", 9093)) and from_env.broker_ports == ((1, 19093), (2, 19094))

    from_flags = load("--port", "19094", "--standalone", "--broker-port", "1=19093", "--broker-port", "2=19094",
                      "--log-format", "json", "--initial-rebalance-delay-ms", "0").config
    assert (from_flags.port, from_flags.standalone, from_flags.log_format) == (19094, True, "json")
    assert from_flags.broker_ports == ((1, 19093), (2, 19094)) and from_flags.group.initial_rebalance_delay_ms == 0


def test_min_group_api_versions_is_kafka3_unless_an_operator_chooses_kafka_4s_cut(tmp_path):
    assert load().config.min_group_api_versions == "kafka3"
    assert load("--config", write(tmp_path, 'min_group_api_versions = "kafka4"\n')).config.min_group_api_versions \
        == "kafka4"
    assert load(env={"KGC_MIN_GROUP_API_VERSIONS": "KAFKA4"}).config.min_group_api_versions == "kafka4"
    assert load("--min-group-api-versions", "kafka4").config.min_group_api_versions == "kafka4"
    with pytest.raises(ConfigError, match="bad min_group_api_versions from flag .*expected one of kafka3, kafka4"):
        load("--min-group-api-versions", "kafka5")


def test_flags_win_over_the_environment_which_wins_over_the_file(tmp_path):
    path = write(tmp_path, "port = 1\nnode_id = 1\nhttp_port = 1\n")
    loaded = load("--port", "3", env={"KGC_CONFIG": path, "KGC_PORT": "2", "KGC_NODE_ID": "2"})
    assert (loaded.config.port, loaded.config.node_id, loaded.config.http_port) == (3, 2, 1)
    assert loaded.sources["port"] == "flag --port"
    assert loaded.sources["node_id"] == "environment KGC_NODE_ID"
    assert loaded.sources["http_port"] == f"file {path}"


def test_the_config_flag_wins_over_the_config_environment_variable(tmp_path):
    flag_file = write(tmp_path, "port = 7\n")
    assert load("--config", flag_file, env={"KGC_CONFIG": str(tmp_path / "missing.toml")}).config.port == 7


def test_connection_bounds_read_kafkas_forms(tmp_path):
    path = write(tmp_path, 'max_connections_per_ip_overrides = { "10.0.0.7" = 50 }\n')
    loaded = load("--config", path, env={"KGC_CONNECTIONS_MAX_IDLE_MS": "-1"}).config
    assert (loaded.connections_max_idle_ms, loaded.max_connections_per_ip_overrides) == (-1, (("10.0.0.7", 50),))
    flags = load("--max-connections-per-ip-overrides", "::1:5,127.0.0.1:7").config
    assert flags.max_connections_per_ip_overrides == (("::1", 5), ("127.0.0.1", 7))


def test_an_empty_environment_value_unsets_a_nullable_setting(tmp_path):
    path = write(tmp_path, 'data_dir = "/var/lib/kgc"\n')
    assert load("--config", path, env={"KGC_DATA_DIR": ""}).config.data_dir is None


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--port", "abc"], {}, "bad port from flag --port 'abc': expected an integer, got 'abc'"),
    ([], {"KGC_PORT": "70000"}, "bad port from environment KGC_PORT='70000': must be between 0 and 65535"),
    ([], {"KGC_MIN_SESSION_TIMEOUT_MS": "0"}, "bad min_session_timeout_ms from environment"),
    (["--fsync", "sometimes"], {}, "bad fsync from flag --fsync 'sometimes': bad fsync policy"),
    (["--log-format", "xml"], {}, "bad log_format from flag --log-format 'xml': expected one of text, json"),
    (["--upstream", "kafka"], {}, "bad upstream from flag --upstream 'kafka': expected HOST:PORT, got 'kafka'"),
    (["--upstream", "kafka:0"], {}, "'kafka:0' has no port between 1 and 65535"),
    (["--broker-port", "one=2"], {}, "bad broker_ports from flag --broker-port 'one=2': expected NODE_ID=PORT"),
    (["--standalone", "maybe"], {}, "bad standalone from flag --standalone 'maybe': expected true or false"),
    (["--host", " "], {}, "bad host from flag --host ' ': must not be empty"),
    (["--min-session-timeout-ms", "9000", "--max-session-timeout-ms", "8000"], {},
     "min_session_timeout_ms (9000) is above max_session_timeout_ms (8000)"),
    (["--standalone", "--upstream", "k:9092"], {}, "standalone and upstream exclude each other"),
    (["--port", "9180"], {}, "http_port and port are both 9180"),
    (["--connections-max-idle-ms", "0"], {}, "must be -1 (never) or at least 1"),
    (["--max-connections-per-ip-overrides", "10.0.0.7"], {}, "expected ADDRESS:COUNT, got '10.0.0.7'"),
    (["--max-connections-per-ip-overrides", "kafka-client:7"], {}, "'kafka-client' is not an IP address"),
    # Listening on every interface is fine; telling clients to connect to "every interface" is not.
    ([], {"KGC_HOST": "0.0.0.0"}, "advertised host 0.0.0.0 is not an address clients can connect to: set "
                                  "advertised_host (--advertised-host, KGC_ADVERTISED_HOST)"),
    (["--host", "::", "--advertised-host", "::"], {}, "advertised host :: is not an address clients can connect to"),
])
def test_each_kind_of_bad_value_names_the_setting_and_its_source(argv, env, message):
    with pytest.raises(ConfigError) as raised:
        load(*argv, env=env)
    assert message in str(raised.value)


@pytest.mark.parametrize(("text", "message"), [
    ("prot = 9092\n", "unknown setting 'prot'"),
    ("port = 9092.5\n", "bad port from config file"),
    ("port = true\n", "expected an integer, got True"),
    ("upstream = [1, 2]\n", "expected HOST:PORT strings, got 1"),
    ("port = \n", "is not valid TOML"),
])
def test_a_bad_config_file_is_refused_with_its_path(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load("--config", path)
    assert message in str(raised.value) and path in str(raised.value)


def test_a_missing_config_file_and_a_data_dir_that_is_a_file_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load("--config", str(tmp_path / "nope.toml"))
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="exists and is not a directory"):
        load("--data-dir", str(tmp_path / "file"))


def test_an_http_port_others_can_reach_without_a_token_is_warned_about(tmp_path):
    # /v1/groups shows member and client ids and hosts; the README's Security section asks
    # for a token whenever the HTTP port is reachable from elsewhere.
    open_to_all = load("--http-host", "0.0.0.0").warnings
    assert open_to_all == ("http_host 0.0.0.0 lets anyone who reaches port 9180 read /metrics and /v1/groups "
                           "(member and client ids and hosts): set http_auth_token_file (--http-auth-token-file, "
                           "KGC_HTTP_AUTH_TOKEN_FILE)",)
    (tmp_path / "token").write_text("s3cret\n")
    assert load("--http-host", "0.0.0.0", "--http-auth-token-file", str(tmp_path / "token")).warnings == ()
    assert load("--http-host", "127.0.0.1").warnings == load("--http-host", "::1").warnings == ()


def test_unknown_kgc_environment_variables_are_warned_about_not_fatal():
    loaded = load(env={"KGC_PROT": "1", "PATH": "/bin"})
    assert loaded.warnings == ("ignoring unknown environment variable KGC_PROT",)


def test_print_config_shows_the_effective_values_and_loads_back_the_same(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KGC_NODE_ID", "77")
    code = main(["serve", "--print-config", "--port", "19092", "--upstream", "k1:9092,k2:9092",
                 "--broker-port", "1=19093", "--offsets-retention-ms", "1000"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "port = 19092  # flag --port\n" in printed and "node_id = 77  # environment KGC_NODE_ID\n" in printed
    assert "# data_dir: unset  # default\n" in printed
    path = write(tmp_path, printed)
    monkeypatch.delenv("KGC_NODE_ID")
    assert load("--config", path).config == load("--port", "19092", "--upstream", "k1:9092,k2:9092",
                                                 "--broker-port", "1=19093", "--offsets-retention-ms", "1000",
                                                 env={"KGC_NODE_ID": "77"}).config


def test_serve_exits_2_with_the_message_on_stderr(capsys):
    assert main(["serve", "--port", "x"]) == 2
    assert capsys.readouterr().err == "kgc serve: bad port from flag --port 'x': expected an integer, got 'x'\n"


def test_the_readmes_example_config_file_loads(tmp_path):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    config = load("--config", write(tmp_path, example)).config
    assert config.upstream == (("kafka-0", 9092), ("kafka-1", 9092)) and config.broker_ports == ((1001, 29092),)
