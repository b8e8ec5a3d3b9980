"""psheads' test suite. Importing it turns on run-time checks of psheads' jaxtyping shapes
(``tests/shapes.py``), before conftest or a test imports psheads."""

from tests import shapes

shapes.install(shapes.shaped_modules())
