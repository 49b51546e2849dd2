"""``python -m kubegpu``: the same entry point as the ``kubegpu`` console script."""

import sys

from kubegpu.cli import main

sys.exit(main())
