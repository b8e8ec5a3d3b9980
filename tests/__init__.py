"""psheads' test suite. Under pytest, importing it turns on run-time checks of psheads' jaxtyping
shapes (``tests/shapes.py``), before conftest or a test imports psheads. A script that borrows a
helper from here (``benchmarks/score_speed.py`` takes the oracle) runs psheads unchecked."""

import sys

from tests import shapes

if "pytest" in sys.modules:
    shapes.install(shapes.shaped_modules())
