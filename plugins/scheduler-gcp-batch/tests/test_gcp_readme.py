"""The README's run options table matches the scheduler's own run options."""
from pathlib import Path

import pytest

from tx_scheduler_gcp_batch.scheduler import create_scheduler

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_has_the_run_options_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUDSDK_BATCH_LOCATION", raising=False)
    rows = ["| option | type | default | description |", "| --- | --- | --- | --- |"]
    for key, opt in create_scheduler("tx")._run_opts():
        rows.append(f"| `{key}` | {opt.opt_type.__name__} | {opt.default} | {opt.help} |")
    table = "\n".join(rows)
    assert table in README.read_text(), "README.md run options table is stale; it should read:\n" + table


def test_readme_names_every_environment_variable_the_plugin_reads() -> None:
    from tx_scheduler_gcp_batch import _client

    text = README.read_text()
    for var in (*_client.PROJECT_ENVS, _client.LOCATION_ENV, _client.BATCH_ENDPOINT_ENV, _client.LOGGING_ENDPOINT_ENV):
        assert f"${var}" in text, var
