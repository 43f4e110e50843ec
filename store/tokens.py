"""One token estimate for every budget, fair to CJK text.

Tokenizers of current LLMs spend roughly one token per 4 characters of English and about one
token per Han, kana or Hangul character. So: each CJK character counts 1, every other run of
characters counts ceil(len / 4). It overestimates slightly for English, which keeps packed
results inside a caller's budget.
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")


def count_cjk(text: str) -> int:
    return len(_CJK.findall(text))


def estimate_tokens(text: str) -> int:
    cjk = count_cjk(text)
    rest = len(text) - cjk
    return cjk + -(-rest // 4)
