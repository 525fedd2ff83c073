"""``torchx.runtime.tracking.api``: result trackers, as TorchX 0.7.0 documents them
(https://pytorch.org/torchx/0.7.0/runtime/tracking.html).

A result is a flat ``{name: int | float | str}`` stored under a key (an ``int`` or a
``str``, used as ``str(key)``); by convention ``"metric/mean"`` and ``"metric/sem"`` hold
a statistic. ``tracker[key] = {...}`` is ``put(key, **results)`` and ``tracker[key]`` is
``get(key)``; a key with no result reads as ``{}``.
"""
import abc
import json
from typing import Dict, Union

__all__ = ["FsspecResultTracker", "KeyType", "ResultTracker", "ResultType"]

#: a result's key (stored as ``str(key)``)
KeyType = Union[int, str]
#: a result value
ResultType = Union[int, float, str]


class ResultTracker(abc.ABC):
    """A store of simple results by key; subclasses implement :meth:`put` and :meth:`get`
    for one backing store. No consistency is promised beyond the store's own: write each
    key once (a job id, or an experiment and trial number)."""

    def __getitem__(self, key: KeyType) -> Dict[str, ResultType]:
        return self.get(key)

    def __setitem__(self, key: KeyType, results: Dict[str, ResultType]) -> None:
        self.put(key, **results)

    @abc.abstractmethod
    def put(self, key: KeyType, **results: ResultType) -> None:
        """Record ``results`` under ``str(key)`` (replacing what was there)."""

    @abc.abstractmethod
    def get(self, key: KeyType) -> Dict[str, ResultType]:
        """The results recorded under ``str(key)``, or ``{}`` if there are none (this
        does not wait for a result still being written)."""


class FsspecResultTracker(ResultTracker):
    """Results as JSON files under ``tracker_base``, a directory or any fsspec URL
    (``s3://bucket/hpo/run1``): ``put(key)`` writes ``<tracker_base>/<key>``, as TorchX
    does. ``get(key)`` reads that file, or ``<tracker_base>/<key>.json``, the file tx's
    ``utils.booth`` (``tx.apps.booth_main``) writes.

    Args:
        tracker_base: the directory or URL of the results.

    Raises (from ``put``/``get``):
        OSError: the store cannot be written or read (a missing result is not an error).
        ValueError: a stored file is not JSON.
    """

    def __init__(self, tracker_base: str) -> None:
        self._tracker_base = tracker_base

    def _path(self, key: KeyType, suffix: str = "") -> str:
        return f"{self._tracker_base.rstrip('/')}/{key}{suffix}"

    def put(self, key: KeyType, **results: ResultType) -> None:
        """Write ``results`` as indented JSON to ``<tracker_base>/<key>`` (parents created)."""
        # fsspec is needed only by apps that record results
        import fsspec

        with fsspec.open(self._path(key), "w", auto_mkdir=True) as f:
            json.dump(results, f, indent=2)

    def get(self, key: KeyType) -> Dict[str, ResultType]:
        """The results under ``key`` (``<key>``, else ``<key>.json``), or ``{}``."""
        import fsspec  # see put

        for suffix in ("", ".json"):
            try:
                with fsspec.open(self._path(key, suffix), "r") as f:
                    return json.load(f)
            except FileNotFoundError:
                continue
        return {}

    def __repr__(self) -> str:
        return f"FsspecResultTracker({self._tracker_base!r})"
