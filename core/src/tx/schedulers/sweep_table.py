"""A sweep's trials as one command and a table: what a scheduler's native array ships once.

The trials of a sweep run one command that differs, trial to trial, only in a few places
(the parameters' values in the args, ``TX_TRIAL_INDEX``, ``TX_TRIAL_PARAMS``, the trial's
``TX_CHECKPOINT_DIR``). :func:`split_words` keeps what every trial shares once, as a
template, and puts the rest in a table, one row per trial, so that an array's request
does not grow with each trial's whole command: the replica reads its row by its index
(Slurm's ``$SLURM_ARRAY_TASK_ID``) and fills the template's holes with it. A word that
differs is cut into tokens (runs of letters, digits, ``.``, ``+``, ``-``, ``_``, and each
other character alone): where every trial's has as many, each run of differing tokens is a
hole; else one hole between the tokens they all start and end with. So a row holds the
values (``0.1``), not the words around them (``print('lr=0.1 ...')``). Pure functions: no backend is
called.
"""
from __future__ import annotations

import hashlib
import re
import shlex
from typing import Any, List, Mapping, Optional, Sequence, Union

import attrs

__all__ = ["INDEX", "SweepTable", "compact", "sh_statements", "split_words", "table_text", "trial_table"]

#: the hole of a template that is the trial's index itself (no column of the table)
INDEX = -1

#: a word's tokens: runs of value characters, and each other character alone
_TOKENS = re.compile(r"[A-Za-z0-9_.+\-]+|[^A-Za-z0-9_.+\-]")

#: a template word: its pieces, constant text (str) or the number of a hole (int)
Word = List[Union[str, int]]


@attrs.frozen
class SweepTable:
    """Trials' commands as one template and a table.

    Attributes:
        template: the words, each as pieces: constant text (str) or hole ``k`` (int): value
            ``k`` of each trial's row; hole :data:`INDEX` (only after :func:`compact`) is the
            trial's index, in decimal; hole ``-2 - j`` (only after ``compact(cycles=True)``)
            is cycle ``j``.
        cycles: ``(stride, values)``: cycle ``j``'s value for trial ``i`` is
            ``values[(i // stride) % len(values)]`` (a grid's axis: its values once, not per trial).
        rows: per trial, in trial order, its values of the holes (hole ``k`` is ``row[k]``).
    """

    template: List[Word]
    rows: List[List[str]]
    cycles: List["tuple[int, List[str]]"] = attrs.field(factory=list)

    @property
    def holes(self) -> int:
        """How many values each row holds."""
        return len(self.rows[0]) if self.rows else 0

    def words(self, index: int) -> List[str]:
        """Trial ``index``'s words: the template with its row filled in."""
        return ["".join(self.value(p, index) if isinstance(p, int) else p for p in w) for w in self.template]

    def value(self, hole: int, index: int) -> str:
        """Hole ``hole``'s value for trial ``index`` (a column, :data:`INDEX` or a cycle)."""
        if hole >= 0:
            return self.rows[index][hole]
        if hole == INDEX:
            return str(index)
        stride, values = self.cycles[-2 - hole]
        return values[(index // stride) % len(values)]

    def digest(self, text: str) -> str:
        """12 hex digits of the SHA-256 of ``text`` (the table as its backend writes it): a
        name for its file that two sweeps with different tables never share."""
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def split_words(commands: Sequence[Sequence[str]]) -> Optional[SweepTable]:
    """The commands (one list of words per trial, unquoted) as one template and a table of
    what differs; None when they cannot be (no commands, or two differ in their number of
    words). ``table.words(i) == commands[i]`` for every trial.

    Time and memory are linear in the commands' total size.
    """
    if not commands:
        return None
    first = list(commands[0])
    if any(len(c) != len(first) for c in commands):
        return None
    template: List[Word] = []
    columns: List[List[str]] = []  # hole k: each trial's value
    for i, word in enumerate(first):
        if all(c[i] == word for c in commands):
            template.append([word])
            continue
        toks = [_TOKENS.findall(c[i]) for c in commands]
        if any(len(t) != len(toks[0]) for t in toks):  # values of different shapes: one hole
            pre, post = _common_ends(toks)  # between the tokens they all start and end with
            template.append([w for w in ("".join(toks[0][:pre]), len(columns),
                                         "".join(toks[0][len(toks[0]) - post:])) if w != ""])
            columns.append(["".join(t[pre:len(t) - post]) for t in toks])
            continue
        pieces: Word = []
        for j, tok in enumerate(toks[0]):
            if all(t[j] == tok for t in toks):
                if pieces and isinstance(pieces[-1], str):
                    pieces[-1] += tok
                else:
                    pieces.append(tok)
            elif pieces and isinstance(pieces[-1], int):  # next to a hole: one hole
                col = columns[pieces[-1]]
                for r, t in enumerate(toks):
                    col[r] += t[j]
            else:
                pieces.append(len(columns))
                columns.append([t[j] for t in toks])
        template.append(pieces)
    return SweepTable(template, [list(r) for r in zip(*columns)] if columns else [[] for _ in commands])


def trial_table(envs: Sequence[Mapping[str, str]], words: Sequence[Sequence[str]],
                own: Sequence[str]) -> Optional[SweepTable]:
    """The trials' own env (``K=V`` words of the keys ``own``, in that order) followed by each
    trial's command words, as one template and a table with a grid's axes as cycles
    (:func:`split_words`, then :func:`compact`); None where they cannot be one: a trial
    lacks one of ``own``, two trials' words differ in number, or a value holds a newline (a
    row of :func:`table_text` is a line). ``envs[i]`` and ``words[i]`` are trial ``i``'s."""
    if any(k not in env for env in envs for k in own):
        return None
    table = split_words([[f"{k}={env[k]}" for k in own] + list(w) for env, w in zip(envs, words)])
    if table is None or any("\n" in v for row in table.rows for v in row):
        return None
    return compact(table, cycles=True)


def _common_ends(toks: Sequence[Sequence[str]]) -> "tuple[int, int]":
    """How many tokens every list starts with alike, and ends with alike (not overlapping)."""
    shortest = min(len(t) for t in toks)
    pre = 0
    while pre < shortest and all(t[pre] == toks[0][pre] for t in toks):
        pre += 1
    post = 0
    while post < shortest - pre and all(t[len(t) - 1 - post] == toks[0][len(toks[0]) - 1 - post] for t in toks):
        post += 1
    return pre, post


def compact(table: SweepTable, cycles: bool = False) -> SweepTable:
    """``table`` with fewer columns, the same :meth:`SweepTable.words`: a column whose
    value in row ``r`` is ``P + str(r) + S`` (``P``, ``S`` the same in every row: an app id
    ``<job>_<r>``, ``TX_TRIAL_INDEX``, a trial's directory ``trial-<r>``) becomes the
    template's ``P``, :data:`INDEX`, ``S``; a column equal to an earlier one (a value in the
    args and in ``TX_TRIAL_PARAMS``) is read from that one. For backends whose replica knows
    its index (every array's does): at 10,000 trials of a 100x100 grid, rows of two values.
    With ``cycles``, a column whose value repeats with the index as a grid's axis does
    (``values[(r // stride) % len(values)]``, the values at most half the rows) becomes a
    cycle (:attr:`SweepTable.cycles`): a grid's table then has no rows' values at all, its
    size that of the axes' values, whatever the number of trials.

    Time linear in the table's size.
    """
    rows, n = table.rows, len(table.rows)
    if not rows or not rows[0]:
        return table
    columns = [[r[k] for r in rows] for k in range(len(rows[0]))]
    new: "dict[int, object]" = {}  # old hole -> new hole (int) or (P, S) around the index
    kept: "dict[tuple, int]" = {}
    out_cols: List[List[str]] = []
    found: "dict[tuple, int]" = {}
    out_cycles: "List[tuple[int, List[str]]]" = []
    for k, col in enumerate(columns):
        around = _around_index(col)
        if around is not None:
            new[k] = around
            continue
        cycle = _cycle(col) if cycles else None
        if cycle is not None:
            key = (cycle[0], tuple(cycle[1]))
            if key not in found:
                found[key] = -2 - len(out_cycles)
                out_cycles.append(cycle)
            new[k] = ("cycle", found[key])
    # then the others, shortest values first: a word made of other values ("<lr>-<b>") is
    # written from theirs (a grid's axes, or columns kept before it)
    sources: "List[tuple[int, Any]]" = [(-2 - j, c) for j, c in enumerate(out_cycles)]
    for k in sorted((k for k in range(len(columns)) if k not in new), key=lambda k: sum(map(len, columns[k]))):
        col = columns[k]
        key = tuple(col)
        if key in kept:
            new[k] = kept[key]
            continue
        parts = _of_parts(col, sources) if sources else None
        if parts is not None:
            new[k] = ("parts", parts)
            continue
        kept[key] = len(out_cols)
        sources.append((len(out_cols), col))
        out_cols.append(col)
        new[k] = kept[key]
    template: List[Word] = []
    for w in table.template:
        pieces: Word = []
        for p in w:
            parts: "list[Union[str, int]]"
            if isinstance(p, int):
                m = new[p]
                if isinstance(m, int):
                    parts = [m]
                elif m[0] == "cycle":  # type: ignore[index]
                    parts = [m[1]]  # type: ignore[index, list-item]
                elif m[0] == "parts":  # type: ignore[index]
                    parts = list(m[1])  # type: ignore[index, call-overload]
                else:
                    parts = [m[0], INDEX, m[1]]  # type: ignore[index, list-item]
            else:
                parts = [p]
            for q in parts:
                if q == "":
                    continue
                if isinstance(q, str) and pieces and isinstance(pieces[-1], str):
                    pieces[-1] += q
                else:
                    pieces.append(q)
        template.append(pieces)
    return SweepTable(template, [list(r) for r in zip(*out_cols)] if out_cols else [[] for _ in range(n)],
                      out_cycles)


def _cycle(col: Sequence[str]) -> "Optional[tuple[int, List[str]]]":
    """``(stride, values)`` where ``col[r] == values[(r // stride) % len(values)]`` for every
    row and the values are at most half the rows, else None."""
    n = len(col)
    stride = next((r for r in range(1, n) if col[r] != col[0]), n)
    values: List[str] = []
    for b in range(0, n, stride):
        if values and col[b] == values[0]:
            break
        values.append(col[b])
    if len(values) > n // 2:
        return None
    m = len(values)
    if all(v == values[(r // stride) % m] for r, v in enumerate(col)):
        return stride, values
    return None


def _of_parts(col: Sequence[str], sources: "Sequence[tuple[int, Any]]") -> "Optional[Word]":
    """``col`` as constant text and the values of one or two sources, such as ``P + A + M +
    B + S``, when every row is so; else None. A source is ``(hole, cycle)``, a cycle
    ``(stride, values)`` for a negative hole, else ``(hole, column)``."""
    n = len(col)

    def getter(src: Any) -> Any:
        if src[0] < 0:
            stride, values = src[1]
            return lambda r: values[(r // stride) % len(values)]
        column = src[1]
        return column.__getitem__

    vals = [getter(src) for src in sources[:12]]
    v0 = col[0]
    for a, va in enumerate(vals):
        a0 = va(0)
        for at in _finds(v0, a0):
            pre, rest = v0[:at], v0[at + len(a0):]
            if all(col[r] == pre + va(r) + rest for r in range(n)):
                return [w for w in (pre, sources[a][0], rest) if w != ""]
            for b, vb in enumerate(vals):
                if b == a:
                    continue
                for bt in _finds(rest, vb(0)):
                    mid, post = rest[:bt], rest[bt + len(vb(0)):]
                    if all(col[r] == pre + va(r) + mid + vb(r) + post for r in range(n)):
                        return [w for w in (pre, sources[a][0], mid, sources[b][0], post) if w != ""]
    return None


def _finds(text: str, part: str) -> List[int]:
    """Where ``part`` (not empty) starts in ``text``, at most 4 places."""
    out: List[int] = []
    at = text.find(part) if part else -1
    while at >= 0 and len(out) < 4:
        out.append(at)
        at = text.find(part, at + 1)
    return out


def _around_index(col: Sequence[str]) -> "Optional[tuple[str, str]]":
    """``(P, S)`` where ``col[r] == P + str(r) + S`` for every row ``r``, else None."""
    v0 = col[0]
    at = v0.find("0")
    while at >= 0:
        pre, post = v0[:at], v0[at + 1:]
        if all(v == f"{pre}{r}{post}" for r, v in enumerate(col)):
            return pre, post
        at = v0.find("0", at + 1)
    return None


def table_text(table: SweepTable) -> str:
    """The rows as text: line ``i + 1`` is trial ``i``'s values, shell-quoted, separated by
    spaces (what :func:`sh_statements` reads)."""
    return "".join(" ".join(shlex.quote(v) for v in row) + "\n" for row in table.rows)


def sh_statements(table: SweepTable, exports: int, feed: str, where: str) -> List[str]:
    """POSIX ``sh`` statements that run trial ``$i``: its cycles' values picked
    (``tx_c<j>``), its row read (when the table has columns) from the output of the command
    ``feed`` (:func:`table_text`'s text) into the positional parameters, the first
    ``exports`` words ``export``-ed (the trial's own ``K=V`` env) and the rest ``exec``-ed.
    No tool but the shell's builtins (and ``feed``). An index out of the table's range:
    ``tx: no row $i in <where>`` on stderr, exit code 2. The caller sets ``i``."""
    out = [f'if ! [ "$i" -ge 0 ] 2>/dev/null || ! [ "$i" -lt {len(table.rows)} ]; then '
           f'echo "tx: no row $i in {where}" >&2; exit 2; fi']
    for j, (stride, values) in enumerate(table.cycles):
        out.append(f"set -- {' '.join(shlex.quote(v) for v in values)}; shift $(( (i / {stride}) % {len(values)} )); "
                   f'tx_c{j}="$1"')
    if table.holes:
        out += [f'if ! row=$({feed} | {{ n=0; while IFS= read -r line; do if [ "$n" = "$i" ]; then '
                'printf "%s" "$line"; exit 0; fi; n=$((n + 1)); done; exit 3; }); then '
                f'echo "tx: no row $i in {where}" >&2; exit 2; fi',
                'eval "set -- $row"']

    def hole(p: int) -> str:
        return '"$i"' if p == INDEX else f'"$tx_c{-2 - p}"' if p < 0 else f'"${{{p + 1}}}"'

    words = ["".join(hole(p) if isinstance(p, int) else shlex.quote(p) for p in w) for w in table.template]
    if exports:
        out.append(f"export {' '.join(words[:exports])}")
    out.append(f"exec {' '.join(words[exports:])}")
    return out
