"""Which kgc runs: `kgc --version` and the kgc_build_info metric say the installed version."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import version

from tests.support.kgc_http import in_process


def test_kgc_version_prints_the_installed_version():
    done = subprocess.run([sys.executable, "-m", "coordinator", "--version"], capture_output=True, text=True,
                          timeout=30)
    assert (done.returncode, done.stdout.strip()) == (0, f"kgc {version('kgc')}")


def test_build_info_carries_the_version_and_python():
    assert in_process().get("kgc_build_info", version=version("kgc"), python=platform.python_version()) == 1
