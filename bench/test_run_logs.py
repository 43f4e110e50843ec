"""Secrets and note texts in every log of a full test run: each Python process's logging at DEBUG and its stderr, grepped for every token and note text the run used.

The project's test command (`python -m pytest` from the repository root, with its addopts; extra
pytest arguments after `--`) runs with CORRIGENDA_LOG_CAPTURE naming a folder and
bench/log_capture/ first on PYTHONPATH, so that every Python process of the run (pytest, its xdist
workers, and every CLI, stdio and HTTP server the tests start) imports bench/log_capture/
sitecustomize.py, which, in that process:
- writes every record of every logger, every logger enabled at DEBUG whatever the process set (the
  issue: "at any level"), uvicorn's loggers that do not propagate too, to `<pid>.log`, after the
  filters of its logger and of the handlers it would reach (corrigenda's StreamBodies and Redact,
  server/redaction.py), as the process at DEBUG would write it; the process's own handlers get what
  they got before;
- tees fd 2 to `<pid>.stderr` (not stdout: a stdio server's stdout is the protocol, which carries
  note texts by design; uvicorn's access lines, which go to stdout, are logging records: in `.log`);
- records every token or credential presented to a server (grants.digest: every bearer token and
  `?token=`, static or OAuth; the web view's gate: `?token=`, `Authorization`, session cookies),
  CORRIGENDA_TOKEN and AWS secrets from its environment, and every note text and reason written
  (Writes.remember, correct, revoke, reinstate, link, forget; Imports.import_notes;
  transfer.import_parsed), to `<pid>.used`;
- adds the two variables to a child's explicit `env=` (subprocess.Popen, so asyncio's, anyio's and
  the MCP SDK's stdio client's children too), which many tests give with a scrubbed environment, and
  notes each child it starts.
Not covered: processes that are not Python (uv, npx and node: the Inspector, tests/oauth_as;
Chromium; git), and a Python whose PYTHONPATH its parent replaces: pip's and build's PEP 517 hooks
(which bring a sitecustomize of their own, not to be shadowed) and venv's ensurepip (which drops
PYTHONPATH); the table counts the Python children that wrote no capture. pytest's own output
(pytest.out) and what the tests capture are not logs.

Then every `.log` and `.stderr` file is searched (GNU grep -F, every pattern at once) for each used
token of 8 characters or more, as is, percent-encoded (quote and quote_plus) and JSON-escaped, and
for each note text (reasons included), as is (a text with line breaks: its longest line), JSON-escaped
(ASCII and not) and as Python's repr escapes it. A note text is left out of the search when it is
shorter than 16 characters, or has no word (a run of letters and digits) of 4 characters or more,
with a letter, that is not among the most common English words (COMMON): such a text ("the one
that we have", "0000000000000000", "----------------") would be found by chance; the table says
how many texts the rule left out. A hit is a line that holds one: its file, the process's command
line, the logger (or stderr), whether the process's own levels would have written it (`+`), whose
line it is (a corrigenda process's; a test process's from server code, a server the test runs
in-process; or from client code, the tests' MCP and HTTP clients, which corrigenda does not use),
and the line.

Run from the repository root (the full suite: about 15 minutes on 2 CPUs):

    .venv/bin/python bench/test_run_logs.py [--json PATH] [--keep DIR] [-- PYTEST-ARGS...]
    .venv/bin/python bench/test_run_logs.py --search DIR    # search a kept capture again, no run
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from harness import ROOT, markdown_table, parser, write_results

CAPTURE = ROOT / "bench" / "log_capture"
VARIABLE = "CORRIGENDA_LOG_CAPTURE"
MIN_TOKEN = 8
MIN_TEXT = 16
LOGS = ("*.log", "*.stderr")
SHOWN = 400  # characters of a hit's line kept in the results
# The most common English words (function words and the commonest verbs, nouns and adjectives): a
# text made of these alone, or of short words and numbers, is not searched for.
COMMON_WORDS = """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each even every few first for
    from further get got had has have having he her here hers him his how i if in into is it its just
    know last like made make many may me more most much must my new no nor not now of off on once one
    only or other our ours out over own said same see she should so some such than that the their them
    then there these they thing think this those through time to too two under until up use used very
    want was way we well were what when where which while who whom why will with would year yes yet you
    your none true false null"""
COMMON = frozenset(COMMON_WORDS.split())
WORD = re.compile(r"\w+")


# -- running the tests ---------------------------------------------------------------------------


def run_tests(folder: Path, pytest_args: Sequence[str]) -> dict[str, Any]:
    """The project's test command, with the capture on; its output to `folder`/pytest.out."""
    env = dict(os.environ)
    env[VARIABLE] = str(folder)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CAPTURE), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "pytest", *pytest_args]
    started = time.monotonic()
    with (folder / "pytest.out").open("wb") as out:
        done = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    record = {
        "command": "python -m pytest" + "".join(" " + shlex.quote(a) for a in pytest_args),
        "exit_code": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
    }
    (folder / "run.json").write_text(json.dumps({**record, "bench_argv": sys.argv}))
    return record


def pytest_summary(folder: Path) -> str:
    lines = (folder / "pytest.out").read_text(errors="replace").splitlines()
    return next((line.strip("= ") for line in reversed(lines) if line.startswith("=")), "")


# -- what the run used ---------------------------------------------------------------------------


@dataclass
class Used:
    tokens: dict[str, set[str]] = field(default_factory=dict)  # value: where it was seen
    texts: dict[str, set[str]] = field(default_factory=dict)
    short_tokens: int = 0
    excluded: list[str] = field(default_factory=list)


def searchable(text: str) -> bool:
    """The rule for note texts (the module's docstring)."""
    if len(text.strip()) < MIN_TEXT:
        return False
    return any(len(w) >= 4 and not w.isdigit() and w not in COMMON for w in WORD.findall(text.lower()))


def read_used(folder: Path) -> Used:
    used = Used()
    every_text: dict[str, set[str]] = {}
    for path in folder.glob("*.used"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            record = json.loads(line)
            value, where = record["value"], record["where"]
            if record["kind"] == "token":
                if len(value) < MIN_TOKEN:
                    used.short_tokens += 1
                    continue
                used.tokens.setdefault(value, set()).add(where)
            else:
                every_text.setdefault(value, set()).add(where)
    for text, where in every_text.items():
        if searchable(text):
            used.texts[text] = where
        else:
            used.excluded.append(text)
    return used


def token_forms(token: str) -> set[str]:
    return {token, quote(token, safe=""), quote_plus(token), json.dumps(token)[1:-1]}


def text_forms(text: str) -> set[str]:
    plain = max(text.split("\n"), key=len) if "\n" in text else text
    forms = {json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1], repr(text)[1:-1]}
    if len(plain.strip()) >= MIN_TEXT:
        forms.add(plain)
    return {f for f in forms if f and "\n" not in f and "\x00" not in f}


def encoded(form: str) -> bytes:
    return form.encode("utf-8", "backslashreplace")  # as the capture writes a lone surrogate


# -- searching the logs --------------------------------------------------------------------------


@dataclass
class Hit:
    file: str
    line_number: int
    kind: str  # token or note text
    secret: str
    line: str
    command: str = ""
    logger: str = ""
    shown: str = ""
    side: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "line_number": self.line_number, "kind": self.kind, "secret": self.secret[:120],
            "command": self.command, "logger": self.logger, "shown_at_the_process_levels": self.shown == "+",
            "side": self.side, "line": self.line[:SHOWN],
        }  # fmt: skip


def grep(folder: Path, patterns: dict[bytes, tuple[str, str]]) -> list[tuple[str, int, bytes]]:
    """(file, line number, the pattern found) for each match of any pattern in the logs (grep -o:
    leftmost-longest, one a position)."""
    if not patterns:
        return []
    listed = folder / "patterns.txt"
    listed.write_bytes(b"\n".join(patterns) + b"\n")
    includes = [f"--include={glob}" for glob in LOGS]
    done = subprocess.run(
        ["grep", "-r", "-a", "-n", "-o", "-F", "-f", str(listed), *includes, "."],
        cwd=folder, capture_output=True, env={**os.environ, "LC_ALL": "C"}, check=False,
    )  # fmt: skip
    if done.returncode > 1:
        raise RuntimeError(done.stderr.decode(errors="replace"))
    found = []
    for row in done.stdout.splitlines():
        name, number, match = row.split(b":", 2)
        found.append((name.decode().removeprefix("./"), int(number), match))
    return found


def log_lines(folder: Path) -> tuple[int, int, int]:
    """Lines and bytes of every log, and how many files."""
    lines = size = files = 0
    for glob in LOGS:
        for path in folder.glob(glob):
            data = path.read_bytes()
            files += 1
            size += len(data)
            lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return lines, size, files


def processes(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in folder.glob("*.proc"):
        try:
            found[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            found[path.stem] = {}
    return found


PYTHON = re.compile(r"^(python[0-9.]*|corrigenda)$")


def children(folder: Path, procs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The children the captured processes started (subprocess.Popen), and those that ran Python
    (their program is python… or corrigenda) but wrote no capture: Python processes left out."""
    started: list[dict[str, Any]] = []
    for path in folder.glob("*.children"):
        started += [json.loads(line) for line in path.read_text(errors="replace").splitlines()]
    # covered: it wrote a capture, or it is a shell (shell=True, a pipeline) whose child did
    covered = {info.get("pid") for info in procs.values()} | {info.get("ppid") for info in procs.values()}

    def program(child: dict[str, Any]) -> str:
        return Path(child["argv"][0].split()[0]).name if child["argv"] and child["argv"][0].strip() else "?"

    programs = Counter(program(c) for c in started)
    left_out = [c for c in started if PYTHON.match(program(c)) and c["pid"] not in covered]
    return {
        "started": len(started),
        "programs": dict(programs.most_common()),
        "python_left_out": len(left_out),
        "python_left_out_commands": [shlex.join(c["argv"])[:200] for c in left_out[:20]],
    }


def command_of(info: dict[str, Any]) -> str:
    argv = info.get("orig_argv") or info.get("argv") or []
    shown = [Path(argv[0]).name if argv else "?", *argv[1:]]
    text = shlex.join(str(a) for a in shown)
    return text if len(text) < 200 else text[:197] + "..."


def kind_of(info: dict[str, Any]) -> str:
    """What a process was: corrigenda (CLI or server), pytest (the run, its workers), or other Python."""
    argv = [str(a) for a in info.get("orig_argv") or info.get("argv") or []]
    if any(Path(a).name == "corrigenda" or a == "corrigenda.server.cli" for a in argv[:3]):
        return "corrigenda"
    joined = " ".join(argv)
    if "pytest" in joined or "execnet" in joined or "exec(eval(" in joined:
        return "pytest"
    return "other python"


CLIENT_LOGGERS = ("mcp.client", "httpx", "httpcore")  # the MCP SDK's client and HTTP clients: corrigenda uses none
SERVER_LOGGERS = ("corrigenda", "mcp.server", "sse_starlette", "starlette", "uvicorn")


def side_of(info: dict[str, Any], logger: str) -> str:
    """Whose line it is: a corrigenda process's (a CLI or server a person runs), or a test process's,
    from server code (servers the tests run in-process: what a corrigenda server would log the same
    way) or from client code (the tests' MCP and HTTP clients)."""
    if kind_of(info) == "corrigenda":
        return "corrigenda process"
    name = logger.split(" ")[0]
    if name.startswith(CLIENT_LOGGERS):
        return "test process, client code"
    return "test process, server code" if name.startswith(SERVER_LOGGERS) else "test process, other"


def hits_of(folder: Path, used: Used, procs: dict[str, dict[str, Any]]) -> list[Hit]:
    patterns: dict[bytes, tuple[str, str]] = {}
    for text in used.texts:
        for form in text_forms(text):
            patterns.setdefault(encoded(form), ("note text", text))
    for token in used.tokens:  # a token's forms win over a text's that happens to be the same
        for form in token_forms(token):
            patterns[encoded(form)] = ("token", token)
    matches = grep(folder, patterns)
    by_line: dict[tuple[str, int], set[bytes]] = {}
    for name, number, match in matches:
        by_line.setdefault((name, number), set()).add(match)
    # every secret found anywhere, looked for again in each line with a match (grep -o shows one a position)
    found_anywhere = {match for _, _, match in matches}
    hits = []
    lines_of: dict[str, list[bytes]] = {}
    for (name, number), here in sorted(by_line.items()):
        if name not in lines_of:
            lines_of[name] = (folder / name).read_bytes().split(b"\n")
        raw = lines_of[name][number - 1]
        secrets = {patterns[m] for m in found_anywhere if m in raw} | {patterns[m] for m in here if m in patterns}
        line = raw.decode("utf-8", "replace")
        stem, suffix = name.rsplit(".", 1)
        logger = shown = ""
        if suffix == "log":
            parts = line.split(" ", 4)
            if len(parts) == 5:
                logger, shown = f"{parts[1]} {parts[2]}", parts[3]
        else:
            logger, shown = "(stderr)", "+"
        info = procs.get(stem, {})
        for kind, secret in sorted(secrets):
            hits.append(Hit(name, number, kind, secret, line, command_of(info), logger, shown, side_of(info, logger)))
    return hits


# -- the report ----------------------------------------------------------------------------------


def table(payload: dict[str, Any]) -> str:
    rows: list[list[object]] = [
        ["Python processes covered", payload["processes"]["covered"]],
        ["of which corrigenda (CLI and servers)", payload["processes"]["by_kind"].get("corrigenda", 0)],
        ["of which given env= by a test, capture added", payload["processes"]["env_added"]],
        ["children started by Popen (any program)", payload["children"]["started"]],
        ["Python children left out (no capture)", payload["children"]["python_left_out"]],
        ["log lines read (.log and .stderr)", payload["logs"]["lines"]],
        ["tokens searched", payload["tokens_searched"]],
        ["note texts searched", payload["texts_searched"]],
        ["note texts excluded by the rule", payload["texts_excluded"]],
        ["hits (token)", payload["hits"]["token"]],
        ["hits (note text)", payload["hits"]["note text"]],
        ["pytest exit code", payload["pytest"]["exit_code"]],
        ["pytest duration (s)", payload["pytest"]["seconds"]],
    ]
    return markdown_table(["measure", "value"], rows)


def hits_table(payload: dict[str, Any]) -> str:
    counted = Counter(
        (h["kind"], h["side"], h["logger"] or "?", h["shown_at_the_process_levels"]) for h in payload["hit_lines"]
    )
    rows = [
        [kind, side, logger, "yes" if shown else "no", n] for (kind, side, logger, shown), n in counted.most_common()
    ]
    header = ["kind", "whose", "logger", "at the process's own levels", "lines"]
    return markdown_table(header, rows or [["–", "–", "–", "–", 0]])


TABLES = {"main": table, "hits": hits_table}


def search(folder: Path, run: dict[str, Any]) -> dict[str, Any]:
    started = time.monotonic()
    used = read_used(folder)
    procs = processes(folder)
    lines, size, files = log_lines(folder)
    hits = hits_of(folder, used, procs)
    errors = sorted(p.name for p in folder.glob("*.errors"))
    return {
        "pytest": {**run, "summary": pytest_summary(folder)},
        "processes": {
            "covered": len(procs),
            "by_kind": dict(Counter(kind_of(p) for p in procs.values())),
            "env_added": sum(1 for p in procs.values() if p.get("env_added")),
        },
        "children": children(folder, procs),
        "logs": {"files": files, "lines": lines, "bytes": size},
        "tokens_searched": len(used.tokens),
        "tokens_shorter_than_8": used.short_tokens,
        "texts_searched": len(used.texts),
        "texts_excluded": len(used.excluded),
        "texts_excluded_examples": sorted(used.excluded, key=len, reverse=True)[:10],
        "capture_errors": errors,
        "hits": {kind: sum(1 for h in hits if h.kind == kind) for kind in ("token", "note text")},
        "hits_by_side": dict(Counter(f"{h.kind}: {h.side}" for h in hits)),
        "hit_lines": [h.as_dict() for h in hits],
        "search_seconds": round(time.monotonic() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, results="test_run_logs")
    args.add_argument("--keep", type=Path, help="keep the capture in this folder (default: a temporary one, removed)")
    args.add_argument("--search", type=Path, help="search a capture kept by --keep again; run no tests")
    args.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    parsed = args.parse_args(argv)
    argv = None  # the run record names this command, or, for --search, the one that ran the tests
    if parsed.search:
        folder = parsed.search.resolve()
        run = json.loads((folder / "run.json").read_text())
        argv = run.pop("bench_argv", None)
        payload = search(folder, run)
    else:
        with _folder(parsed.keep) as folder:
            run = run_tests(folder, parsed.pytest_args)
            print(
                f"pytest: exit {run['exit_code']} in {run['seconds']:.0f} s: {pytest_summary(folder)}", file=sys.stderr
            )
            payload = search(folder, run)
    print(table(payload))
    print()
    print(hits_table(payload))
    for hit in payload["hit_lines"][:40]:
        print(f"{hit['kind']}: {hit['file']}:{hit['line_number']} [{hit['command'][:80]}] {hit['line'][:240]}")
    write_results(parsed.json, payload, argv)
    return 0


@contextmanager
def _folder(keep: Path | None) -> Iterator[Path]:
    """`keep` (made if need be, and empty), or a temporary folder removed afterwards."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="test-run-logs-") as temporary:
            yield Path(temporary)
        return
    keep.mkdir(parents=True, exist_ok=True)
    if any(keep.iterdir()):
        raise SystemExit(f"{keep} is not empty: a capture goes into an empty folder")
    yield keep.resolve()


if __name__ == "__main__":
    raise SystemExit(main())
