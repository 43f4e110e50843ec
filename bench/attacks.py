"""Attacks on the web view's sessions and on import: each tried against the real thing, with what it
answered, whether it was refused, and whether the store is as it was.

Sessions: three `serve --transport http --ui` processes on one store and one grants file (ada: read
`cafe*`, write `ada`; bob: write `bob`); A and B share a CORRIGENDA_SESSION_SECRET (a fleet), C has
another. Cookies are taken from a real login (`/ui/?token=`) or minted: with the grants file's digest,
as the first web view did (`NAME.HMAC-SHA256(key=token_sha256 hex, "corrigenda web view session NAME")`),
or as the server does (`NAME.ID.OPENED.MAC`, server/ui_gate.py) with the fleet's secret, which the
bench knows, to date one in the past. Then: cookies renamed, tampered, expired, logged out, carried to
another server and to the MCP endpoint; `?token=` arriving from another site (login CSRF); a POST that
changes a note without the form's token or from another origin; the NFD spelling of a scope outside
the grants (`cafe%CC%81-team` against `cafe*`, the store holding café-team in NFC); a credential
dropped from the grants file at a restart. A page answered 200 to a cookie is a session accepted.

Imports: `corrigenda import FILE` (the CLI: exit status and its line on stderr), then the same lines
through `Memory.import_lines` (the Python API: the exception's message), into a store holding two
notes of scope ops. The files are an export with vectors of one note, crafted: vectors of nulls,
strings, lists, objects, 1e400, NaN, 1e39, the wrong dimension; lines that revoke and forget the
store's notes followed by a bad line; a byte order mark; a line nested 10,000 deep; a number as text;
a time as a number; a time in year 9000; no trailer; a tombstone reaching into another scope; and a
knowledge-graph memory.jsonl with an entity of two types, or names holding U+001F.

The store's fingerprint is the SHA-256 of its export with vectors (every scope, the header with its
time left out), read by a fresh `Memory` before and after each attack. Each row says what was
expected: refused, or accepted where acceptance is right (a cookie carried to a server of the same
fleet; a BOM), or accepted as a documented limit.

Run from the repository root (about a minute):

    .venv/bin/python bench/attacks.py [--json PATH]
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx2
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from harness import markdown_table, parser, write_results

CORRIGENDA = str(Path(sys.executable).with_name("corrigenda"))
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("CORRIGENDA_")},
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}
TOKENS = {"ada": "ada-token-attack-bench-6c1e0f", "bob": "bob-token-attack-bench-a83d27"}
FLEET_SECRET = "fleet-secret-of-the-attack-bench-9b1f4e7d"  # servers A and B
OTHER_SECRET = "another-secret-of-the-attack-bench-02c5a8"  # server C
SESSION_LIFETIME = 12 * 60 * 60  # server/ui_gate.py
CAFE_NFC = "caf\u00e9-team"  # outside ada's `cafe*` grant
SECRET_TEXT = "The café team's door code is 5150"
ADA_TEXT = "Ada's deploy window is Tuesday 14:00"


@dataclass
class Row:
    """One attack: what it was, what was expected, what the server (or the CLI) answered."""

    group: str  # sessions, imports
    attack: str
    expected: str  # "refused", "accepted", "accepted (documented limit)"
    answer: str
    refused: bool
    unchanged: bool
    api: str | None = None  # imports: what Memory.import_lines said
    api_agrees: bool | None = None

    @property
    def as_expected(self) -> bool:
        return self.refused == (self.expected == "refused")


# -- the store -------------------------------------------------------------------------------


class Store:
    """A store on disk, read by a fresh `Memory` for each fingerprint (another process may have written)."""

    def __init__(self, path: Path, embedder: SentenceTransformerEmbedder) -> None:
        self.path = path
        self.embedder = embedder

    def memory(self) -> Memory:
        return Memory(str(self.path), self.embedder)

    def fingerprint(self) -> str:
        with self.memory() as memory:
            lines = list(memory.export(vectors=True))[1:] if memory.tables.search.scopes() else []
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def short(text: str, limit: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- sessions ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _grants(path: Path, names: Sequence[str]) -> None:
    reads = {"ada": '["cafe*"]', "bob": "[]"}
    path.write_text(
        "".join(
            f'[[credentials]]\nname = "{n}"\ntoken_sha256 = "{digest(TOKENS[n])}"\nread = {reads[n]}\nwrite = ["{n}"]\n\n'
            for n in names
        )
    )


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Server:
    """`corrigenda serve --transport http --ui` on a free port of 127.0.0.1."""

    def __init__(self, name: str, db: Path, grants: Path, secret: str, folder: Path) -> None:
        self.name, self.port = name, _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**ENV, "CORRIGENDA_GRANTS": str(grants), "CORRIGENDA_SESSION_SECRET": secret}
        self.err = folder / f"server-{name}-{self.port}.err"
        with self.err.open("wb") as stderr:
            self.process = subprocess.Popen(
                [CORRIGENDA, "serve", "--transport", "http", "--ui", "--port", str(self.port), "--db", str(db)],
                env=env, stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip

    def wait(self) -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server {self.name} ended: {self.err.read_text()}")
            try:
                httpx2.get(f"{self.base}/ui/", timeout=5, trust_env=False)
                return
            except httpx2.TransportError:
                time.sleep(0.3)
        raise RuntimeError(f"server {self.name} did not answer in 180 s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def get(self, path: str, cookie: str | None = None, **headers: str) -> httpx2.Response:
        sent = {k.replace("_", "-"): v for k, v in headers.items()}
        if cookie is not None:
            sent["Cookie"] = f"corrigenda_ui={cookie}"
        with httpx2.Client(base_url=self.base, trust_env=False, timeout=60) as http:
            return http.get(path, headers=sent)

    def post(self, path: str, data: dict[str, str], cookie: str | None = None, **headers: str) -> httpx2.Response:
        sent = {k.replace("_", "-"): v for k, v in headers.items()}
        if cookie is not None:
            sent["Cookie"] = f"corrigenda_ui={cookie}"
        with httpx2.Client(base_url=self.base, trust_env=False, timeout=60) as http:
            return http.post(path, data=data, headers=sent)

    def login(self, name: str) -> str:
        """A session of `name` opened as a person opens one: the address with ?token=, typed."""
        answer = self.get(f"/ui/?token={TOKENS[name]}", Sec_Fetch_Site="none")
        cookie = session_set(answer)
        if answer.status_code != 303 or cookie is None:
            raise RuntimeError(f"login of {name} on {self.name} answered {answer.status_code}")
        return cookie


def session_set(answer: httpx2.Response) -> str | None:
    """The session cookie an answer sets (not one it deletes), if any."""
    for header in answer.headers.get_list("set-cookie"):
        found = re.match(r"corrigenda_ui=([^;]*)", header)
        if found and found.group(1).strip('"'):
            return found.group(1).strip('"')
    return None


def said(answer: httpx2.Response) -> str:
    """`STATUS: what the page says`: its error line, else its heading, else its title; for a redirect,
    where to and whether it sets a session."""
    if answer.is_redirect:
        location = re.sub(r"token=[^&]+", "token=…", answer.headers.get("location", ""))
        return f"{answer.status_code} to {location}" + (", session set" if session_set(answer) else "")
    text = answer.text
    for pattern in (r'<p class="error">(.*?)</p>', r"<h1>(.*?)</h1>", r"<title>(.*?)</title>"):
        found = re.search(pattern, text, re.S)
        if found:
            return f"{answer.status_code}: {short(html.unescape(re.sub(r'<[^>]+>', '', found.group(1))))}"
    return f"{answer.status_code}: {short(text) or answer.reason_phrase}"


def mint(name: str, token: str, secret: str, opened: int) -> str:
    """A cookie as the server makes one (server/ui_gate.py, Sessions.open), with a chosen opening time."""
    session_id = secrets.token_urlsafe(16)
    message = f"corrigenda web view session\n{name}\n{session_id}\n{opened}\n{digest(token)}"
    mac = hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()
    return f"{name}.{session_id}.{opened}.{mac}"


def old_scheme(name: str, token: str) -> str:
    """The first web view's cookie: a MAC keyed by the token's digest, which the grants file holds."""
    mac = hmac.new(digest(token).encode(), f"corrigenda web view session {name}".encode(), hashlib.sha256)
    return f"{name}.{mac.hexdigest()}"


def page_csrf(server: Server, cookie: str) -> str:
    page = server.get("/ui/?scope=ada", cookie).text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    if found is None:
        raise RuntimeError("no form token on the page")
    return found.group(1)


def run_sessions(folder: Path, embedder: SentenceTransformerEmbedder) -> list[Row]:
    db, grants = folder / "web-store", folder / "grants.toml"
    store = Store(db, embedder)
    with store.memory() as memory:
        ada_note = memory.remember(Draft(text=ADA_TEXT), scope="ada").note.id
        memory.remember(Draft(text="Bob's laptop is a ThinkPad"), scope="bob")
        memory.remember(Draft(text="The cafe team meets on Mondays"), scope="cafe-team")
        memory.remember(Draft(text=SECRET_TEXT), scope=CAFE_NFC)
    _grants(grants, ["ada", "bob"])
    servers = {
        "A": Server("A", db, grants, FLEET_SECRET, folder),
        "B": Server("B", db, grants, FLEET_SECRET, folder),
        "C": Server("C", db, grants, OTHER_SECRET, folder),
    }
    rows: list[Row] = []
    try:
        for server in servers.values():
            server.wait()
        a, b, c = servers["A"], servers["B"], servers["C"]

        def row(attack: str, expected: str, attempt: Callable[[], tuple[str, bool]]) -> None:
            before = store.fingerprint()
            answer, refused = attempt()
            rows.append(Row("sessions", attack, expected, answer, refused, store.fingerprint() == before))
            print(f"sessions: {attack}: {answer}", file=sys.stderr)

        def read_with(server: Server, cookie: str, path: str = "/ui/?scope=ada") -> tuple[str, bool]:
            answer = server.get(path, cookie)
            return said(answer), answer.status_code != 200 or ADA_TEXT not in html.unescape(answer.text)

        ada = a.login("ada")
        bob = a.login("bob")
        rest = ada.split(".", 1)[1]
        row("a cookie minted from the grants file's digest (the first web view's scheme: NAME.HMAC(key=token_sha256))",
            "refused", lambda: read_with(a, old_scheme("ada", TOKENS["ada"])))  # fmt: skip
        row("ada's valid cookie with its name changed to bob", "refused", lambda: read_with(a, f"bob.{rest}"))
        row("ada's valid cookie with one hex digit of its MAC changed", "refused",
            lambda: read_with(a, ada[:-1] + ("0" if ada[-1] != "0" else "1")))  # fmt: skip
        opened = int(ada.split(".")[2])
        row("ada's valid cookie with its opening time moved 12 h later (to outlive its expiry)", "refused",
            lambda: read_with(a, ada.replace(f".{opened}.", f".{opened + SESSION_LIFETIME}.")))  # fmt: skip
        row("a cookie minted now with the fleet's secret (the bench's minting is the server's)", "accepted",
            lambda: read_with(a, mint("ada", TOKENS["ada"], FLEET_SECRET, int(time.time()))))  # fmt: skip
        row("a cookie minted with the fleet's secret, opened 12 h 1 min ago (expired)", "refused",
            lambda: read_with(a, mint("ada", TOKENS["ada"], FLEET_SECRET, int(time.time()) - SESSION_LIFETIME - 60)))  # fmt: skip
        row("server A's cookie on server B, another process with the same CORRIGENDA_SESSION_SECRET", "accepted",
            lambda: read_with(b, ada))  # fmt: skip
        row(
            "server A's cookie on server C, whose CORRIGENDA_SESSION_SECRET differs",
            "refused",
            lambda: read_with(c, ada),
        )

        def mcp(cookie: str, how: str) -> tuple[str, bool]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attack", "version": "1"}}}  # fmt: skip
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            headers |= (
                {"Authorization": f"Bearer {cookie}"} if how == "bearer" else {"Cookie": f"corrigenda_ui={cookie}"}
            )
            with httpx2.Client(base_url=a.base, trust_env=False, timeout=60) as http:
                answer = http.post("/mcp", json=body, headers=headers)
            return f"{answer.status_code}: {short(answer.text, 60)}", answer.status_code != 200

        row("ada's valid cookie sent to the MCP endpoint as a Cookie", "refused", lambda: mcp(ada, "cookie"))
        row("ada's valid cookie sent to the MCP endpoint as a Bearer token", "refused", lambda: mcp(ada, "bearer"))

        logged_out = a.login("ada")
        csrf = page_csrf(a, logged_out)

        def after_logout() -> tuple[str, bool]:
            ended = a.post("/ui/logout", {"csrf": csrf}, logged_out, Origin=a.base)
            if ended.status_code != 200:
                raise RuntimeError(f"logout answered {said(ended)}")
            return read_with(a, logged_out)

        row("a cookie presented again after its logout, to the server that logged it out", "refused", after_logout)
        row("that logged-out cookie on server B of the same fleet (a logout is not shared)",
            "accepted (documented limit)", lambda: read_with(b, logged_out))  # fmt: skip

        def login_from(**headers: str) -> Callable[[], tuple[str, bool]]:
            def attempt() -> tuple[str, bool]:
                answer = a.get(f"/ui/?token={TOKENS['bob']}", **headers)
                return said(answer), session_set(answer) is None

            return attempt

        row("login CSRF: ?token= (bob's) in a navigation with Sec-Fetch-Site: cross-site", "refused",
            login_from(Sec_Fetch_Site="cross-site"))  # fmt: skip
        row("login CSRF: ?token= with Sec-Fetch-Site: same-site (another port of the host)", "refused",
            login_from(Sec_Fetch_Site="same-site"))  # fmt: skip
        row("login CSRF: ?token= with no Sec-Fetch-Site and a Referer of another site", "refused",
            login_from(Referer="https://attacker.example/page"))  # fmt: skip
        row("login CSRF: ?token= with no Sec-Fetch-Site and an Origin of another site", "refused",
            login_from(Origin="https://attacker.example"))  # fmt: skip
        row("login CSRF: ?token= with neither Sec-Fetch-Site nor Referer nor Origin (a browser that sends none)",
            "accepted (documented limit)", login_from())  # fmt: skip

        def over_a_session() -> tuple[str, bool]:
            answer = a.get(f"/ui/?token={TOKENS['bob']}", ada, Sec_Fetch_Site="none")
            return said(answer), session_set(answer) is None

        row("?token= of bob opened over ada's session (a swap of credentials)", "refused", over_a_session)

        form_token = page_csrf(a, ada)
        revoke = {"action": "revoke", "note_id": ada_note, "reason": "attack", "confirmed": "yes"}

        def act(fields: dict[str, str], origin: str | None) -> Callable[[], tuple[str, bool]]:
            def attempt() -> tuple[str, bool]:
                answer = a.post("/ui/act", fields, ada, **({"Origin": origin} if origin else {}))
                return said(answer), answer.status_code >= 400

            return attempt

        row("POST /ui/act revoking ada's note, with ada's session and her Origin, without the form's token",
            "refused", act(revoke, a.base))  # fmt: skip
        row("the same POST with a wrong form token", "refused", act({**revoke, "csrf": "x" * 43}, a.base))
        row("the same POST with the form's token and an Origin of another site", "refused",
            act({**revoke, "csrf": form_token}, "https://attacker.example"))  # fmt: skip
        row("the same POST with the form's token and no Origin nor Sec-Fetch-Site", "refused",
            act({**revoke, "csrf": form_token}, None))  # fmt: skip

        def nfd() -> tuple[str, bool]:
            answers = [a.get(f"/ui{path}?scope=cafe%CC%81-team", ada) for path in ("/", "/notes", "/changes")]
            searched = a.get("/ui/?scope=cafe%CC%81-team&q=door+code", ada)
            leaked = any(SECRET_TEXT in r.text or "5150" in r.text for r in [*answers, searched])
            return "; ".join(dict.fromkeys(said(r) for r in answers)), not leaked and all(
                r.status_code >= 400 for r in answers
            )

        row("ada (read cafe*) asks for cafe%CC%81-team, café-team in NFD: /, /notes, /changes and a search",
            "refused", nfd)  # fmt: skip
        row("the POST revoking ada's note with her session, her Origin and the form's token (the control)",
            "accepted", act({**revoke, "csrf": form_token}, a.base))  # fmt: skip

        # Server B restarted with bob gone from the grants file (same secret): bob's session ends.
        servers["B"].stop()
        without_bob = folder / "grants-without-bob.toml"
        _grants(without_bob, ["ada"])
        servers["B"] = Server("B2", db, without_bob, FLEET_SECRET, folder)
        servers["B"].wait()

        def removed() -> tuple[str, bool]:
            answer = servers["B"].get("/ui/?scope=bob", bob)
            return said(answer), answer.status_code != 200

        row("bob's cookie after a restart whose grants file no longer names bob (the same secret)", "refused", removed)
    finally:
        for server in servers.values():
            server.stop()
    return rows


# -- imports -------------------------------------------------------------------------------


def trailed(lines: Sequence[str]) -> list[str]:
    """An export's header and records with the trailer they would have (a crafted file that is whole)."""
    sha = hashlib.sha256("".join(line + "\n" for line in lines[1:]).encode()).hexdigest()
    kinds = [json.loads(line)["type"] for line in lines[1:]]
    return [
        *lines,
        json.dumps({"type": "end", "notes": kinds.count("note"), "events": kinds.count("event"), "sha256": sha}),
    ]


def with_vector(note: str, raw: str) -> str:
    record = json.loads(note)
    record["vector"] = "@"
    return json.dumps(record).replace('"@"', raw)


def vector(*elements: str, size: int = 384) -> str:
    return "[" + ",".join([*elements, *["0.25"] * (size - len(elements))]) + "]"


def event(kind: str, ident: str, dst: str, scope: str, src: str | None = None) -> str:
    return json.dumps({"type": "event", "id": ident, "kind": kind, "src": src, "dst": dst, "scope": scope,
                       "reason": "crafted", "actor": None, "confidence": 1.0,
                       "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})  # fmt: skip


@dataclass
class Attempt:
    """A crafted file: its lines, the scope (a knowledge graph's), what is expected, and the store's notes
    whose state must not move."""

    attack: str
    lines: list[str]
    expected: str = "refused"
    scope: str | None = None


def crafted_files(header: str, note: str, kept: str, secret: str) -> Iterator[Attempt]:
    """header + note: an export with vectors of one note of scope ops; `kept`, `secret`: the ids of two
    notes the target store holds in ops."""

    def one(raw: str) -> list[str]:
        return trailed([header, with_vector(note, raw)])

    def edited(**fields: object) -> list[str]:
        return trailed([header, json.dumps({**json.loads(note), **fields})])

    yield Attempt("a vector of 384 nulls", one("[" + ",".join(["null"] * 384) + "]"))
    yield Attempt("a vector of 384 strings", one("[" + ",".join(['"0.1"'] * 384) + "]"))
    yield Attempt("a vector of 384 lists", one("[" + ",".join(["[0.1]"] * 384) + "]"))
    yield Attempt("a vector of 384 objects", one("[" + ",".join(["{}"] * 384) + "]"))
    yield Attempt("a vector holding 1e400", one(vector("0.5", "1e400")))
    yield Attempt("a vector holding NaN", one(vector("NaN")))
    yield Attempt("a vector holding 1e39 (infinite in float32)", one(vector("0.5", "0.5", "1e39")))
    yield Attempt("a vector of 383 numbers (the header says 384)", one(vector(size=383)))
    revoke, forget = event("revokes", "e_" + "4" * 26, kept, "ops"), event("forgets", "e_" + "5" * 26, secret, "ops")
    yield Attempt(
        "lines 2-3 revoke and forget the store's two notes, line 4 is a note whose vector is strings",
        trailed([header, revoke, forget, with_vector(note, "[" + ",".join(['"0.1"'] * 384) + "]")]),
    )
    dangling = event("supersedes", "e_" + "6" * 26, json.loads(note)["id"], "ops", src="n_" + "0" * 26)
    yield Attempt(
        "lines 2-3 revoke and forget them, line 5 an edge from a note that exists nowhere (checked after parsing)",
        trailed([header, revoke, forget, with_vector(note, vector()), dangling]),
    )
    other = json.dumps({**json.loads(header), "scopes": ["eng"]})
    yield Attempt(
        "a file of scope eng whose tombstone names a note of scope ops",
        trailed([other, event("forgets", "e_" + "7" * 26, secret, "eng")]),
    )
    yield Attempt("an export without its trailer (cut short)", [header, note])
    yield Attempt(
        "line 3 nested 10,000 deep", [header, note, "[" * 10_000 + "]" * 10_000, *trailed([header, note])[2:]]
    )
    yield Attempt('"confidence":"0.5"', edited(confidence="0.5"))
    yield Attempt('"recorded_at":1', edited(recorded_at=1))
    yield Attempt('"recorded_at":"9000-01-01T00:00:00Z"', edited(recorded_at="9000-01-01T00:00:00Z"))
    entity = {"type": "entity", "name": "Billing", "entityType": "service", "observations": ["Runs on Fridays"]}
    yield Attempt(
        "knowledge graph: entity Billing a service on line 1, a team on line 2",
        [json.dumps(entity), json.dumps({**entity, "entityType": "team", "observations": ["Owned by Ana"]})],
        scope="kg",
    )
    crossed = [  # joined with U+001F, both are A␟knows␟B␟x␟C: one id for two relations
        {"type": "relation", "from": "A", "to": "B\x1fx\x1fC", "relationType": "knows"},
        {"type": "relation", "from": "A\x1fknows\x1fB", "to": "C", "relationType": "x"},
    ]
    yield Attempt(
        "knowledge graph: two relations whose names hold U+001F", [json.dumps(r) for r in crossed], scope="kg"
    )
    yield Attempt("a byte order mark before the header of a whole export", ["\ufeff" + header, *trailed([header, note])[1:]],
                  expected="accepted")  # fmt: skip


def run_imports(folder: Path, embedder: SentenceTransformerEmbedder) -> list[Row]:
    source, target = Store(folder / "import-source", embedder), Store(folder / "import-target", embedder)
    with source.memory() as memory:
        memory.remember(Draft(text="The VPN host moves to vpn-2 in March"), scope="ops")
        header, note = list(memory.export("ops", vectors=True))[:2]
    with target.memory() as memory:
        kept = memory.remember(Draft(text="The VPN host is vpn-1"), scope="ops").note.id
        secret = memory.remember(Draft(text="The alarm code is 4711"), scope="ops").note.id
    rows = []
    for n, attempt in enumerate(crafted_files(header, note, kept, secret)):
        path = folder / f"attack-{n:02d}.jsonl"
        path.write_text("\n".join(attempt.lines) + "\n", encoding="utf-8")
        before = target.fingerprint()
        scope = ["--scope", attempt.scope] if attempt.scope else []
        done = subprocess.run([CORRIGENDA, "import", str(path), "--db", str(target.path), *scope],
                              env=ENV, capture_output=True, text=True, timeout=600)  # fmt: skip
        after_cli = target.fingerprint()
        errors = [line for line in done.stderr.splitlines() if line.startswith("corrigenda: ")]
        told = errors[-1].removeprefix("corrigenda: ") if errors else (done.stdout.strip().splitlines() or [""])[0]
        if "Traceback" in done.stderr or "RecursionError" in done.stderr:
            told += " [a traceback on stderr]"
        cli = f"exit {done.returncode}: {told}"
        lines = path.read_text(encoding="utf-8").split("\n")  # as the CLI reads it
        try:
            with target.memory() as memory:
                imported = memory.import_lines(lines, attempt.scope or "default", actor="bench", source=path.name)
            api, api_refused = (
                f"accepted: {imported.notes_written} notes written, {imported.notes_present} present",
                False,
            )
        except Exception as exc:
            api, api_refused = f"{type(exc).__name__}: {exc}", True
        after_api = target.fingerprint()
        with target.memory() as memory:  # the two notes a crafted line tried to revoke or erase
            intact = memory.history(kept).note.state.value == "active" and bool(memory.tables.search.notes([secret]))
        refused = done.returncode != 0
        agrees = refused == api_refused and (not refused or api.endswith(told.removeprefix("import: ")))
        rows.append(
            Row("imports", attempt.attack, attempt.expected, short(cli, 150), refused,
                before == after_cli == after_api and intact, short(api, 150), agrees)
        )  # fmt: skip
        print(f"imports: {attempt.attack}: {cli[:160]} | api: {api[:100]}", file=sys.stderr)
    return rows


# -- the tables ----------------------------------------------------------------------------


def _yes(value: bool | None) -> str:
    return "–" if value is None else "yes" if value else "no"


def sessions_table(payload: dict[str, Any]) -> str:
    rows = [
        [
            r["attack"],
            r["expected"],
            r["answer"],
            _yes(r["refused"]),
            _yes(r["unchanged"]),
            "yes" if _as_expected(r) else "**NO**",
        ]
        for r in payload["rows"]
        if r["group"] == "sessions"
    ]
    return markdown_table(["attack", "expected", "answer", "refused", "store unchanged", "as expected"], rows)


def imports_table(payload: dict[str, Any]) -> str:
    rows = [
        [r["attack"], r["expected"], r["answer"], _yes(r["refused"]), _yes(r["unchanged"]), _yes(r["api_agrees"]),
         "yes" if _as_expected(r) else "**NO**"]
        for r in payload["rows"]
        if r["group"] == "imports"
    ]  # fmt: skip
    header = ["attack", "expected", "`corrigenda import FILE` answered", "refused", "store unchanged",
              "`Memory.import_lines` the same", "as expected"]  # fmt: skip
    return markdown_table(header, rows)


def _as_expected(row: dict[str, Any]) -> bool:
    return bool(row["refused"] == (row["expected"] == "refused"))


def table(payload: dict[str, Any]) -> str:
    return f"{sessions_table(payload)}\n\n{imports_table(payload)}"


TABLES = {"main": table, "sessions": sessions_table, "imports": imports_table}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, results="attacks").parse_args(argv)
    embedder = SentenceTransformerEmbedder()
    with tempfile.TemporaryDirectory(prefix="attacks-") as scratch:
        rows = run_sessions(Path(scratch), embedder) + run_imports(Path(scratch), embedder)
    payload: dict[str, Any] = {
        "rows": [asdict(r) for r in rows],
        "attacks": len(rows),
        "not_as_expected": [r.attack for r in rows if not r.as_expected],
        "changed_the_store_when_refused": [r.attack for r in rows if r.refused and not r.unchanged],
    }
    print(table(payload))
    for name in ("not_as_expected", "changed_the_store_when_refused"):
        for attack in payload[name]:
            print(f"{name.replace('_', ' ')}: {attack}")
    write_results(args.json, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
