"""The ``tx`` command line (``tx.cli.main:main``)."""
