"""The package's version: one source, read by ``psheads.__version__``, the packaging
(``pyproject.toml``'s dynamic version) and every module that records it."""

__version__ = "0.1.0"
