"""The project's container files as the deploy tests read them: the Dockerfile's instructions
per stage, the README's `docker run` line, and the environment the two give kgc."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# The README and the pages it links to, where the long parts live.
DOCS = README + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))


def dockerfile() -> list[tuple[str, str, str]]:
    """(stage, instruction, arguments) per instruction, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    out, stage = [], ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        if keyword == "FROM":
            stage = rest.split(" AS ")[-1].strip() if " AS " in rest else rest
        out.append((stage, keyword, rest.strip()))
    return out


def stage_args(stage: str, keyword: str) -> list[str]:
    return [args for s, k, args in dockerfile() if s in (stage, "base") and k == keyword]


def docker_env(stage: str) -> dict[str, str]:
    env = {}
    for args in stage_args(stage, "ENV"):
        env.update(pair.split("=", 1) for pair in shlex.split(args))
    return env


@dataclass(frozen=True)
class DockerRun:
    """The README's `docker run` line, as Docker reads it."""
    published: list[tuple[str, int, int]]     # (host address or "", host port, container port)
    env: dict[str, str]
    mounts: dict[str, str]                     # container path -> host path or volume
    args: list[str]                            # after the image name: `kgc serve`'s

    def published_port(self, container_port: int) -> tuple[str, int] | None:
        return next(((host, host_port) for host, host_port, port in self.published if port == container_port), None)


def readme_docker_run() -> DockerRun:
    [line] = re.findall(r"^docker run .*?(?<!\\)$", re.sub(r"\\\n\s*", " ", DOCS), re.M)
    words = shlex.split(line)[2:]
    published, env, mounts = [], {}, {}
    while words[0].startswith("-"):
        flag, value, words = words[0], words[1], words[2:]
        if flag == "-p":
            *host, host_ports, ports = value.split(":")
            low, _, high = ports.partition("-")
            host_low = int(host_ports.partition("-")[0])
            published += [(host[0] if host else "", host_low + i, int(low) + i)
                          for i in range(int(high or low) - int(low) + 1)]
        elif flag == "-e":
            env.update([value.split("=", 1)])
        elif flag == "-v":
            source, target, *_ = value.split(":")
            mounts[target] = source
    assert words[0] == "kgc", words
    return DockerRun(published, env, mounts, words[1:])


def image_env(run: DockerRun, tmp_path: Path) -> dict[str, str]:
    """The image's KGC_* environment with the `docker run` line's, its token file mounted
    from a real file here."""
    env = {k: v for k, v in docker_env("service").items() if k.startswith("KGC_")} | run.env
    token_file = env.get("KGC_HTTP_AUTH_TOKEN_FILE")
    if token_file is not None:
        assert token_file in run.mounts, "the token file is not mounted"
        (tmp_path / "token").write_text("from the host\n")
        env["KGC_HTTP_AUTH_TOKEN_FILE"] = str(tmp_path / "token")
    return env
