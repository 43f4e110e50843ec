"""The child processes of bench/faults.py's kill and race parts: `faults.py --child ROLE` opens a `Memory`
on the store with the stand-in embedder and works, printing one flushed JSON line as it starts a call and
one when the call returned; `Child` spawns one and reads what it printed, up to a kill.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from corrigenda.store import CorrigendaError, Memory
from faults_common import CHILD_WAIT_S, SERVER_ENV, Pools, StandInEmbedder, call_memory, choose_write, note_text


class Say:
    """One flushed JSON line per message on stdout; a lock keeps two threads' lines whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0

    def __call__(self, **message: Any) -> None:
        line = json.dumps(message) + "\n"
        with self._lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def perform(self, op: str, work: Callable[[], dict[str, Any]], **detail: Any) -> dict[str, Any] | None:
        """Announce a call, make it, and acknowledge it only once it returned."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        self(kind="begin", seq=seq, op=op, t=time.time(), **detail)
        try:
            ack = work()
        except CorrigendaError as exc:
            self(kind="refused", seq=seq, op=op, error=str(exc))
            return None
        except Exception as exc:
            self(kind="failed", seq=seq, op=op, error=repr(exc))
            return None
        self(kind="ack", seq=seq, op=op, **ack)
        return ack


def write_forever(memory: Memory, rng: random.Random, known: Mapping[str, Any], say: Say, label: str) -> None:
    pools = Pools(shared=list(known.get("notes", [])), retractable=list(known.get("retractable", [])))
    for i in range(1, 1_000_000):
        op, args = choose_write(rng, note_text(rng, f"{label} note {i}"), pools)
        ack = say.perform(op, partial(call_memory, memory, op, args))
        if ack is not None:
            pools.take(op, ack)


def compact_forever(memory: Memory, rng: random.Random, say: Say) -> None:
    while True:
        keep = timedelta(0) if rng.random() < 1 / 3 else None

        def work(keep: timedelta | None = keep) -> dict[str, Any]:
            ran = memory.upkeep.compact() if keep is None else memory.upkeep.compact(keep_versions_for=keep)
            return {"ran": ran}

        say.perform("compact", work, keep_versions_for="0" if keep is not None else "default")
        time.sleep(rng.uniform(0.0, 0.05))


def forget_each(memory: Memory, targets: Sequence[str], say: Say) -> None:
    for note_id in targets:
        args = {"note_id": note_id, "reason": "the user asked"}
        say.perform("forget", partial(call_memory, memory, "forget", args), note=note_id)


def race_worker(memory: Memory, say: Say) -> None:
    """Commands on stdin: arm (read the scope, as a running server has), go (link), heads (read a chain)."""
    armed: tuple[str, str] | None = None
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "arm":
            armed = (command["src"], command["dst"])
            memory.history(armed[0])
            say(kind="armed")
        elif command["cmd"] == "go" and armed is not None:
            time.sleep(max(0.0, command["at"] - time.time()))  # both writers start at the same moment
            args = {"src_id": armed[0], "dst_id": armed[1], "kind": "supersedes", "reason": "the newer value"}
            say.perform("link", partial(call_memory, memory, "link", args))
        elif command["cmd"] == "heads":
            try:
                heads = [h.id for h in memory.history(command["note"]).chain.heads]
            except Exception as exc:
                say(kind="heads", heads=None, error=repr(exc))
            else:
                say(kind="heads", heads=heads)


def child_main(args: argparse.Namespace) -> int:
    importlib.import_module("lancedb")  # before "loaded": a kill's delay counts from an open store, not imports
    say = Say()
    say(kind="loaded")
    known = json.loads(sys.stdin.readline())["known"]
    memory = Memory(args.db, StandInEmbedder())
    memory.stats()  # the store is open
    rng = random.Random(args.child_seed)
    say(kind="ready")
    if args.child == "race":
        race_worker(memory, say)
    elif args.child == "forget":
        forget_each(memory, known["targets"], say)
        say(kind="idle")
        time.sleep(3600)  # the kill still comes; it then landed after the work
    else:
        if args.child == "compaction":
            compactor = random.Random(rng.random())
            threading.Thread(target=compact_forever, args=(memory, compactor, say), daemon=True).start()
        write_forever(memory, rng, known, say, f"{args.child} {args.child_seed:08x}")
    return 0


class Child:
    """A child process of this script speaking JSON lines; every whole line it flushed is kept."""

    def __init__(self, role: str, db: str, seed: int, log: Path) -> None:
        """Spawn it; it imports what it needs and waits for `start`, so that can overlap other work."""
        script = str(Path(__file__).resolve().with_name("faults.py"))  # its --child ROLE runs child_main
        command = [sys.executable, script, "--child", role, "--db", db, "--child-seed", str(seed)]
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=SERVER_ENV
        )
        self.messages: list[dict[str, Any]] = []  # in the order they arrived
        self.torn = 0  # a line cut by the kill, or not JSON
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line) if line.endswith("\n") else None
            except json.JSONDecodeError:
                message = None
            if message is None:
                self.torn += 1
            else:
                self._queue.put(message)
        self._queue.put(None)

    def expect(self, kinds: set[str], timeout: float = CHILD_WAIT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"child {self.proc.pid} sent no {kinds} within {timeout:.0f} s") from None
            if message is None:
                raise RuntimeError(f"child {self.proc.pid} exited (code {self.proc.poll()}) before sending {kinds}")
            self.messages.append(message)
            if message["kind"] in kinds:
                return message

    def start(self, known: Mapping[str, Any]) -> None:
        """Let it open the store and begin; returns once it has the store open."""
        self.expect({"loaded"})
        self.send(cmd="start", known=known)
        self.expect({"ready"})

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> list[dict[str, Any]]:
        """SIGKILL, then every line the child flushed before it died."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join()
        while (message := self._queue.get()) is not None:
            self.messages.append(message)
        self._close()
        return self.messages

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()
