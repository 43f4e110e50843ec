"""The passage of a history note that recall keeps when the note does not fit whole."""

from __future__ import annotations

from corrigenda.store.excerpt import excerpt
from corrigenda.store.tokens import estimate_tokens
from hypothesis import given
from hypothesis import strategies as st

NOTE = (
    "We spent the morning on quarterly planning with the platform team. "
    "The payments gateway listens on port 8080 behind the internal balancer. "
    "Afterwards we discussed hiring and the offsite in Lisbon."
)
QUERY = "Which port does the payments gateway listen on?"


def words(text: str) -> int:
    return len(text.split())


def test_a_note_that_fits_comes_back_whole() -> None:
    assert excerpt(NOTE, QUERY, words(NOTE), words) == NOTE


def test_the_sentence_sharing_most_words_with_the_query_is_kept_and_each_cut_is_marked() -> None:
    assert (
        excerpt(NOTE, QUERY, 11, words) == "…The payments gateway listens on port 8080 behind the internal balancer.…"
    )
    assert excerpt(NOTE, QUERY, 13, words) == (
        "…The payments gateway listens on port 8080 behind the internal balancer. Afterwards we…"
    )  # then the words of the next sentence that still fit


def test_room_left_after_that_sentence_takes_the_sentences_around_it() -> None:
    kept = excerpt(NOTE, QUERY, 22, words)
    assert kept == (
        "We spent the morning on quarterly planning with the platform team. "
        "The payments gateway listens on port 8080 behind the internal balancer.…"
    )


def test_a_sentence_longer_than_the_room_is_kept_from_its_first_query_word() -> None:
    long = "After a very long and winding preamble about many unrelated things the gateway listens on port 8080 today."
    assert excerpt(long, "which port does the gateway use", 6, words) == "…gateway listens on port 8080 today."


def test_a_query_sharing_no_word_keeps_the_beginning() -> None:
    assert excerpt(NOTE, "zebra?", 5, words) == "We spent the morning on…"


def test_nothing_when_not_one_word_fits() -> None:
    assert excerpt("Supercalifragilistic words", "words", 1, estimate_tokens) is None


def test_each_cjk_character_is_a_word() -> None:
    note = "我们上午开会。支付网关的端口是8080。下午讨论招聘。"
    kept = excerpt(note, "支付网关的端口是多少", 14, estimate_tokens)
    assert kept is not None and "支付网关的端口是8080" in kept and kept.startswith("…")


@given(st.text(alphabet="ab .\n支付", max_size=200), st.text(alphabet="ab 支", max_size=20), st.integers(1, 60))
def test_a_passage_fits_its_room_and_quotes_the_note(text: str, query: str, room: int) -> None:
    kept = excerpt(text, query, room, estimate_tokens)
    if kept is not None:
        assert estimate_tokens(kept) <= room
        assert kept.strip("…") in text
