"""The README's run options table is generated from the scheduler's run options."""
from pathlib import Path

from tx_scheduler_slurm.options import runopts_markdown
from tx_scheduler_slurm.scheduler import create_scheduler

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_has_the_run_options_table() -> None:
    table = runopts_markdown()
    assert table in README.read_text(), "README.md run options table is stale; it should read:\n" + table
    assert [k for k, _ in create_scheduler("tx").run_opts()] == [
        ln.split("`")[1] for ln in table.splitlines()[2:]]
