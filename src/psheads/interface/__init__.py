"""How every layer meets its caller: the version (``version``), argument checks (``validation``),
frozen-config dicts (``config``), progress bars (``progress``), plain and HTML views (``reprs``) and files
written whole or not at all (``atomic``).

The ground floor: imports nothing else of psheads.
"""
