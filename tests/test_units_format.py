"""Values printed with their units in the text report and tables (argus_lab.units.fmt), by the rules the HTML report
and the JupyterLab panel use too: time and bytes scaled, counts of a million or more with an SI prefix, never in
e-notation."""

from __future__ import annotations

import pytest

from argus_lab.units import fmt


@pytest.mark.parametrize(
    ("value", "unit", "printed"),
    [
        (1.057e6, "byte", "1.06 MB"),
        (512, "byte", "512 B"),
        (2.51e6, "ns", "2.51 ms"),
        (1.057e6, "count", "1.06 M"),  # was 1.057e+06
        (3.2e9, "", "3.2 G"),
        (2e6, "word/thread", "2 M word/thread"),
        (123456, "count", "123500"),  # was 1.235e+05
        (87.33, "register/thread", "87.33 register/thread"),
        (29.41, "%", "29.41 %"),
        (None, "count", "-"),
    ],
)
def test_values_print_scaled_and_never_in_e_notation(value: float | None, unit: str, printed: str) -> None:
    assert fmt(value, unit) == printed
