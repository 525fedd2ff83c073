"""A sweep's cancel names each job array once: ``<array>_[ranges]`` (scancel's array
expression), not one word per task (10,000 tasks were 20 ``scancel`` calls)."""
from tx_scheduler_slurm._array import RANGES_PER_WORD, scancel_words


def test_tasks_of_one_array_fold_into_ranges() -> None:
    ids = [f"77_{i}" for i in (5, 0, 1, 2, 9, 7, 8, 3)]
    assert scancel_words(ids) == ["77_[0-3,5,7-9]"]
    assert scancel_words([f"12_{i}" for i in range(10000)]) == ["12_[0-9999]"]


def test_other_ids_and_arrays_keep_their_first_order() -> None:
    ids = ["40", "41_3", "42", "41_1", "43_0", "41_2", "40"]
    assert scancel_words(ids) == ["40", "41_[1-3]", "42", "43_[0]", "40"]
    assert scancel_words([]) == []


def test_a_word_holds_at_most_ranges_per_word() -> None:
    gaps = [f"9_{2 * i}" for i in range(RANGES_PER_WORD + 3)]  # every other task: one range each
    words = scancel_words(gaps)
    assert len(words) == 2 and words[0].count(",") == RANGES_PER_WORD - 1 and words[1] == "9_[4000,4002,4004]"
