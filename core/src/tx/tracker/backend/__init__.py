"""Tracker backends that ship with tx-core: :mod:`tx.tracker.backend.fsspec` (``file``)."""

__all__ = []
