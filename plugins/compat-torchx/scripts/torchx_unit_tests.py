"""Run TorchX's own unit tests against tx-torchx-compat and count what carries over.

Usage (from a worktree, so that its sources come first)::

    ../pytest-here.sh -- python plugins/compat-torchx/scripts/torchx_unit_tests.py \\
        /path/to/torchx-checkout [--failures] [--files] [--timeout 60]

``/path/to/torchx-checkout`` is a TorchX source tree (e.g. ``git archive v0.7.0`` of
github.com/pytorch/torchx), either its root or its ``torchx`` package directory. Nothing of
it is copied into this repository: the package directory is copied to a temporary
directory under the name ``torchx_src`` (so that ``import torchx`` in the tests resolves to
tx-torchx-compat, not to the checkout), and pytest runs there in a subprocess with a JUnit
XML report, which this script reads. TorchX's own test packages and examples, which its
tests import as ``torchx.<...>.test.<module>`` and ``torchx.examples...``, come from the copy
(a ``conftest.py`` of the run); every other ``torchx.`` name is tx-torchx-compat's.

Prints one line per measure::

    test files        65
    importable        17
    tests collected  150
    passed           120
    failed            30
    skipped            0

``--files`` adds one line per test file (``import error: <first line>`` or its counts);
``--failures`` lists each failing test with the first line of its message. ``--stub-private``
makes a private name a compat module lacks (``_load_components``, ``_get_job_dirs``, which
TorchX's tests import to patch) a stub, so that the other tests of such a file are counted
too (without it, a file that cannot import counts as an import error and none of its tests
are counted: the main reason an independent run counts more failures). ``--only TEXT`` runs
the test files whose path contains TEXT. Exit status 0 when pytest ran (whatever the
counts), 2 on bad input.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

SRC_NAME = "torchx_src"

#: conftest.py of the run: TorchX's own test packages (``torchx.<...>.test``) and examples
#: (``torchx.examples``), which its tests import by their ``torchx.`` names, are taken from
#: the copy (``torchx_src``); every other ``torchx.`` name is tx-torchx-compat's
CONFTEST = """
import importlib
import importlib.abc
import importlib.util
import sys


def _from_copy(fullname):
    parts = fullname.split(".")
    return parts[0] == "torchx" and ("test" in parts[1:] or parts[1:2] == ["examples"])


class _CopyLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        sys.modules[module.__name__] = importlib.import_module(self.target)


class _CopyFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not _from_copy(fullname):
            return None
        target = "%s." % SRC + fullname.split(".", 1)[1]
        if importlib.util.find_spec(target) is None:
            return None
        return importlib.util.spec_from_loader(fullname, _CopyLoader(target),
                                               is_package=fullname.split(".")[-1] in ("test", "examples"))


SRC = "{src}"
sys.meta_path.insert(0, _CopyFinder())

if {stub_private}:
    # --stub-private: a private name a compat module lacks is a stub, so that a test file
    # importing one (to patch it) still runs its other tests; a test using the stub fails
    import pkgutil

    import tx_torchx_compat.torchx as _pkg

    class _Stub:
        def __init__(self, module, name):
            self._where = "%s.%s" % (module, name)

        def __call__(self, *args, **kwargs):
            raise AttributeError("tx-torchx-compat has no private %s (stubbed)" % self._where)

        def __getattr__(self, attr):
            raise AttributeError("tx-torchx-compat has no private %s (stubbed)" % self._where)

    def _private_getattr(module, previous):
        def __getattr__(name):
            if previous is not None:
                try:
                    return previous(name)
                except AttributeError:
                    pass
            if name.startswith("_") and not name.startswith("__"):
                return _Stub(module.__name__.replace("tx_torchx_compat.", "", 1), name)
            raise AttributeError("module %r has no attribute %r" % (module.__name__, name))
        return __getattr__

    for _info in pkgutil.walk_packages(_pkg.__path__, _pkg.__name__ + ".", onerror=lambda name: None):
        try:
            _mod = importlib.import_module(_info.name)
        except Exception:  # a module for a backend not installed here: its import error stays
            continue
        _mod.__getattr__ = _private_getattr(_mod, _mod.__dict__.get("__getattr__"))
"""


def _package_dir(path: Path) -> Path:
    """The ``torchx`` package directory of a checkout given as its root or the package."""
    if (path / "torchx" / "__init__.py").is_file():
        return path / "torchx"
    if (path / "__init__.py").is_file() and (path / "specs").is_dir():
        return path
    raise SystemExit(f"error: {path} is not a TorchX checkout (no torchx/__init__.py)")


def _test_files(root: Path) -> list[str]:
    """Test files (TorchX's ``*_test.py`` convention) relative to ``root``, sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*_test.py"))


def _first_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in lines:  # pytest's "E   ..." line is the error itself
        if ln.startswith("E "):
            return ln[1:].strip()[:160]
    return (lines[-1] if lines else "")[:160]


def measure(checkout: Path, timeout: int, stub_private: bool = False, only: str = "") -> dict:
    """Run the tests; return ``{"files": {relpath: {...}}, "tests": [...]}``.

    ``stub_private``: private names the compat modules lack are stubs (see ``--stub-private``);
    ``only``: run only the test files whose path contains it.

    Each test is ``(file, name, outcome, message)`` with outcome one of passed, failed,
    skipped; each file has ``import_error`` (a line, or None).
    """
    pkg = _package_dir(checkout)
    with tempfile.TemporaryDirectory(prefix="torchx-unit-") as tmp:
        dst = Path(tmp) / SRC_NAME
        shutil.copytree(pkg, dst, ignore=shutil.ignore_patterns("__pycache__"))
        files = [f for f in _test_files(Path(tmp)) if only in f]
        (Path(tmp) / "conftest.py").write_text(
            CONFTEST.replace("{src}", SRC_NAME).replace("{stub_private}", str(stub_private)))
        report = Path(tmp) / "report.xml"
        env = dict(os.environ)
        env.setdefault("TX_LOG_LEVEL", "WARNING")
        # TorchX's MLflow tests use a file store, which MLflow 3 refuses unless opted in
        # (with TorchX itself too): opt in, so that they test the tracker, not MLflow's policy
        env.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        cmd = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"--junitxml={report}", f"--timeout={timeout}", "--rootdir", tmp,
            "-o", "junit_family=xunit1", "--continue-on-collection-errors", *files,
        ]
        subprocess.run(cmd, cwd=tmp, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        if not report.is_file():
            raise SystemExit("error: pytest wrote no report (is pytest-timeout installed?)")
        return _parse(report, files)


def _parse(report: Path, files: list[str]) -> dict:
    by_file = {f: {"import_error": None} for f in files}
    tests = []
    for case in ET.parse(report).getroot().iter("testcase"):
        file = case.get("file") or ""
        classname = case.get("classname") or ""
        if not file:  # collection errors carry only a dotted classname
            file = classname.replace(".", "/") + ".py"
        name = case.get("name") or ""
        err = case.find("error")
        fail = case.find("failure")
        skip = case.find("skipped")
        if err is not None and (name == "" or "collect" in (err.get("message") or "")):
            key = file if file in by_file else next(
                (f for f in files if f[:-3].replace("/", ".") == classname), file)
            by_file.setdefault(key, {})["import_error"] = _first_line(err.text or err.get("message"))
            continue
        if fail is not None or err is not None:
            node = fail if fail is not None else err
            tests.append((file, f"{classname}::{name}", "failed",
                          _first_line(node.get("message") or node.text)))
        elif skip is not None:
            tests.append((file, f"{classname}::{name}", "skipped", ""))
        else:
            tests.append((file, f"{classname}::{name}", "passed", ""))
    return {"files": by_file, "tests": tests}


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", type=Path, help="a TorchX source tree (root or torchx/)")
    ap.add_argument("--files", action="store_true", help="one line per test file")
    ap.add_argument("--failures", action="store_true", help="list failing tests")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per test (default 60)")
    ap.add_argument("--stub-private", action="store_true",
                    help="private names the compat modules lack are stubs, so that a test file importing "
                         "one still runs (its tests that use the stub fail)")
    ap.add_argument("--only", default="", metavar="TEXT", help="only the test files whose path contains TEXT")
    args = ap.parse_args(argv)
    result = measure(args.checkout.resolve(), args.timeout, args.stub_private, args.only)
    files, tests = result["files"], result["tests"]
    counts = collections.Counter(t[2] for t in tests)
    importable = sum(1 for f in files.values() if not f["import_error"])
    print(f"test files      {len(files):5d}")
    print(f"importable      {importable:5d}")
    print(f"tests collected {len(tests):5d}")
    for outcome in ("passed", "failed", "skipped"):
        print(f"{outcome:15s} {counts[outcome]:5d}")
    if args.files:
        per = collections.defaultdict(collections.Counter)
        for f, _, outcome, _ in tests:
            per[f][outcome] += 1
        for f, info in sorted(files.items()):
            if info["import_error"]:
                print(f"  {f}: import error: {info['import_error']}")
            else:
                c = per.get(f, collections.Counter())
                print(f"  {f}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    if args.failures:
        for f, name, outcome, msg in tests:
            if outcome == "failed":
                print(f"  FAILED {name}: {msg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
