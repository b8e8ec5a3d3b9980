"""How every layer meets its caller: argument checks (``validation``), frozen-config dicts
(``config``), progress bars (``progress``) and plain and HTML views (``reprs``).

The ground floor: imports nothing else of psheads.
"""
