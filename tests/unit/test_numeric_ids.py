from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from arcs.auth.numeric_ids import numeric_id


def test_the_derivation_never_changes() -> None:
    # Clients keep these ids (Arc's SDK, scripts): a change of the derivation would rename every token.
    assert numeric_id("d7edd6f76d2847df") == 3571424023780510
    assert numeric_id("1/8a5ffee3d18d4d93ad94e040183b3433") == numeric_id("1/8a5ffee3d18d4d93ad94e040183b3433")
    assert numeric_id("1/run-1") != numeric_id("2/run-1")


@given(st.text(max_size=80))
def test_every_id_is_a_positive_integer_exact_in_a_double(text: str) -> None:
    number = numeric_id(text)
    assert 0 < number < 2**52 and float(number) == number
