"""What the engine tries again, and how: each kind of failure that another process (or a flaky bucket)
causes has its policy here, with its numbers in limits.py.

- `_committed`: an append whose version another process committed first; committed again at once,
  after a few milliseconds' jitter, doubling (COMMIT_ATTEMPTS, COMMIT_BACKOFF), then StoreBusy.
- `_until_committed`: upkeep or erasure preempted by another process's commit; run again on the
  latest version, backing off, for up to a given number of seconds.
- `_reading`: a read that met a file another process's cleanup removed; read again at once, on the
  latest version (READ_RETRIES).
- `_creating`: opening or making a table while another process makes it; tried again after a short
  wait, growing (CREATE_ATTEMPTS).

And the signs, in the text of an error, of what happened (`_missing_file`, `_preempted`, `_raced`,
`_unreachable`, `_store_problem`).
"""

from __future__ import annotations

import itertools
import logging
import random
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import StoreBusy
from . import limits

if TYPE_CHECKING:
    from lance.dataset import LanceDataset

log = logging.getLogger(__name__)

T = TypeVar("T")


def _missing_file(exc: Exception) -> bool:
    """Whether a LanceDB error says a file of the version being read is gone (another process's cleanup)."""
    text = str(exc)
    return "Not found" in text or "not found" in text or "No such file" in text


def _unreachable(exc: Exception) -> bool:
    """Whether an error says the object store could not be reached (rather than refused the request)."""
    text = str(exc)
    return any(sign in text for sign in ("error sending request", "kind: Connect", "tcp connect error", "timed out"))


_FAILING = re.compile(
    r"\b5\d\d (Internal Server Error|Service Unavailable|Bad Gateway|Gateway Timeout)\b|"
    r"<Code>(InternalError|ServiceUnavailable|SlowDown)</Code>"
)


def _failing(exc: Exception) -> bool:
    """Whether an error is the object store's own failure (a 5xx answer, after the object store client's
    retries): a gateway whose back end is gone answers every request so (SeaweedFS without its filer)."""
    return _FAILING.search(str(exc)) is not None


def _store_problem(exc: Exception) -> str:
    """What an object store said, in a few words: its error code and message, or the connection that failed."""
    text = str(exc)
    said = re.search(r"<Code>([^<]*)</Code>\s*<Message>([^<]*)</Message>", text)
    if said:
        return f"{said[1]}: {said[2]}"
    if _unreachable(exc):
        return "the endpoint could not be reached"
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _preempted(exc: Exception) -> bool:
    """Whether Lance refused a commit because another process committed first, and says to retry."""
    return "Retryable commit conflict" in str(exc) or "preempted by concurrent transaction" in str(exc)


def _raced(exc: Exception) -> bool:
    """Whether a commit lost its version to another process's (and can simply be tried again)."""
    return "Failed to commit the transaction after" in str(exc) or _preempted(exc)


def _committed(name: str, view: LanceDataset, operation: Any) -> LanceDataset:
    """Commit an append to table `name` made on `view`'s version, trying again at once when another
    process took the version first (the bucket refused this one's manifest). Lance would wait itself,
    a random number of its first attempt's durations, out of 4, then 8, then 16: on the three-server
    bench, writes that lost two or three races waited 1-5 s (docs/object-storage.md, *Measured*). Another append
    never conflicts with this one, so the next attempt, which reads what landed, only has to come
    before a third writer's: a few milliseconds of jitter, doubling, keep many writers apart."""
    from lance import LanceDataset

    for attempt in itertools.count(1):
        try:
            return LanceDataset.commit(view, operation, read_version=view.version, max_retries=1)
        except Exception as exc:
            if not _raced(exc):
                raise
            if attempt >= limits.COMMIT_ATTEMPTS:
                raise StoreBusy(name, attempt) from exc
            log.info("another process committed this version first; committing on the next")
            time.sleep(random.uniform(0, limits.COMMIT_BACKOFF * 2 ** min(attempt - 1, 6)))
    raise AssertionError("unreachable")


def _until_committed(work: Callable[[], T], wait: float) -> T:
    """Run `work` again, on the latest version, for as long as another process's commit preempts it
    (up to `wait` seconds, backing off): what guards upkeep and erasure on an object store, where no
    lock file can (docs/object-storage.md)."""
    deadline = time.monotonic() + wait
    for attempt in itertools.count():
        try:
            return work()
        except Exception as exc:
            if not _preempted(exc) or time.monotonic() > deadline:
                raise
            log.info("another process committed first (%s); trying again", str(exc).splitlines()[0][:160])
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def _reading(work: Callable[[], T], again: Callable[[Exception], None]) -> T:
    """Run a read; if another process's cleanup removed a file of the version it was reading, call
    `again` (which moves the reader to the latest version) and read again, up to READ_RETRIES times."""
    for attempt in range(limits.READ_RETRIES + 1):
        try:
            return work()
        except Exception as exc:
            if attempt == limits.READ_RETRIES or not _missing_file(exc):
                raise
            again(exc)
    raise AssertionError("unreachable")


def _creating(name: str, work: Callable[[], T]) -> T:
    """Open or make table `name`, trying again while another process makes it at the same moment (it
    fails one side with a commit conflict, or shows a table whose first version is not written yet),
    up to CREATE_ATTEMPTS times in all."""
    for attempt in range(limits.CREATE_ATTEMPTS):
        try:
            return work()
        except Exception as exc:
            if attempt == limits.CREATE_ATTEMPTS - 1:
                raise
            log.info("opening the %s table met another process making it (%s); trying again", name, exc)
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")
