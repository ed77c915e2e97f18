"""report.html opened in a real headless browser: it renders, charts and all."""
# ruff: noqa: E402 (the imports after importorskip need the spark extra)

from __future__ import annotations

import shutil
import subprocess

import pytest

# The audit writes Parquet with pyarrow and numpy (the spark extra); without it this module skips,
# saying so, before the imports below that need it.
pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install -e '.[spark]')")

from coordinator.offline.guide import KIND_TITLES, kind_of
from coordinator.offline.job import Options
from coordinator.offline.report import FINDINGS_COLOR, LAG_COLOR, PALETTE
from coordinator.offline.runner import audit
from coordinator.offline.timeline import COMMITS_COLOR, FINDING_COLOR, REBALANCE_COLOR
from tests.support.audit_logs import DIRTY

Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install -e '.[dev]')")

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install -y chromium)"),
              pytest.mark.timeout(120)]


def headless(*args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--user-data-dir=" + args[0], *args[1:]],
                          capture_output=True, text=True, timeout=90, check=True)


def rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


def test_report_renders_with_its_charts(dirty, tmp_path):
    directory, manifest = dirty
    report = tmp_path / "report"
    audit(directory, report, Options(now_ms=DIRTY.now_ms), log_offsets=manifest.log_offsets, upstream="test")
    url = (report / "report.html").as_uri()
    profile = str(tmp_path / "profile")

    dom = headless(profile, "--dump-dom", url).stdout
    assert "<title>kgc offset audit</title>" in dom
    for section in ("findings-by-type", "what-to-do", "group-timelines", "commits-over-time", "lag-per-group",
                    "findings-per-group"):
        assert f'id="{section}"' in dom
    for title in KIND_TITLES.values():
        assert f"<h3>{title}</h3>" in dom
    timelines = dom.count('class="timeline"')
    # A findings chart per kind with findings, the commits and the lag charts.
    kinds = {kind_of(f.type) for f in manifest.expected}
    assert dom.count("<svg") - timelines == len(kinds) + 2 and timelines == 12

    shot = tmp_path / "report.png"
    headless(profile, f"--screenshot={shot}", "--window-size=1100,4400", url)
    image = Image.open(shot).convert("RGB")
    colors = {color for _count, color in image.getcolors(maxcolors=1 << 20)}
    # Each chart's own colour is on screen: the findings bars, the lag bars, and the
    # lines of the busiest groups.
    assert rgb(FINDINGS_COLOR) in colors
    assert rgb(LAG_COLOR) in colors
    assert sum(rgb(c) in colors for c in PALETTE[1:6]) >= 3
    # And the timelines': commit bars, rebalance lines, finding markers.
    assert {rgb(COMMITS_COLOR), rgb(REBALANCE_COLOR), rgb(FINDING_COLOR)} <= colors
