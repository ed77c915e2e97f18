"""The README does what it says: its quick start forms a consumer group through kgc, its
test command is the one CI runs, every page it links to exists, and what it says `kgc
serve` does with an upstream it cannot reach is what kgc does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.kgc import free_port, kgc_process, wait_listening

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FIRST_SCREEN_LINES = 60


def test_the_first_screen_goes_from_nothing_to_a_consumer_group_through_kgc():
    first = "\n".join(README.splitlines()[:FIRST_SCREEN_LINES])
    for step in ("Python 3.11", "pip install -e '.[embedded]'", "kgc serve", "pip install kafka-python",
                 "group_id=", "kgc groups list"):
        assert step in first, step


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_the_quick_start_script_forms_a_consumer_group_through_kgc(tansu, tmp_path):
    script = README.split("```python\n", 1)[1].split("```", 1)[0]
    assert script.startswith("# quickstart.py")
    broker_port = free_port()
    with kgc_process("--upstream", tansu.bootstrap, "--broker-port", f"{tansu.node_id}={broker_port}") as kgc:
        wait_listening(broker_port)
        (tmp_path / "quickstart.py").write_text(script.replace('"127.0.0.1:9092"', f'"{kgc.bootstrap}"'))
        ran = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
        assert ran.stdout == "10 records read by quickstart-group\n", ran.stderr
        listed = subprocess.run([sys.executable, "-m", "coordinator", "groups", "--bootstrap-server", kgc.bootstrap,
                                 "list"], capture_output=True, text=True, timeout=60)
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["quickstart-group", "Empty"]]


def test_the_test_command_shows_why_tests_skip_and_which_failed_and_is_the_one_ci_runs():
    [command] = re.findall(r"^\.venv/bin/python -m pytest .*$", README.split("## Run the tests", 1)[1], re.M)[:1]
    [report] = re.findall(r" -r(\w+) ", command)
    assert set("sfER") <= set(report), report  # skips, failures, errors and reruns, at the end
    ci = (ROOT / ".ci" / "run").read_text()
    runs = [line for line in ci.splitlines() if "-m pytest" in line]
    assert runs == [command]


def test_every_page_the_readme_links_to_exists():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert "docs/configuration.md" in links
    for link in links:
        assert (ROOT / link).is_file(), link


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_an_unreachable_upstream_is_what_the_readme_says_kgc_does_with_it():
    # kgc starts, serves, and says in /readyz why it is not ready: it does not exit 1.
    assert "`kgc serve` does not exit when its upstream cannot be reached" in " ".join(README.split())
    closed, http_port = free_port(), free_port()
    with kgc_process("--upstream", f"127.0.0.1:{closed}", "--http-port", str(http_port)) as kgc:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=10)
        except urllib.error.HTTPError as not_ready:
            assert not_ready.code == 503
            assert any(r.startswith("upstream: ") for r in json.load(not_ready)["reasons"])
        else:
            raise AssertionError("/readyz answered 200 with no upstream")
        assert kgc.proc.poll() is None
