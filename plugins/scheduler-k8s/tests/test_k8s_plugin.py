"""Registration, lazy imports and the README's run options tables."""
import subprocess
import sys
from pathlib import Path

import pytest

from tx.testing import isolated_registry, register_plugin
from tx_scheduler_k8s import hooks
from tx_scheduler_k8s.scheduler import runopts_markdown

README = Path(__file__).resolve().parent.parent / "README.md"
NAMES = ["kubernetes", "kubernetes_jobset", "kubernetes_mcad"]


def test_registers_the_three_schedulers() -> None:
    with isolated_registry() as tx_registry, register_plugin(hooks, name="kubernetes"):
        for name in NAMES:
            reg = tx_registry.get("schedulers", name)
            assert reg is not None
            sched = reg.load()("tx")
            assert sched.backend == name and sched.workspace_kind == "docker" and not sched.runs_on_host


@pytest.mark.parametrize("name", NAMES)
def test_readme_has_the_run_options_table(name: str) -> None:
    from tx.plugins import import_object

    sched = import_object(f"tx_scheduler_k8s.{name}_scheduler:create_scheduler")("tx")
    table = runopts_markdown(sched._run_opts())
    assert table in README.read_text(), f"README.md run options table of {name} is stale; it should read:\n{table}"


def test_hooks_and_dryruns_import_no_client() -> None:
    code = ("import sys, tx_scheduler_k8s.hooks, tx_scheduler_k8s.kubernetes_jobset_scheduler, "
            "tx_scheduler_k8s.kubernetes_mcad_scheduler, tx_scheduler_k8s.kubernetes_scheduler\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3', 'yaml')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)
