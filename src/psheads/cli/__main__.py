"""``python -m psheads.cli``, the same program as ``psheads`` and ``python -m psheads``."""

import sys

from psheads.cli import main

sys.exit(main())
