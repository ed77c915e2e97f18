"""The Dockerfile, compose file, Kubernetes manifests, Prometheus config and Grafana
dashboard refer to real parts of this project: images the Dockerfile builds, commands the
CLI accepts, settings the schema knows, ports kgc listens on, metrics kgc exports.
(No Docker engine or cluster here: these checks are what can be proven without one.)"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from prometheus_client.metrics_core import Metric

from coordinator.cli import build_parser
from coordinator.metrics import REGISTRY
from coordinator.settings import SETTINGS, ConfigError, load_config
from tests.support.deploy_files import (
    DOCS,
    ROOT,
    docker_env,
    dockerfile,
    image_env,
    readme_docker_run,
    stage_args,
)

DEPLOY = ROOT / "deploy"


# ---- reading the files ------------------------------------------------------------------


def exec_form(args: str) -> list[str]:
    return json.loads(args)


def yaml_docs(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def kind(kind_: str) -> dict:
    [doc] = [d for p in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml_docs(p) if d["kind"] == kind_
             and not d["metadata"]["name"].endswith("-headless")]
    return doc


def serve_config(args: list[str], env: dict[str, str] | None = None, config_file: str | None = None):
    """`kgc serve ARGS` as the CLI parses and validates them (raises on anything unknown)."""
    parsed = build_parser().parse_args(["serve", *args])
    flags = {s.name: getattr(parsed, s.name) for s in SETTINGS if hasattr(parsed, s.name)}
    loaded = load_config(flags, env or {}, config_file=config_file or parsed.config)
    assert not loaded.warnings, loaded.warnings
    return loaded.config


def image_built_by_readme(image: str) -> str:
    """The Dockerfile target the README's `docker build` makes this image from."""
    name = image.removesuffix(":latest")
    match = re.search(rf"docker build (?:--target (\w+) )?-t {re.escape(name)} \.", DOCS)
    assert match, f"the README does not build {image}"
    return match.group(1) or "service"


# ---- the Dockerfile ---------------------------------------------------------------------


def test_every_yaml_file_under_deploy_parses():
    files = sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml"))
    assert len(files) >= 9
    for path in files:
        assert yaml_docs(path), path


def test_the_dockerfile_installs_with_the_readmes_commands():
    installs = [args for _, k, args in dockerfile() if k == "RUN" and "pip install" in args]
    assert len(installs) == 2       # the audit, and the service
    for command in installs:
        assert command in DOCS, command


def test_the_dockerfile_copies_files_that_exist_and_the_package_they_make():
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    stages = {s for s, k, _ in dockerfile() if k == "FROM"}
    for args in stage_args("service", "COPY"):
        if args.startswith("--from="):      # from an earlier stage, not the build context
            assert args.split()[0].removeprefix("--from=") in stages, args
            continue
        *sources, _target = args.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            assert not (ROOT / source).is_dir() or f"{source}*" in packages["include"]


def test_the_service_stage_runs_kgc_serve_as_a_non_root_user_with_a_data_volume_and_healthcheck(tmp_path):
    stages = [args for _, k, args in dockerfile() if k == "FROM"]
    assert stages[0].startswith("python:3.11-slim") and stages[-1] == "base AS service"
    entrypoint = exec_form(stage_args("service", "ENTRYPOINT")[-1])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint == ["kgc", "serve"] and "kgc" in scripts
    assert stage_args("service", "USER") == ["kgc"]
    config = serve_config([], env=image_env(readme_docker_run(), tmp_path))
    assert exec_form(stage_args("service", "VOLUME")[0]) == [config.data_dir]
    exposed = stage_args("service", "EXPOSE")[0].split()
    assert str(config.port) in exposed and str(config.http_port) in exposed
    low, high = map(int, next(p for p in exposed if "-" in p).split("-"))
    assert low == config.broker_port_base
    [healthcheck] = stage_args("service", "HEALTHCHECK")
    assert "/healthz" in healthcheck and "KGC_HTTP_PORT" in healthcheck and config.http_host == "0.0.0.0"


def test_the_image_alone_refuses_to_advertise_the_address_it_listens_on():
    env = {k: v for k, v in docker_env("service").items() if k.startswith("KGC_")}
    with pytest.raises(ConfigError, match="advertised host 0.0.0.0 is not an address clients can connect to"):
        serve_config([], env=env)


def test_the_audit_stage_has_java_and_the_spark_extra():
    runs = " ".join(stage_args("audit", "RUN"))
    assert "openjdk-17-jre-headless" in runs and "'.[embedded,spark]'" in runs
    assert exec_form(stage_args("audit", "ENTRYPOINT")[-1]) == ["kgc"]
    build_parser().parse_args(exec_form(stage_args("audit", "CMD")[-1])[:1] + ["/data", "--out", "/r"])


def test_the_readmes_docker_run_gives_clients_addresses_they_can_reach(tmp_path):
    run = readme_docker_run()
    config = serve_config(run.args, env=image_env(run, tmp_path))    # and no warning either
    assert config.advertised == run.env["KGC_ADVERTISED_HOST"] and config.host == "0.0.0.0"
    # Every port kgc names in metadata is published on that same number: the bootstrap
    # port and the listener of each upstream broker with node id 0-2.
    for port in (config.port, *(config.broker_port_base + node for node in range(3))):
        assert run.published_port(port) == ("", port), port
    exposed = next(p for p in stage_args("service", "EXPOSE")[0].split() if "-" in p)
    assert all(port <= int(exposed.split("-")[1]) for _, _, port in run.published)
    # HTTP: this machine only, and behind the token.
    assert run.published_port(config.http_port) == ("127.0.0.1", config.http_port)
    assert config.http_auth_token_file is not None and run.mounts[config.data_dir] == "kgc-data"


def test_the_dockerfiles_own_example_is_the_readmes():
    dockerfile_text = re.sub(r"\\\n#\s*", " ", (ROOT / "Dockerfile").read_text())
    [example] = re.findall(r"^#\s+(docker run .*)$", dockerfile_text, re.M)
    [readme] = re.findall(r"^docker run .*?(?<!\\)$", re.sub(r"\\\n\s*", " ", DOCS), re.M)
    assert example.split() == readme.split()


# ---- docker compose ---------------------------------------------------------------------


KGC_INSTANCES = ("kgc-1", "kgc-2", "kgc-3")


def compose_config(kgc: dict):
    env = {**docker_env("service"), **kgc["environment"]}
    return serve_config(kgc["command"], env=env | {"KGC_HTTP_AUTH_TOKEN_FILE": str(ROOT / "README.md")})


def test_compose_runs_three_kgc_instances_in_front_of_the_kafka_broker_and_clients_bootstrap_against_all():
    [compose] = yaml_docs(DEPLOY / "compose.yaml")
    services = compose["services"]
    kafka = services["kafka"]
    advertised = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"].removeprefix("PLAINTEXT://")
    configs = {name: compose_config(services[name]) for name in KGC_INSTANCES}
    published = set()
    for name, config in configs.items():
        kgc = services[name]
        assert (DEPLOY / kgc["build"]["context"] / kgc["build"]["dockerfile"]).resolve() == ROOT / "Dockerfile"
        assert image_built_by_readme(kgc["image"]) == kgc["build"]["target"]
        assert kgc["secrets"] == ["kgc-http-token"] and compose["secrets"]["kgc-http-token"]["file"] == "./kgc-http-token"
        assert kgc["environment"]["KGC_HTTP_AUTH_TOKEN_FILE"] == "/run/secrets/kgc-http-token"   # compose's secret
        assert [f"{h}:{p}" for h, p in config.upstream] == [advertised]
        # One state topic for all: they share its partitions. One broker: one replica.
        assert config.store == "replicated" and config.state_topic_replication_factor == 1
        assert config.advertised == name
        [port] = kgc["ports"]
        assert port.endswith(f":{config.http_port}")
        published.add(port)
        # The broker's listener in kgc: 19092 + its node id, inside the image's EXPOSE range.
        assert config.broker_port_base + int(kafka["environment"]["KAFKA_NODE_ID"]) <= 19191
    assert len(published) == 3 and len({c.state_topic for c in configs.values()}) == 1
    bootstrap = ",".join(f"{c.advertised}:{c.port}" for c in configs.values())
    for name in ("topic", "producer", "consumer"):
        command = " ".join(services[name]["command"])
        assert bootstrap in command, name
        assert services[name]["image"] == kafka["image"]


def test_prometheus_scrapes_kgcs_metrics_port_and_grafana_reads_prometheus():
    [compose] = yaml_docs(DEPLOY / "compose.yaml")
    instances = [compose["services"][name] for name in KGC_INSTANCES]
    [prometheus] = yaml_docs(DEPLOY / "prometheus" / "prometheus.yml")
    [job] = prometheus["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    # The token kgc asks for, from the same secret.
    assert {job["authorization"]["credentials_file"]} == {k["environment"]["KGC_HTTP_AUTH_TOKEN_FILE"] for k in instances}
    assert compose["services"]["prometheus"]["secrets"] == instances[0]["secrets"]
    assert job["static_configs"][0]["targets"] == [f"{c.advertised}:{c.http_port}" for c in map(compose_config, instances)]
    [datasources] = yaml_docs(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    mounts = compose["services"]["prometheus"]["volumes"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts


# ---- Kubernetes -------------------------------------------------------------------------


def test_the_statefulset_runs_the_image_with_the_configmaps_settings(tmp_path):
    statefulset, configmap = kind("StatefulSet"), kind("ConfigMap")
    pod = statefulset["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert image_built_by_readme(container["image"]) == "service"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    config_path = container["args"][container["args"].index("--config") + 1]
    assert Path(config_path).parent == Path(mounts["config"])
    assert Path(config_path).name == "kgc.toml"
    config = serve_config([a if a != config_path else _configmap_file(tmp_path) for a in container["args"]],
                          env=POD_ENV)
    token_path = tomllib.loads(configmap["data"]["kgc.toml"])["http_auth_token_file"]
    # The token file is the key `token` of the Secret the README creates.
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert Path(mounts["http-token"]) / "token" == Path(token_path) and secrets["http-token"] == "kgc-http-token"
    assert "kubectl create secret generic kgc-http-token --from-literal=token=" in " ".join(DOCS.split())
    assert pod["securityContext"]["runAsUser"] == 10001
    # Three instances over one replicated store; each advertises its own pod's name.
    assert statefulset["spec"]["replicas"] == 3 and config.store == "replicated"
    assert "data" not in mounts and config.state_topic_replication_factor == 3
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["KGC_ADVERTISED_HOST"]["value"] == f"$(POD_NAME).{statefulset['spec']['serviceName']}"
    assert statefulset["spec"]["serviceName"] in {s["metadata"]["name"] for s in yaml_docs(DEPLOY / "k8s" / "service.yaml")}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (ports["kafka"], ports["http"]) == (config.port, config.http_port)
    assert sorted(v for k, v in ports.items() if k.startswith("broker-")) == [
        config.broker_port_base + node for node in range(len(config.upstream))]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    grace_s = pod["terminationGracePeriodSeconds"]
    assert grace_s * 1000 > config.shutdown_timeout_ms


def test_the_service_exposes_the_containers_named_ports():
    [container] = kind("StatefulSet")["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = kind("Service")
    for port in service["spec"]["ports"]:
        assert named[port["targetPort"]] == port["port"], port
    assert service["metadata"]["annotations"]["prometheus.io/port"] == str(named["http"])


def test_the_kustomization_brings_the_nightly_audit_in_the_audit_image(tmp_path):
    [kustomization] = yaml_docs(DEPLOY / "kustomization.yaml")
    for resource in kustomization["resources"]:
        assert (DEPLOY / resource).is_file(), resource
    [cronjob] = yaml_docs(DEPLOY / "spark" / "cronjob.yaml")
    [patch] = kustomization["patches"]
    assert patch["target"] == {"kind": "CronJob", "name": cronjob["metadata"]["name"]}
    ops = yaml.safe_load(patch["patch"])
    image = next(op["value"] for op in ops if op["path"].endswith("/containers/0/image"))
    assert image_built_by_readme(image) == "audit"
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    assert claims <= {d["metadata"]["name"] for d in yaml_docs(DEPLOY / "k8s" / "pvc.yaml")}
    [container] = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    script = container["args"][0].replace("$(date +%F)", "2026-01-01")
    argv = [re.sub(r"\$(\w+)", lambda m: env[m.group(1)], word) for word in shlex.split(script)]
    assert argv[0] == "kgc"
    args = build_parser().parse_args(argv[1:])
    config = serve_config([], env=POD_ENV, config_file=_configmap_file(tmp_path))
    # The state topic, from the cluster kgc fronts, with the jars the audit image holds.
    assert args.command == "audit" and args.data_dir is None and args.topic == config.state_topic
    upstream = {f"{h}:{p}" for h, p in config.upstream}
    assert args.bootstrap in upstream and args.upstream in upstream
    jars = args.spark_jars.split(",")
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert all(Path(jar).parent == Path("/opt/kgc/spark-kafka") and Path(jar).name in dockerfile for jar in jars)
    assert {Path(jar).name.split("-")[0] for jar in jars} == {"spark", "kafka", "commons"}


# What the StatefulSet's env gives the first pod.
POD_ENV = {"KGC_ADVERTISED_HOST": "kgc-0.kgc-headless"}


def _configmap_file(tmp_path: Path) -> str:
    """The ConfigMap's kgc.toml, its token file (the Secret's, in the pod) a real one here."""
    toml = kind("ConfigMap")["data"]["kgc.toml"]
    (tmp_path / "token").write_text("from the Secret\n")
    path = tmp_path / "kgc.toml"
    path.write_text(toml.replace(tomllib.loads(toml)["http_auth_token_file"], str(tmp_path / "token")))
    return str(path)


# ---- the dashboard and the README --------------------------------------------------------


def exported_series() -> dict[str, str]:
    """Every series name kgc exports -> its metric family."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    families: list[Metric] = [m for m in REGISTRY.collect() if m.name.startswith("kgc_")]
    return {f.name + s: f.name for f in families for s in suffixes[f.type]}


def test_the_dashboard_charts_every_kgc_metric_and_nothing_else():
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "kgc.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\bkgc_[a-z_]+", expr)}
    series = exported_series()
    assert used <= series.keys(), used - series.keys()
    assert {series[name] for name in used} == set(series.values())


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_the_docs_document_every_setting(setting):
    assert f"| `{setting.name}` | `{setting.option}` |" in (ROOT / "docs" / "configuration.md").read_text()
