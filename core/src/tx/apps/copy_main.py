"""Copy one file between fsspec URLs: ``python -m tx.apps.copy_main --src URL --dst URL``.

Local destination directories are created. Exits 1 with a message when the source is
missing or is a directory.
"""
import argparse
import shutil
import sys
from typing import List, Optional

import fsspec

__all__ = ["CHUNK_BYTES", "copy", "main", "parse_args"]

CHUNK_BYTES = 1 << 20


def parse_args(argv: List[str]) -> argparse.Namespace:
    """Parse the command line (``--src``, ``--dst``)."""
    parser = argparse.ArgumentParser(prog="python -m tx.apps.copy_main", description="copy a file (fsspec URLs)")
    parser.add_argument("--src", required=True, help="source file URL or path")
    parser.add_argument("--dst", required=True, help="destination file URL or path")
    return parser.parse_args(argv)


def copy(src: str, dst: str) -> int:
    """Copy the file ``src`` to ``dst`` (fsspec URLs or paths).

    Returns:
        The number of bytes copied.

    Raises:
        FileNotFoundError: ``src`` does not exist.
        IsADirectoryError: ``src`` is a directory.
    """

    fs, path = fsspec.core.url_to_fs(src)
    if not fs.exists(path):
        raise FileNotFoundError(f"source {src} does not exist")
    if fs.isdir(path):
        raise IsADirectoryError(f"source {src} is a directory; only single files are copied")
    with fsspec.open(src, "rb") as fin, fsspec.open(dst, "wb", auto_mkdir=True) as fout:
        shutil.copyfileobj(fin, fout, CHUNK_BYTES)
    return fs.size(path)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the program; returns the exit status."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    print(f"copying {args.src} to {args.dst}", flush=True)
    try:
        size = copy(args.src, args.dst)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"copied {size} bytes", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
