"""Walking a workspace while honouring its ignore file."""
from __future__ import annotations

import os
from typing import Iterator, List

#: ignore file at the workspace root; gitignore syntax (``#`` comments, ``!`` negation)
IGNORE_FILE = ".txignore"


def _patterns(root: str, ignore_name: str) -> List[str]:
    path = os.path.join(root, ignore_name)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [ln.rstrip("\n") for ln in f if ln.strip() and not ln.lstrip().startswith("#")]


def walk_workspace(root: str, ignore_name: str = IGNORE_FILE) -> Iterator[str]:
    """Yield the paths (relative to ``root``, ``/``-separated) of the files in the
    workspace that ``<root>/<ignore_name>`` does not exclude. The ignore file itself is kept.

    Raises:
        NotADirectoryError: ``root`` is not a directory.
    """
    if not os.path.isdir(root):
        raise NotADirectoryError(f"workspace {root!r} is not a directory")
    import pathspec

    spec = pathspec.PathSpec.from_lines("gitwildmatch", _patterns(root, ignore_name))
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        dirnames[:] = [d for d in dirnames if not spec.match_file(rel_dir + d + "/")]
        for name in filenames:
            rel = rel_dir + name
            if name == ignore_name and not rel_dir or not spec.match_file(rel):
                yield rel
