"""`tamesu.matching.one_line`: the one way a line quotes text (a check's reason, a report's cell, a server's
error, a `wait_for` that waited in vain). Six copies cut it each their own way before (mid-word or at a word,
`\\n` kept or folded, double spaces kept or folded, a bound of `limit` or `limit + 1`): the rules are here once."""

from __future__ import annotations

import json
import time

import pytest

from tamesu.checks.base import show
from tamesu.matching import fitted, one_line, quoted


def test_empty_and_blank_text_is_an_empty_line() -> None:
    assert one_line("") == ""
    assert one_line("", 10) == ""
    assert one_line(" \n\t \r\n ", 5) == ""


def test_line_breaks_and_tabs_fold_to_one_space_and_runs_of_plain_spaces_stay() -> None:
    assert one_line("Your order\r\n\n   ships\ton Friday.  Thanks") == "Your order ships on Friday.  Thanks"
    assert one_line("  padded  ") == "padded"
    assert one_line("a\u2028b\u00a0c") == "a b c"  # a Unicode line separator, a no-break space
    assert one_line("a \n \t  b   c\t") == "a b   c"


def test_a_long_run_of_spaces_takes_no_time() -> None:
    # the fold took time growing with the square of a run of spaces: 11 s for 30,000 of them, 2 minutes for 100,000
    started = time.perf_counter()
    assert one_line("a" + " " * 100_000 + "b\nc", 20) == "a…"
    assert time.perf_counter() - started < 2, time.perf_counter() - started


def test_exactly_the_bound_is_whole_and_one_more_is_cut_within_it() -> None:
    text = "abcdef ghij"
    assert one_line(text, len(text)) == text
    assert one_line(text + "k", len(text)) == "abcdef…"
    # the bound is measured after folding: three line breaks that fold to one space do not make it longer
    assert one_line("abcde\n\n\nfghij", 11) == "abcde fghij"


def test_a_cut_inside_a_word_goes_back_to_the_word_end_and_one_at_a_word_end_keeps_the_word() -> None:
    assert one_line("the quick brown fox", 12) == "the quick…"
    assert one_line("the quick brown fox", 10) == "the quick…"  # "quick" ends where the cut falls: kept


def test_one_long_word_or_a_url_is_cut_inside_rather_than_losing_most_of_the_room() -> None:
    assert one_line("x" * 50, 10) == "x" * 9 + "…"
    assert one_line("see https://example.com/a/very/long/path", 20) == "see https://example…"


def test_the_bound_counts_characters_and_never_splits_what_reads_as_one() -> None:
    japanese = "日本語のテキストです" * 3
    assert one_line(japanese, 10) == japanese[:9] + "…"
    accented = "e\u0301" * 10  # é written as e and a combining accent
    assert one_line(accented, 6) == "e\u0301e\u0301…"
    assert one_line("👍🏽" * 5, 4) == "👍🏽…"  # a thumb and its skin tone
    assert one_line("👨\u200d👩\u200d👧 and more", 4) == "…"  # a family of three joined: whole or not at all
    assert one_line("🇯🇵🇫🇷🇩🇪", 4) == "🇯🇵…"  # flags are pairs of letters


@pytest.mark.parametrize("limit", range(1, 40))
def test_a_cut_line_is_never_longer_than_its_bound(limit: int) -> None:
    for text in ("word " * 20, "x" * 60, "👍🏽 " * 20, "a\nb\tc " * 15, "e\u0301" * 40, "日本語 " * 20):
        cut = one_line(text, limit)
        assert len(cut) <= limit, (text, limit, cut)
        assert cut == one_line(text) or cut.endswith("…")


def test_written_width_bounds_a_json_string_with_its_escapes() -> None:
    text = 'she said "refund" and "now" ' * 5
    quoted = fitted(text, 40)
    assert len(quoted) <= 40 and quoted.endswith('…"'), quoted
    assert json.loads(quoted).startswith('she said "refund" and')


def test_a_checks_show_cuts_text_at_a_word_and_on_one_line() -> None:
    # `checks.base.show`, for a plug-in's reason: it cut at 119 characters inside a word and kept line breaks
    text = "Your order ships on Friday\nfrom the warehouse in Lyon. " * 6
    said = show(text)
    assert len(said) <= 120 and said.endswith("…") and "\n" not in said
    flat = text.replace("\n", " ")
    assert flat.startswith(said[:-1]) and flat[len(said) - 1] == " ", said


def test_quoted_is_one_line_in_double_quotes_with_the_cut_inside() -> None:
    # a Python repr said 'Please provide PO number.' but "I'd say\nso": the quote marks changed with the words
    assert quoted("I'd say\nso") == '"I\'d say so"'
    assert quoted('she said "no"') == '"she said \\"no\\""'
    assert quoted("the quick brown fox", 10) == '"the quick…"'


def test_a_json_value_of_megabytes_is_measured_only_as_far_as_its_bound() -> None:
    # each character's JSON width was added up over the whole value before the cut: 11 s for a 3 MB string
    started = time.perf_counter()
    shown = fitted('word "q" ' * 300_000, 120)
    assert len(shown) <= 120 and shown.startswith('"word \\"q\\" word') and shown.endswith('…"'), shown
    assert time.perf_counter() - started < 3, time.perf_counter() - started
