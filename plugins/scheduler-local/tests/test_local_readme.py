"""The README's run options table is the schedulers' run_opts()."""
from pathlib import Path
from typing import Any, List

from tx.specs.runopts import get_type_name
from tx_scheduler_local.scheduler import create_cwd_scheduler, create_dir_scheduler

README = Path(__file__).resolve().parent.parent / "README.md"


def table_rows(sched: Any) -> List[str]:
    def esc(text: str) -> str:
        return text.replace("<", "&lt;").replace(">", "&gt;")

    return [
        f"| `{key}` | {get_type_name(opt.opt_type)} | {opt.default!r} | {esc(opt.help)} |"
        for key, opt in sched.run_opts()
    ]


def test_readme_has_the_run_options_table(tmp_path: Path) -> None:
    text = README.read_text()
    rows = table_rows(create_cwd_scheduler("tx", state_dir=str(tmp_path)))
    expected = "| option | type | default | description |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    assert expected in text, "README.md run options table is stale; it should read:\n" + expected
    dir_opts = {k for k, _ in create_dir_scheduler("tx", state_dir=str(tmp_path)).run_opts()}
    assert dir_opts == {k for k, _ in create_cwd_scheduler("tx", state_dir=str(tmp_path)).run_opts()}
