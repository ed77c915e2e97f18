import sys

from coordinator.cli import main

sys.exit(main())
