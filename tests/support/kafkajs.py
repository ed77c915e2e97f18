"""Node.js and kafkajs for the tests that run kafkajs scripts (tests/e2e/js)."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest

JS_DIR = pathlib.Path(__file__).parents[1] / "e2e" / "js"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("kafkajs test needs Node.js and npm on PATH")
    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        try:
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, check=True, timeout=180,
                           capture_output=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            output = getattr(exc, "stderr", b"") or b""
            pytest.skip(f"cannot install kafkajs from npm in {JS_DIR}: {exc} {output.decode()[-500:]}")
    return node


def run_group_story(node: str, bootstrap: str, topic: str, group: str, partitions: int, first: int, second: int,
                    resume: int) -> dict:
    """tests/e2e/js/group.mjs: three kafkajs members share the topic's `partitions` and read
    `first` records of each, one leaves and the other two read `second` more, then a new
    member resumes at the commits and reads `resume` more; its report."""
    run = subprocess.run([node, "group.mjs", bootstrap, topic, group, str(partitions), str(first), str(second),
                          str(resume)], cwd=JS_DIR, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])
