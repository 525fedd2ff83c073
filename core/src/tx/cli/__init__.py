"""The ``tx`` command line (``tx.cli.main:main``)."""

__all__ = []
