"""`kgc demo` runs to completion, tells the story it promises, and leaves no broker behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


def test_kgc_demo_runs_to_completion_and_reports_what_happened():
    run = subprocess.run([sys.executable, "-m", "coordinator", "demo"], capture_output=True, text=True,
                         timeout=120)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr[-3000:]

    pid = int(re.search(r"upstream: Tansu broker \(pid (\d+)\)", out)[1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert re.search(r"3 consumers joined group 'kgc-demo-group'", out)
    assert re.search(r"consumer-3 stopped \(LeaveGroup\); the other 2 took over its partitions in \d+ ms", out)
    assert re.findall(r"partition \d: committed (\d+)  end (\d+)", out) == [("200", "200")] * 6
    assert "state Empty, 0 members" in out  # asked of the upstream broker directly
    assert "1200 records produced, 1200 consumed, each partition exactly as many as produced: True" in out

