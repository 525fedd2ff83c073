"""tx.schedulers.sweep_table: trials' commands as one template and a table of what differs;
every trial's words come back exactly, and a row holds the values, not the words around them."""
from tx.schedulers.sweep_table import INDEX, compact, split_words, trial_table


def _cmd(i: int, lr: str, b: str) -> list:
    return ["python", "-c", f"print('lr={lr} b={b}'); import sys; sys.exit(0)", f"TX_TRIAL_INDEX={i}",
            f"TX_CHECKPOINT_DIR=/ck/sweep-x%2Ftrial-{i}", "--fixed"]


def test_every_trial_comes_back_and_rows_hold_only_the_values():
    grid = [(lr, b) for lr in ("0.01", "1e-3", "-2") for b in ("x y", "it's", "32")]
    cmds = [_cmd(i, lr, b) for i, (lr, b) in enumerate(grid)]
    table = split_words(cmds)
    assert [table.words(i) for i in range(len(cmds))] == cmds
    assert table.template[0] == ["python"] and table.template[-1] == ["--fixed"]
    for (lr, b), row in zip(grid, table.rows):
        assert sum(len(v) for v in row) <= len(lr) + len(b) + 16 and not any("print" in v for v in row)


def test_words_of_different_token_counts_are_whole_holes_and_lengths_must_match():
    cmds = [["a", "v=1"], ["a", "v=1.5.x y"], ["a", "v"]]
    table = split_words(cmds)
    assert [table.words(i) for i in range(3)] == cmds
    assert split_words([["a"], ["a", "b"]]) is None and split_words([]) is None
    same = split_words([["a", "b"], ["a", "b"]])
    assert same.holes == 0 and same.words(1) == ["a", "b"]


def test_compact_moves_the_index_into_the_template_and_reads_repeated_values_once():
    grid = [(lr, b) for lr in ("0.01", "0.1", "1.5") for b in ("16", "32", "0")] * 2  # 18 trials: indexes 10+
    cmds = [_cmd(i, lr, b) + [f"app_{i}", f"--lr={lr}"] for i, (lr, b) in enumerate(grid)]
    full = split_words(cmds)
    table = compact(full)
    assert [table.words(i) for i in range(len(cmds))] == cmds
    assert table.holes == 2 and sorted(table.rows[13]) == ["0.1", "32"]  # lr twice, the index three times: read once / none
    assert ["app_", INDEX] in table.template and ["TX_TRIAL_INDEX=", INDEX] in table.template
    # a column that only looks like the index in its first rows stays a column
    odd = [["x", f"{i if i < 11 else 99}"] for i in range(12)]
    assert compact(split_words(odd)).words(11) == ["x", "99"] and compact(split_words(odd)).holes == 1


def test_cycles_hold_a_grids_axes_once_whatever_the_number_of_trials():
    grid = [(lr, b) for lr in ("0.01", "0.1", "1.5") for b in ("16", "32", "0", "8")]
    cmds = [["train", f"/ck/{lr}-{b}/r", f"--lr={lr}", f"--b={b}", f"--seed={i * i % 23}"]
            for i, (lr, b) in enumerate(grid)]
    table = compact(split_words(cmds), cycles=True)
    assert [table.words(i) for i in range(len(cmds))] == cmds
    assert sorted(table.cycles) == [(1, ["16", "32", "0", "8"]), (4, ["0.01", "0.1", "1.5"])]
    assert table.holes == 1  # the seed is no grid's axis: a column
    assert len(table.template[1]) == 5  # "/ck/", lr, "-", b, "/r": made of the axes (found after it)
    # without cycles (the default) the axes stay columns
    assert compact(split_words(cmds)).cycles == [] and compact(split_words(cmds)).holes == 3  # the word of two: theirs


def test_trial_table_puts_the_trials_own_env_first_and_refuses_what_a_row_cannot_hold():
    grid = [(lr, b) for lr in ("0.1", "0.01") for b in ("16", "32", "64")]
    envs = [{"LR": lr, "SHARED": "x", "B": b} for lr, b in grid]
    words = [["python", "train.py", f"--lr={lr}", "--b", b, f"--out=/o/{i}"] for i, (lr, b) in enumerate(grid)]
    table = trial_table(envs, words, ["B", "LR"])
    assert [table.words(i) for i in range(len(grid))] == [
        [f"B={b}", f"LR={lr}", *w] for (lr, b), w in zip(grid, words)]
    assert table.holes == 0 and len(table.cycles) == 2  # a grid's two axes, once each; the index in the template
    assert trial_table([{"LR": "1"}, {}], [["a"], ["a"]], ["LR"]) is None  # a trial lacks one of its own keys
    assert trial_table([{}, {}], [["a"], ["a", "b"]], []) is None  # words of different lengths
    assert trial_table([{}, {}], [["a", "x"], ["a", "y\nz"]], []) is None  # a row is a line
