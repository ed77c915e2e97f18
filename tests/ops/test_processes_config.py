"""`processes`: the settings that must hold for several processes to find each other, the
flags each process is started with, and which process owns which partition."""

from __future__ import annotations

import pytest

from coordinator.cli import build_parser
from coordinator.commands.serve import given_flags
from coordinator.partitioning import partition_for
from coordinator.process_split import ProcessSplit
from coordinator.settings import SETTINGS, ConfigError, load_config


def load(*argv: str, env: dict[str, str] | None = None):
    args = build_parser().parse_args(["serve", *argv])
    flags = {s.name: getattr(args, s.name) for s in SETTINGS if hasattr(args, s.name)}
    return load_config(flags, env or {}, config_file=args.config).config


@pytest.mark.parametrize(("argv", "message"), [
    (("--processes", "2", "--port", "0"), "processes needs a fixed port"),
    (("--processes", "2", "--upstream", "k:9092", "--broker-port-base", "0"), "fixed broker listener ports"),
    (("--processes", "2", "--upstream", "k:9092", "--store", "replicated"), "run several instances instead"),
    (("--processes", "2", "--port", "9092", "--http-port", "9093"), "overlap"),
    (("--processes", "3", "--process-index", "3"), r"process_index 3 is not below processes \(3\)"),
    (("--processes", "51",), "--processes"),
    (("--processes", "2", "--port", "65535"), "run past port 65535"),
])
def test_settings_that_would_leave_processes_unable_to_find_each_other_are_refused(argv, message):
    with pytest.raises(ConfigError, match=message):
        load(*argv)


def test_explicit_broker_ports_do_for_a_shared_base_and_one_process_needs_nothing():
    assert load("--processes", "2", "--upstream", "k:9092", "--broker-port-base", "0",
                "--broker-port", "1=20001").processes == 2
    assert load("--port", "0", "--broker-port-base", "0").processes == 1


def test_each_process_is_started_with_the_flags_serve_was_given_and_loads_the_same_config(tmp_path):
    path = tmp_path / "kgc.toml"
    path.write_text("fsync = \"never\"\n")
    argv = ("--config", str(path), "--processes", "2", "--port", "9300", "--broker-port", "1=20001",
            "--broker-port", "2=20002", "--standalone", "--data-dir", str(tmp_path / "d"))
    args = build_parser().parse_args(["serve", *argv])
    again = given_flags(args)
    assert load(*again) == load(*argv)
    assert load(*again, "--process-index", "1").process_index == 1
    assert load(*again).fsync == "never"


def test_process_i_owns_the_partitions_i_modulo_n_and_every_process_names_the_same_owner():
    splits = [ProcessSplit.of(i, 3, 50, node_id=100, host="h", port=9092, broker_port_base=19092, broker_ports=())
              for i in range(3)]
    assert [sorted(s.owned) for s in splits] == [list(range(i, 50, 3)) for i in range(3)]
    assert [(s.me.node_id, s.me.port) for s in splits] == [(100, 9092), (101, 9093), (102, 9094)]
    for group in ("a", "orders", "billing-7"):
        owner = splits[partition_for(group) % 3].me
        assert all(s.owner(group) == owner for s in splits)
        assert sum(s.holds(partition_for(group)) for s in splits) == 1
    # Every process opens the broker listeners itself, on the shared ports.
    assert splits[1].broker_instance(7) is None
