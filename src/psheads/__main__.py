"""``python -m psheads``."""

import sys

from psheads.cli import main

sys.exit(main())
