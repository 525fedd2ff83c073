"""The import finder: ``torchx.*`` resolves to tx only where no real TorchX is importable,
costs nothing until ``torchx`` is imported, and never hides a real TorchX."""
from typing import Any

FAKE_TORCHX = {
    "torchx/__init__.py": "__version__ = '0.7.0'\nREAL = True\n",
    "torchx/specs/__init__.py": "REAL = True\n",
}


def test_pth_installs_the_finder_and_imports_nothing_else(py: Any) -> None:
    p = py("import sys; print('tx_torchx_compat._finder' in sys.modules, "
           "any(m == 'tx' or m.startswith('tx.') for m in sys.modules), 'torchx' in sys.modules)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "False", "False"]


def test_torchx_resolves_to_tx(py: Any) -> None:
    p = py("import torchx, torchx.specs as s, tx.specs, torchx.specs.api as a, tx.specs.api as b\n"
           "from torchx.schedulers.api import Scheduler\n"
           "from tx.schedulers.api import Scheduler as S\n"
           "print(torchx.__version__, s.AppDef is tx.specs.AppDef, a.Role is b.Role, Scheduler is S)")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0.7.0", "True", "True", "True"]


def test_unknown_module_is_module_not_found(py: Any) -> None:
    p = py("import torchx.no_such_module")
    assert p.returncode == 1 and "ModuleNotFoundError: No module named 'torchx.no_such_module'" in p.stderr


def test_missing_plugin_module_names_the_distribution(py: Any) -> None:
    p = py("import importlib.util, sys\n"
           "have = importlib.util.find_spec('tx_scheduler_slurm') is not None\n"
           "try:\n"
           "    import torchx.schedulers.slurm_scheduler as m\n"
           "    # TorchX's class is tx's (a subclass that ignores mounts as TorchX does)\n"
           "    print('imported', have, [k.__module__ for k in m.SlurmScheduler.__mro__][2])\n"
           "except ModuleNotFoundError as e:\n"
           "    print('missing', have, e)\n")
    assert p.returncode == 0, p.stderr
    word, have, *rest = p.stdout.split()
    if have == "True":
        assert word == "imported" and rest == ["tx_scheduler_slurm.scheduler"], p.stdout
    else:
        assert word == "missing" and "pip install tx-scheduler-slurm" in p.stdout, p.stdout


def test_a_real_torchx_wins(py: Any, install: Any) -> None:
    install("torchx", "0.7.0", FAKE_TORCHX)
    p = py("import torchx, torchx.specs, sys\n"
           "print(getattr(torchx, 'REAL', False), getattr(torchx.specs, 'REAL', False),"
           " torchx.__file__.endswith('site/torchx/__init__.py'))")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "True", "True"]
    # a submodule the real TorchX lacks is not taken from tx either
    p = py("import torchx.runner")
    assert p.returncode == 1 and "No module named 'torchx.runner'" in p.stderr


def test_tx_says_once_that_a_real_torchx_wins(py: Any, install: Any) -> None:
    install("torchx", "0.7.0", FAKE_TORCHX)
    install("acme-sched", "1.0", {"acme_sched.py": "def create_scheduler(s, **k): raise RuntimeError\n"},
            "[torchx.schedulers]\nacme = acme_sched:create_scheduler\n")
    first = py("plugins", tx=True, extra={"TX_NO_CACHE": "1"})
    assert first.returncode == 0, first.stderr
    notice = [ln for ln in first.stderr.splitlines() if "a real TorchX is installed" in ln]
    assert len(notice) == 1 and "site/torchx/__init__.py" in notice[0], first.stderr
    assert "acme" not in first.stdout.split()  # TorchX's groups are left to the real TorchX
    second = py("plugins", tx=True, extra={"TX_NO_CACHE": "1"})
    assert second.returncode == 0 and "a real TorchX is installed" not in second.stderr, second.stderr


def _site_with_pth(tmp_path: Any, finder: str = "") -> Any:
    import shutil
    from pathlib import Path
    d = tmp_path / "pth-site"
    d.mkdir()
    shutil.copy(Path(__file__).resolve().parent.parent / "src" / "tx_torchx_compat.pth", d)
    if finder:
        (d / "tx_torchx_compat").mkdir()
        (d / "tx_torchx_compat" / "__init__.py").write_text("")
        (d / "tx_torchx_compat" / "_finder.py").write_text(finder)
    return d


def test_the_pth_says_nothing_where_the_package_is_not_importable(tmp_path: Any) -> None:
    """A container that mounts the venv but not the editable install's sources (local_docker)
    sees the .pth without its package: Python starts quietly, as without the .pth."""
    import subprocess
    import sys
    d = _site_with_pth(tmp_path)
    p = subprocess.run([sys.executable, "-S", "-c", f"import site; site.addsitedir({str(d)!r}); print('up')"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert (p.returncode, p.stdout, p.stderr) == (0, "up\n", "")


def test_the_pth_still_reports_a_finder_that_cannot_import(tmp_path: Any) -> None:
    import subprocess
    import sys
    d = _site_with_pth(tmp_path, finder="import no_such_module_of_tx\n")
    p = subprocess.run([sys.executable, "-S", "-c", f"import site; site.addsitedir({str(d)!r}); print('up')"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert "Error processing line 1" in p.stderr and "no_such_module_of_tx" in p.stderr, p.stderr
