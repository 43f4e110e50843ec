"""A recall's settings (`RetrievalSettings`) and the unit costs of its budget: what the text rendering
adds to each note and chain it delivers (recall.py's module docstring, stage 5)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .tokens import estimate_tokens

# What the text rendering adds, in the same estimate: a note's label, id, kind and date (a history
# entry has that twice over: what replaced it, and when), and a chain's header line. Checked
# against the real rendering by tests/server/test_tools.py.
NOTE_OVERHEAD = 18
CHAIN_OVERHEAD = 16
CLIP_OVERHEAD = 8  # a clipped history entry's mark, "[clipped: 120 of 480 tokens]"


@dataclass(frozen=True)
class RetrievalSettings:
    min_similarity: float = 0.25
    # the sweep that chose it: docs/benchmarks.md, "The parameters chosen on these benchmarks"
    per_retriever: int = 20  # candidates each retriever contributes
    # why prerequisites keep their chain's rank: docs/benchmarks.md, "The parameters chosen on these benchmarks"
    liveness_decay: float = 0.5  # share of a note's liveness its prerequisite inherits, per hop
    duplicate_similarity: float = 0.95  # heads this close (and with the same numbers) repeat each other
    # the sweep that chose it: docs/benchmarks.md, "The parameters chosen on these benchmarks"
    chain_evidence: float = 0.1  # share of its fused score each further entry adds to its chain's score
    # How budgets are counted: the text's tokens plus a fixed cost per rendered note and chain.
    # A benchmark with its own unit (e.g. whitespace words) passes its counter and zero overheads.
    count_tokens: Callable[[str], int] = estimate_tokens
    note_overhead: int = NOTE_OVERHEAD
    chain_overhead: int = CHAIN_OVERHEAD
    clip_overhead: int = CLIP_OVERHEAD
