"""``tx list`` when a scheduler can be read only in part, or several schedulers are asked
for and one cannot be read: what is known is listed, what is not is said in one line each,
and the exit status is 1 (never a silent, incomplete list)."""
from __future__ import annotations

import json
from typing import Any, List, Mapping, Optional

import pytest

from tx import hookimpl
from tx.cli.main import main
from tx.runner import Runner
from tx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    PartialListError,
    Scheduler,
    SchedulerError,
)
from tx.specs import AppDef, AppDryRunInfo, AppState, runopts
from tx.testing import register_plugin


class ListingScheduler(Scheduler[dict]):
    """Lists fixed apps; ``half`` can read only its first source, ``down`` none."""

    def __init__(self, backend: str, session_name: str) -> None:
        super().__init__(backend, session_name)

    def _run_opts(self) -> runopts:
        return runopts()

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, Any]) -> AppDryRunInfo[dict]:
        raise NotImplementedError

    def schedule(self, dryrun_info: AppDryRunInfo[dict]) -> str:
        raise NotImplementedError

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        return None

    def _cancel_existing(self, app_id: str) -> None:
        pass

    def list(self) -> List[ListAppResponse]:
        if self.backend == "down":
            raise SchedulerError("down: the API server does not answer (connection refused)")
        known = [ListAppResponse(app_id=f"{self.backend}-1", state=AppState.RUNNING, name="train")]
        if self.backend == "half":
            raise PartialListError("the accounting database did not answer within 2 s; finished apps "
                                   "only it knows cannot be listed", known)
        return known


class ListingPlugin:
    @hookimpl
    def tx_register_schedulers(self, register: Any) -> None:
        for name in ("whole", "half", "down"):
            register(name, lambda session_name, _n=name, **kw: ListingScheduler(_n, session_name))


@pytest.fixture(autouse=True)
def plugin() -> Any:
    with register_plugin(ListingPlugin(), "listing"):
        yield


def test_runner_list_gives_the_partial_apps_with_their_handles() -> None:
    with Runner() as runner, pytest.raises(PartialListError, match="did not answer") as info:
        runner.list("half")
    assert [(a.app_handle, a.state) for a in info.value.apps] == [("half://tx/half-1", AppState.RUNNING)]


def test_one_partial_scheduler_lists_what_it_knows_says_what_not_and_exits_1(capsys: Any) -> None:
    assert main(["list", "-s", "half"]) == 1
    out, err = capsys.readouterr()
    assert "half://tx/half-1" in out and "RUNNING" in out
    assert err.strip().splitlines() == [
        "tx list: could not read all of half: the accounting database did not answer within 2 s; finished "
        "apps only it knows cannot be listed (the apps it could list are shown)"]


def test_several_schedulers_one_down_the_rest_still_shows(capsys: Any) -> None:
    assert main(["list", "-s", "whole,half,down", "--json"]) == 1
    out, err = capsys.readouterr()
    handles = [json.loads(line)["app_handle"] for line in out.splitlines()]
    assert sorted(handles) == ["half://tx/half-1", "whole://tx/whole-1"]
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("tx list: could not read all of half: ")
    assert lines[1] == ("tx list: could not read all of down: down: the API server does not answer "
                        "(connection refused) (none of its apps are shown)")


def test_every_scheduler_read_in_whole_exits_0(capsys: Any) -> None:
    assert main(["list", "-s", "whole"]) == 0
    out, err = capsys.readouterr()
    assert "whole://tx/whole-1" in out and err == ""


def test_one_scheduler_that_cannot_be_read_at_all_is_an_error(capsys: Any) -> None:
    assert main(["list", "-s", "down"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "the API server does not answer" in err and "could not read all" not in err
