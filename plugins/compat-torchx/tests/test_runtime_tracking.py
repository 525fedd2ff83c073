"""``torchx.runtime.tracking``: results written by an app (tx's ``utils.booth``, or TorchX's
``tracker[key] = {...}``) read back as a hyperparameter search reads them."""
import json
from pathlib import Path
from typing import Any, Dict

import pytest


def fetch_metric(tracker_base: str, trial_index: int, metric: str) -> Dict[str, float]:
    """What a search's metric does with a finished trial: mean (and sem, if recorded) of
    ``metric`` in the trial's result (``metric`` or ``metric/mean`` + ``metric/sem``)."""
    from torchx.runtime.tracking import FsspecResultTracker

    res = FsspecResultTracker(tracker_base)[trial_index]
    if metric in res:
        return {"mean": float(res[metric]), "sem": 0.0}
    return {"mean": float(res[f"{metric}/mean"]), "sem": float(res[f"{metric}/sem"])}


def test_booth_result_read_through_the_tracker(cli: Any, tmp_path: Path) -> None:
    base = tmp_path / "hpo"
    p = cli("run", "-s", "local_cwd", "utils.booth", "--x1", "1", "--x2", "3", "--trial_idx", "4",
            "--tracker_base", str(base))
    assert p.returncode == 0, p.stderr
    from tx_torchx_compat.torchx.runtime.tracking import FsspecResultTracker

    assert fetch_metric(str(base), 4, "booth_eval") == {"mean": 0.0, "sem": 0.0}
    assert FsspecResultTracker(str(base))[5] == {}  # a trial without a result


def test_put_and_get_as_torchx_stores_them(tmp_path: Path) -> None:
    from tx_torchx_compat.torchx.runtime.tracking import FsspecResultTracker, ResultTracker

    t = FsspecResultTracker(str(tmp_path / "base"))
    assert isinstance(t, ResultTracker)
    t["7"] = {"acc/mean": 0.5, "acc/sem": 0.125}
    t.put(8, acc=0.75, note="ok")
    assert json.loads((tmp_path / "base" / "7").read_text()) == {"acc/mean": 0.5, "acc/sem": 0.125}
    assert fetch_metric(str(tmp_path / "base"), 7, "acc") == {"mean": 0.5, "sem": 0.125}
    assert t.get("8") == {"acc": 0.75, "note": "ok"}
    (tmp_path / "base" / "9").write_text("not json")
    with pytest.raises(ValueError):
        t[9]


def test_result_tracker_is_abstract() -> None:
    from tx_torchx_compat.torchx.runtime.tracking import ResultTracker

    with pytest.raises(TypeError):
        ResultTracker()  # type: ignore[abstract]

    class Memory(ResultTracker):
        def __init__(self) -> None:
            self.d: Dict[str, Any] = {}

        def put(self, key: Any, **results: Any) -> None:
            self.d[str(key)] = results

        def get(self, key: Any) -> Dict[str, Any]:
            return self.d.get(str(key), {})

    m = Memory()
    m[1] = {"x": 2}
    assert m["1"] == {"x": 2} and m[2] == {}
