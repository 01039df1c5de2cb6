"""The standalone server's start banner: the admin token once, and never one the operator chose."""

from __future__ import annotations

from arcs.http.server import banner

URL = "http://127.0.0.1:8000"


def test_a_generated_token_is_shown_once_as_an_export_line() -> None:
    text = banner(URL, "generated-token-0123456789")
    assert text.count("generated-token-0123456789") == 1
    assert "  export ARCS_TOKEN=generated-token-0123456789" in text.splitlines()
    assert '"Authorization: Bearer $ARCS_TOKEN"' in text


def test_a_token_the_operator_set_is_never_printed() -> None:
    text = banner(URL, "operator-chosen-0123456789", configured=True)
    assert "operator-chosen-0123456789" not in text
    assert "ARCS_BOOTSTRAP_TOKEN" in text


def test_a_later_start_prints_no_token() -> None:
    assert "export ARCS_TOKEN=" not in banner(URL, None)
