"""``torchx.cli``: the command line (``torchx.cli.main.main``)."""
