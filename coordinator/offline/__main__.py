"""The offline tools as a script, for spark-submit (the driver runs this file):

    spark-submit coordinator/offline/__main__.py audit DATA_DIR --out REPORT_DIR
    spark-submit coordinator/offline/__main__.py compact DATA_DIR --out NEW_DATA_DIR

and `python -m coordinator.offline audit ...`. The same commands as `kgc audit` /
`kgc compact`; under spark-submit they use the session spark-submit started.
"""

import sys

from coordinator.offline.cli import main

if __name__ == "__main__":
    sys.exit(main())
