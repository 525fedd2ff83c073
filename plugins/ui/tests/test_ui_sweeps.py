"""The sweep plot (pygal's SVG, rendered on the server): one dot per trial at (parameter,
metric), a log axis for a parameter spanning decades, a place per value for a categorical
one, and no script from the network."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from tx_ui._sweeps import plot_svg

SVG = "{http://www.w3.org/2000/svg}"


def _dots(svg: str) -> list:
    root = ET.fromstring(svg)
    out = []
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "dots":
            desc = {d.get("class").split()[0]: d.text for d in g.findall(f"{SVG}desc")}
            circle = g.find(f"{SVG}circle")
            out.append((desc["label"], desc["value"], float(circle.get("cx"))))
    return out


def test_a_numeric_parameter_on_a_linear_axis_one_dot_per_trial():
    svg = plot_svg([(0, 1, 1.5), (1, 2, 0.5), (2, 4, 1.5)], "x", "loss")
    dots = _dots(svg)
    assert [(label, value) for label, value, _ in dots] == [
        ("trial 0: x=1", "1: 1.5"), ("trial 1: x=2", "2: 0.5"), ("trial 2: x=4", "4: 1.5")]
    (_, _, a), (_, _, b), (_, _, c) = dots
    assert abs((b - a) * 2 - (c - b)) < 1e-6  # linear: 1 -> 2 is half of 2 -> 4
    assert not re.search(r"<script[^>]*src=", svg) and "kozea" not in svg


def test_a_parameter_spanning_decades_on_a_log_axis():
    svg = plot_svg([(0, 0.001, 3.0), (1, 0.01, 2.0), (2, 0.1, 1.0)], "lr", "loss")
    dots = _dots(svg)
    assert [value for _, value, _ in dots] == ["0.001: 3", "0.01: 2", "0.1: 1"]
    (_, _, a), (_, _, b), (_, _, c) = dots
    assert abs((b - a) - (c - b)) < 1e-6  # equal steps per decade
    assert "lr (log scale)" in svg


def test_a_categorical_parameter_gets_a_place_per_value():
    svg = plot_svg([(0, "sgd", 0.4), (1, "adam", 0.2), (2, "sgd", 0.3)], "optimizer", "loss")
    dots = _dots(svg)
    assert [value for _, value, _ in dots] == ["sgd: 0.4", "adam: 0.2", "sgd: 0.3"]
    assert dots[0][2] == dots[2][2] != dots[1][2]
