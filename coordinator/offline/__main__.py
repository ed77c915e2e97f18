"""The offline tools as a script, for spark-submit (the driver runs this file):

    spark-submit coordinator/offline/__main__.py audit DATA_DIR --out REPORT_DIR
    spark-submit coordinator/offline/__main__.py compact DATA_DIR --out NEW_DATA_DIR

and `python -m coordinator.offline audit ...`. The same commands as `kgc audit` /
`kgc compact`; under spark-submit they use the session spark-submit started.
"""

import os
import sys

# spark-submit runs this file as a script, so Python puts this directory first on the
# path, where this package's inspect.py would stand in for the standard library's.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from coordinator.offline.cli import main  # noqa: E402 (after the path is mended)

if __name__ == "__main__":
    sys.exit(main())
