"""kgc's build. `KGC_COMPILE=1` compiles the request path to C extensions with mypyc (part
of mypy): heartbeats and commits cost kgc's process a third to a half less CPU
(docs/benchmarks/issue-32.md, "The request path compiled"). The image ships it so;
without it kgc installs as plain Python, as an editable install must.

    # a wheel, as the image builds it (docs/deployment.md): kgc's dependencies first, as
    # mypyc compiles against their types
    pip install 'setuptools>=77' 'mypy==2.4.1' . && KGC_COMPILE=1 pip wheel --no-build-isolation --no-deps -w wheels .
    # in place, as .ci/run tests it (a development install: delete the *.so files after)
    KGC_COMPILE=1 python setup.py build_ext --inplace

Compiled code trusts the annotations: a value that contradicts one raises TypeError. So mypy
checks these packages strictly (pyproject.toml), and CI runs the whole suite compiled.
"""

import os
from pathlib import Path

from setuptools import setup

# The request path: what a heartbeat, a commit or a fetch of offsets runs through.
COMPILED = ["protocol", "storage", "coordinator/net", "coordinator/runtime", "coordinator/group",
            "coordinator/service", "coordinator/records", "coordinator/common", "coordinator/metrics.py"]
# Left as Python: kafka-python's message classes (a metaclass keyword mypyc cannot compile),
# the Arrow-backed columns (pyarrow, off the request path) and EagerFuture (a subclass of
# asyncio.Future, which mypyc cannot compile).
PYTHON = {"protocol/consumer_group_messages.py", "protocol/txn_offset_commit_messages.py",
          "storage/columnar.py", "storage/eager_future.py"}


def compiled_modules(root: Path) -> list[str]:
    files: list[str] = []
    for entry in COMPILED:
        path = root / entry
        found = [path] if path.is_file() else sorted(path.rglob("*.py"))
        files += [str(f.relative_to(root)) for f in found
                  if str(f.relative_to(root)) not in PYTHON and "schemas" not in f.parts]
    return files


ext_modules = []
if os.environ.get("KGC_COMPILE") == "1":
    from mypyc.build import mypycify

    ext_modules = mypycify(compiled_modules(Path(__file__).parent), opt_level="3", separate=True)

setup(ext_modules=ext_modules)
