"""The passage of a note that best answers a query, cut to a number of tokens.

Recall delivers a history entry that does not fit the budget whole as an excerpt rather than not at
all (recall.py, stage 5). Which passage: the sentence that holds the most distinct words of the
query (the earliest of equals; the first sentence if none holds any), whole, then the sentences
around it, one before and one after in turn, while each fits whole, then as many words of the next
as still fit. A sentence too long by itself is kept from its first word the query shares. The
words are the note's own, cut at word boundaries (each CJK character is a word), and "…" marks each
end where text was left out, so what is kept reads as a quotation.

A word matches a query word when they share their first five letters, or all of the shorter one's
from three letters up ("postcards" and "postcard", "collecting" and "collection", "hang" and
"hanging"); the query's function words ("what", "have", "many", …) match nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise

ELLIPSIS = "…"
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
_UNIT = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")
_WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_SENTENCE_END = re.compile(r"[.!?…;。！？；]['\")\]”’]*$")
# Words a question is made of whatever it asks: matching them says nothing about the passage.
_FUNCTION_WORDS = frozenset(
    re.findall(
        r"\w+",
        """the and for are was were you your yours mine our ours his her hers its their they them this that
        these those what which who whom whose when where why how many much did does doing done have has had
        having with from into onto about since than then there here can could would should will shall may
        might must been being also just any all some more most other such only own same very not nor but yet
        out off over under again once""",
    )
)
_PREFIX = 5


def query_terms(query: str) -> set[str]:
    """The words of a query that can tell one passage from another, lower-cased."""
    words = _WORD.findall(query.lower())
    return {w for w in words if (len(w) >= 3 or not w.isascii()) and w not in _FUNCTION_WORDS}


def _matches(word: str, term: str) -> bool:
    n = min(len(word), len(term), _PREFIX)
    return (n >= 3 or not term.isascii()) and word[:n] == term[:n]


def excerpt(text: str, query: str, room: int, count_tokens: Callable[[str], int]) -> str | None:
    """The passage of `text` for `query` that costs at most `room` (module docstring), marked with …
    where cut; `text` itself if it fits whole; None if not even one word fits."""
    if count_tokens(text) <= room:
        return text
    units = [(m.start(), m.end()) for m in _UNIT.finditer(text)]
    if not units:
        return None
    terms = query_terms(query)
    found = [{t for w in _WORD.findall(text[a:b].lower()) for t in terms if _matches(w, t)} for a, b in units]

    def marked(i: int, j: int) -> str:
        body = text[units[i][0] : units[j - 1][1]]
        return (ELLIPSIS if i > 0 else "") + body + (ELLIPSIS if j < len(units) else "")

    def fits(i: int, j: int) -> bool:
        return count_tokens(marked(i, j)) <= room

    def furthest(i: int, j: int) -> int:
        """The largest end from `j` on that still fits with start `i` (`i`..`j` fits)."""
        if fits(i, len(units)):
            return len(units)
        lo, hi = j, len(units) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(i, mid) else (lo, mid - 1)
        return lo

    bounds = [0] + [
        i for i in range(1, len(units))
        if _SENTENCE_END.search(text[units[i - 1][0] : units[i - 1][1]]) or "\n" in text[units[i - 1][1] : units[i][0]]
    ] + [len(units)]  # fmt: skip
    sentences = list(pairwise(bounds))
    best = max(range(len(sentences)), key=lambda s: (len(set().union(*found[slice(*sentences[s])])), -s))
    first, last = best, best
    i, j = sentences[best]
    if not fits(i, j):  # too long by itself: from its first word the query shares
        i = next((k for k in range(i, j) if found[k]), i)
        return marked(i, furthest(i, i + 1)) if fits(i, i + 1) else None
    grew = True
    while grew:  # whole sentences around it, one before and one after in turn
        grew = False
        if first > 0 and fits(sentences[first - 1][0], j):
            first -= 1
            i = sentences[first][0]
            grew = True
        if last + 1 < len(sentences) and fits(i, sentences[last + 1][1]):
            last += 1
            j = sentences[last][1]
            grew = True
    return marked(i, furthest(i, j))
