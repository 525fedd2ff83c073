"""Version of the tx-torchx-compat distribution."""

__version__ = "0.1.0"
