"""The web view in this process (Starlette's test client, real LanceDB): where it opens, what a
forgotten note's page says, the headers every answer carries, and a person's writes: confirmed,
recorded as the person, refused without the form token or from another origin, nothing changed then.

tests/server/test_ui.py drives the same pages in Chromium, through the real command."""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from corrigenda.server import ui_gate
from corrigenda.server.config import Settings
from corrigenda.server.grants import digest
from corrigenda.server.ui import build_ui
from corrigenda.server.ui_gate import SESSION_LIFETIME, Session, Sessions
from corrigenda.store import Draft, Memory
from pydantic import ValidationError
from starlette.testclient import TestClient

from .test_ui import seed

ORIGIN = "http://127.0.0.1:8766"  # the web view's own origin, on its default port


def browse(memory: Memory, scope: str = "ops") -> TestClient:
    app = build_ui(memory, scope, Settings(db=memory.uri, person="Ada"))
    return TestClient(app, base_url=ORIGIN, headers={"Origin": ORIGIN})


@pytest.fixture
def seeded(memory: Memory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    ids = seed(memory)
    with browse(memory) as client:
        yield client, ids


def form_token(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page carries no form token"
    return found.group(1)


def test_an_empty_store_opens_on_a_page_that_says_so(memory: Memory) -> None:
    with browse(memory) as client:
        page = client.get("/")
    assert page.status_code == 200
    assert "This memory holds nothing yet" in page.text and "Cannot" not in page.text


def test_it_opens_on_the_projects_scope_else_on_the_most_recently_changed_one(memory: Memory) -> None:
    memory.remember(Draft(text="The old project used Jenkins"), scope="older")
    memory.remember(Draft(text="Deploys go through Argo CD"), scope="newer")
    with browse(memory, scope="mine#3f2a9c") as client:  # the project's scope holds nothing
        landing = client.get("/")
        assert landing.status_code == 200
        assert "<h1>Scope newer</h1>" in landing.text and "Deploys go through Argo CD" in landing.text
        assert "This project's scope <b>mine#3f2a9c</b> holds nothing yet" in landing.text  # said first
        assert (
            "Nothing corrected, revoked, reinstated, forgotten or confirmed in the last 7 days" in landing.text
        )  # not "none"
        named = client.get("/?scope=nothing-here")  # another scope than the project's: mistyped, most likely
        assert named.status_code == 200 and "Nothing was ever stored in scope <b>nothing-here</b>" in named.text
        assert 'href="/?scope=newer">newer</a> (1 note)' in named.text and 'name="text"' not in named.text
        own = client.get("/?scope=mine%233f2a9c")  # the project's own: new, not mistyped; a note can be added
        assert "Scope <b>mine#3f2a9c</b> holds nothing yet" in own.text and 'name="action" value="remember"' in own.text
    memory.remember(Draft(text="This project builds with uv"), scope="mine#3f2a9c")
    with browse(memory, scope="mine#3f2a9c") as client:
        assert "<h1>Scope mine#3f2a9c</h1>" in client.get("/").text


def test_a_chain_is_titled_by_its_subject_and_shows_kind_tags_and_who(memory: Memory) -> None:
    old = memory.remember(
        Draft(text="The API rate limit is 100/min", subject="api.rate_limit", tags=["limits"], kind="decision"),
        scope="ops", actor="claude-code",
    ).note  # fmt: skip
    new = memory.correct(old.id, Draft(text="The API rate limit is 500/min"), reason="raised", actor="cursor").note
    with browse(memory) as client:
        page = client.get(f"/chain/{old.id}").text
    assert "<h1>api.rate_limit</h1>" in page
    assert '<span class="kind">decision</span>' in page and "#limits" in page
    assert f"/chain/{new.id}" in page or new.id in page
    timeline = page.split('<ol class="timeline">')[1]
    assert "cursor (agent) replaced “The API rate limit is 100/min” with “The API rate limit is 500/min”" in timeline
    assert "because “raised”" in timeline


def test_a_forgotten_notes_page_says_when_and_why_and_shows_no_text(seeded: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = seeded
    for path in (f"/note/{ids['gone']}", f"/chain/{ids['gone']}"):
        page = client.get(path)
        assert page.status_code == 200
        assert "was forgotten at" in page.text and "a person asked for it to be erased" in page.text
        assert "tulip" not in page.text
    unknown = client.get("/note/n_" + "0" * 26)
    assert unknown.status_code == 404 and "no note with id" in unknown.text


def test_an_address_with_no_page_answers_404_with_the_way_back(seeded: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = seeded
    for path in ("/scope/ops?q=billing", "/chains/<b>n_x</b>"):
        answer = client.get(path)
        assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html"), path
        assert "<h1>No such page</h1>" in answer.text and 'href="/">the first page' in answer.text, path
    assert "<code>/chains/&lt;b&gt;n_x&lt;/b&gt;</code>" in answer.text  # the address, escaped
    assert client.get("/static/nothing.css").status_code == 404


def test_every_answer_forbids_scripts_framing_and_sniffing(seeded: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = seeded
    for path in ("/", f"/chain/{ids['new']}", "/note/n_" + "0" * 26, "/static/ui.css", "/static/favicon.svg"):
        answer = client.get(path)
        assert answer.status_code in (200, 404), path
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script-src" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff"
    page = client.get(f"/chain/{ids['new']}").text
    assert "<script" not in page and not re.search(r"\son[a-z]+=", page)  # no inline script or handler


def test_a_correction_by_hand_is_confirmed_then_recorded_as_the_person(
    memory: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    token = form_token(client.get(f"/chain/{ids['new']}").text)
    asked = {"action": "correct", "note_id": ids["new"], "text": "The payments service listens on port 9443",
             "reason": "moved to TLS", "csrf": token}  # fmt: skip
    confirm = client.post("/act", data=asked)
    assert confirm.status_code == 200 and "Confirm" in confirm.text and "Ada" in confirm.text
    assert memory.history(ids["new"]).note.state.value == "active"  # asking wrote nothing

    done = client.post("/act", data={**asked, "confirmed": "yes"}, follow_redirects=False)
    assert done.status_code == 303
    chain = memory.history(ids["new"]).chain
    assert [h.text for h in chain.heads] == ["The payments service listens on port 9443"]
    assert chain.heads[0].actor == "person:Ada" and chain.history[0].reason == "moved to TLS"
    shown = client.get(done.headers["location"])
    assert (
        "Corrected: the new note is current" in shown.text and 'Ada <span class="person">(person)</span>' in shown.text
    )


@pytest.mark.parametrize(
    ("action", "extra", "check"),
    [
        ("revoke", {}, lambda m, ids: m.history(ids["new"]).note.state.value == "revoked"),
        ("reinstate", {}, lambda m, ids: m.history(ids["old"]).note.state.value == "active"),
        ("forget", {}, lambda m, ids: m.tombstone(ids["new"]) is not None),
    ],
)
def test_revoke_reinstate_and_forget_by_hand(
    memory: Memory, seeded: tuple[TestClient, dict[str, str]], action: str, extra: dict[str, str], check: object
) -> None:
    client, ids = seeded
    target = ids["old"] if action == "reinstate" else ids["new"]
    token = form_token(client.get(f"/chain/{target}").text)
    fields = {"action": action, "note_id": target, "reason": "a person said so", "csrf": token, "confirmed": "yes"}
    done = client.post("/act", data={**fields, **extra}, follow_redirects=False)
    assert done.status_code == 303, done.text
    assert check(memory, ids)  # type: ignore[operator]
    assert client.get(done.headers["location"]).status_code == 200


def test_a_link_by_hand(memory: Memory, seeded: tuple[TestClient, dict[str, str]]) -> None:
    client, ids = seeded
    owner = memory.remember(Draft(text="Payments are run by the platform team"), scope="ops").note
    token = form_token(client.get(f"/chain/{ids['new']}").text)
    fields = {"action": "link", "note_id": ids["new"], "dst_id": owner.id, "kind": "depends_on",
              "reason": "ask them first", "csrf": token, "confirmed": "yes"}  # fmt: skip
    assert client.post("/act", data=fields, follow_redirects=False).status_code == 303
    links = [e for e in memory.history(ids["new"]).events if e.kind.value == "depends_on" and e.dst == owner.id]
    assert len(links) == 1 and links[0].actor == "person:Ada"


def test_a_write_without_the_form_token_or_from_elsewhere_is_refused_and_changes_nothing(
    memory: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    before = memory.history(ids["new"]).model_dump()
    token = form_token(client.get(f"/chain/{ids['new']}").text)
    fields = {"action": "revoke", "note_id": ids["new"], "reason": "x", "confirmed": "yes"}
    missing = client.post("/act", data=fields)
    assert missing.status_code == 403 and "did not come from this web view" in missing.text
    wrong = client.post("/act", data={**fields, "csrf": token[::-1]})
    assert wrong.status_code == 403
    foreign = client.post("/act", data={**fields, "csrf": token}, headers={"Origin": "http://127.0.0.1:9999"})
    assert foreign.status_code == 403  # refused by the Host/Origin check every request passes
    # an origin that check lets through (another loopback name) is still not this page's own
    other = client.post("/act", data={**fields, "csrf": token}, headers={"Origin": "http://localhost:8766"})
    assert other.status_code == 403 and "must come from a page of this web view" in other.text
    no_origin = client.post("/act", data={**fields, "csrf": token}, headers={"Origin": ""})
    assert no_origin.status_code == 403
    assert client.get("/act").status_code == 405  # reading never writes
    blank = client.post("/act", data={**fields, "csrf": token, "reason": " "})
    assert blank.status_code == 400 and "reason: missing" in blank.text
    unknown = client.post("/act", data={**fields, "csrf": token, "action": "drop"})
    assert unknown.status_code == 400 and "action: 'drop' is not one of" in html.unescape(unknown.text)
    assert memory.history(ids["new"]).model_dump() == before


def test_a_contested_chain_and_an_unsure_note_are_visible(memory: Memory) -> None:
    old = memory.remember(Draft(text="The cache TTL is 60 seconds", subject="cache.ttl"), scope="ops").note
    memory.correct(old.id, Draft(text="The cache TTL is 120 seconds"), reason="ops said so", actor="cursor")
    memory.correct(old.id, Draft(text="The cache TTL is 30 seconds", confidence=0.4), reason="dev", fork=True)
    with browse(memory) as client:
        page = client.get(f"/chain/{old.id}").text
    assert '<section class="chain contested">' in page and "CONTESTED: its current notes disagree" in page
    assert page.count('<li class="note now">') == 2 and '<span class="unsure">confidence 0.40</span>' in page


def test_a_search_shows_an_unlinked_older_value_as_possibly_outdated_until_a_person_says_they_differ(
    memory: Memory,
) -> None:
    said_17 = "I have added 17 new postcards to my collection since I started collecting again."
    old = memory.remember(Draft(text=said_17, subject="postcards added"), scope="ops").note
    said_25 = "Speaking of my hobby, I have added 25 new postcards since I started collecting again."
    new = memory.remember(Draft(text=said_25, subject="postcards added"), scope="ops").note
    search = "/?scope=ops&q=How+many+new+postcards+have+I+added%3F"
    with browse(memory) as client:
        page = client.get(search).text
        sections = page.split('<section class="chain')[1:3]
        newer = next(s for s in sections if "25 new postcards" in s)
        older = next(s for s in sections if "17 new postcards" in s)
        assert "POSSIBLY OUTDATED" not in newer
        assert "POSSIBLY OUTDATED by" in older and "17 → 25" in older
        token = form_token(client.get(f"/chain/{new.id}").text)
        fields = {"action": "link", "note_id": new.id, "dst_id": old.id, "kind": "distinct",
                  "reason": "two collections", "csrf": token}  # fmt: skip
        asked = client.post("/act", data=fields)
        question = "states another fact than “I have added 17 new postcards to my collection since I started "
        assert f"{question}collecting again.” ({old.id})" in html.unescape(asked.text)  # both notes in words
        assert client.post("/act", data={**fields, "confirmed": "yes"}, follow_redirects=False).status_code == 303
        assert "POSSIBLY OUTDATED" not in client.get(search).text
        timeline = html.unescape(client.get(f"/chain/{new.id}").text)
        on_old = html.unescape(client.get(f"/chain/{old.id}").text)
    said = "said “Speaking of my hobby, I have added 25 new postcards since I started collecting …” states another "
    said += "fact than “I have added 17 new postcards to my collection since I started collecting again.” because"
    assert f"{said} “two collections”" in timeline and f"{said} “two collections”" in on_old  # texts on both pages
    [event] = memory.history(new.id).events
    assert (event.kind.value, event.dst, event.actor) == ("distinct", old.id, "person:Ada")


@pytest.mark.parametrize(("answer", "kind", "recorded"), [
    ("They are different facts", "distinct", "Recorded: they are different facts"),
    ("The newer note replaces it", "supersedes", "Recorded: the newer note replaces the older one"),
])  # fmt: skip
def test_a_possibly_outdated_mark_in_a_search_is_settled_by_a_person_from_the_search(
    memory: Memory, answer: str, kind: str, recorded: str
) -> None:
    """Each answer under the mark is a link form (the newer note → the older) that asks for a reason and
    a confirmation; afterwards the person is back on the search, told what was recorded, the mark gone,
    and the older note is current (different facts) or history (replaced). A search as of a past time
    offers no answers."""
    old = memory.remember(Draft(text="The office opens at 8:00 on weekdays.", subject="office.hours"), scope="ops")
    new = memory.remember(Draft(text="The office opens at 9:00 on weekdays.", subject="office.hours"), scope="ops")
    search = "/?scope=ops&q=When+does+the+office+open%3F"
    with browse(memory) as client:
        page = html.unescape(client.get(search).text)
        assert "POSSIBLY OUTDATED" in page and "They are different facts" in page and "replaces it" in page
        then = (new.note.recorded_at + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S")
        past = client.get(f"{search}&as_of={then}").text
        assert "POSSIBLY OUTDATED" in past and "They are different facts" not in past  # marked, no hands
        form = next(f for f in page.split("<form")[1:] if f"{answer}…</button>" in f)
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
        assert (fields["note_id"], fields["dst_id"], fields["kind"]) == (new.note.id, old.note.id, kind)
        asked = client.post("/act", data={**fields, "reason": "said by Ada"})
        assert "Confirm" in asked.text and memory.history(old.note.id).events == []  # nothing written yet
        done = client.post("/act", data={**fields, "reason": "said by Ada", "confirmed": "yes"}, follow_redirects=False)
        assert done.status_code == 303
        assert done.headers["location"] == search + f"&done=settled-{kind}"  # back to the search
        shown = html.unescape(client.get(done.headers["location"]).text)
        assert recorded in shown and "Linked." not in shown and "POSSIBLY OUTDATED" not in shown
        assert "The office opens at 9:00" in shown and "The office opens at 8:00" in shown
    [event] = memory.history(old.note.id).events
    assert (event.kind.value, event.src, event.actor) == (kind, new.note.id, "person:Ada")
    state = memory.history(old.note.id).note.state.value
    assert state == ("active" if kind == "distinct" else "superseded")


def words(page: str) -> str:
    """A page's text as a person reads it: no tags, no escapes."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def timeline_of(page: str) -> list[str]:
    """A chain page's timeline, row by row, in words."""
    return [words(row) for row in page.split('<ol class="timeline">')[1].split("</ol>")[0].split("<li>")[1:]]


def test_the_timeline_says_what_an_undone_event_did_in_words_not_its_id(memory: Memory) -> None:
    old = memory.remember(Draft(text="The cache TTL is 60 seconds"), scope="ops", actor="claude-code").note
    new = memory.correct(old.id, Draft(text="The cache TTL is 120 seconds"), reason="ops said so", actor="cursor")
    memory.reinstate(new.event.id, reason="the change was rolled back", actor="person:Ada")
    with browse(memory) as client:
        page = client.get(f"/chain/{new.note.id}").text
    assert not re.search(r"e_[0-9a-z]{26}", page.split('<ol class="timeline">')[1])  # no event id, anywhere
    [undid] = [row for row in timeline_of(page) if "undid" in row]
    said = "Ada (person) undid the replacement of “The cache TTL is 60 seconds” with “The cache TTL is 120 seconds” ("
    assert said in undid and "by cursor (agent)) because “the change was rolled back”" in undid, undid
    [replaced] = [row for row in timeline_of(page) if "replaced" in row]
    assert "because “ops said so” (undone at " in replaced and "by Ada (person))" in replaced, replaced


def test_a_need_carried_over_by_a_correction_is_shown_as_carried_over_without_the_corrections_reason(
    memory: Memory,
) -> None:
    proxy = memory.remember(Draft(text="Traffic enters through nginx on lb-1"), scope="ops").note
    old = memory.remember(Draft(text="The API listens on port 8080"), scope="ops", depends_on=[proxy.id]).note
    new = memory.correct(old.id, Draft(text="The API listens on port 9090"), reason="moved to the new rack").note
    with browse(memory) as client:
        timeline = timeline_of(client.get(f"/chain/{new.id}").text)
    [carried] = [row for row in timeline if "“The API listens on port 9090” needs" in row]
    assert "needs “Traffic enters through nginx on lb-1”, carried over from the note it corrects" in carried
    assert "moved to the new rack" not in carried, carried
    assert any(
        "said “The API listens on port 8080” needs “Traffic enters through nginx on lb-1”" in r for r in timeline
    )


def test_the_link_form_finds_the_other_note_by_searching_no_id_typed(
    memory: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    owner = memory.remember(Draft(text="Payments are run by the platform team"), scope="ops").note
    chain = client.get(f"/chain/{ids['new']}").text
    assert 'name="find"' in chain and 'name="dst_id" required pattern' not in chain  # a search, not an id to type
    found = client.get(f"/chain/{ids['new']}", params={"find": "who runs payments"}).text
    choices = dict(
        re.findall(r'<input type="radio" name="dst_id" value="(n_[0-9a-z]{26})"[^>]*>\s*<span[^>]*>([^<]*)', found)
    )
    assert choices.get(owner.id) == "Payments are run by the platform team", choices
    assert ids["new"] not in choices and ids["old"] not in choices  # not the chain's own notes
    form = next(f for f in found.split("<form")[1:] if 'type="radio"' in f)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    fields |= {"dst_id": owner.id, "kind": "depends_on", "reason": "ask them first", "confirmed": "yes"}
    done = client.post("/act", data=fields, follow_redirects=False)
    assert done.status_code == 303, done.text
    assert any(e.kind.value == "depends_on" and e.dst == owner.id for e in memory.history(ids["new"]).events)
    assert "Linked: the note now needs the other one" in client.get(done.headers["location"]).text
    nothing = client.get(f"/chain/{ids['new']}", params={"find": "zebra crossing quartz"}).text
    assert "No other note of scope <b>ops</b> matches" in nothing


def test_a_person_adds_a_note_from_the_scopes_page(memory: Memory, seeded: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = seeded
    landing = client.get("/").text
    form = next((f for f in landing.split("<form")[1:] if 'name="action" value="remember"' in f), None)
    assert form is not None, "the scope's page has no form to add a note"
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    assert fields["scope"] == "ops" and 'name="text"' in form and 'name="subject"' in form and "reason" not in form
    added = {**fields, "text": "The payments service is deployed on Tuesdays", "subject": "payments.deploys"}
    done = client.post("/act", data=added, follow_redirects=False)
    assert done.status_code == 303, done.text
    [note] = [n for n in memory.list_notes("ops", "current").notes if n.subject == "payments.deploys"]
    assert (note.text, note.actor, note.scope) == (added["text"], "person:Ada", "ops")
    shown = client.get(done.headers["location"]).text
    assert done.headers["location"].startswith(f"/chain/{note.id}") and "Added: the note is current" in shown
    assert client.post("/act", data={**added, "csrf": "x"}).status_code == 403  # the form token, as every hand
    assert client.post("/act", data={**added, "text": " "}).status_code == 400
    assert len(memory.list_notes("ops", "current").notes) == 4


def test_a_mistyped_scope_names_the_nearest_scopes_the_caller_may_read(memory: Memory, tmp_path: Path) -> None:
    memory.remember(Draft(text="The team deploys on Tuesdays"), scope="team-ops")
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    memory.remember(Draft(text="Layoffs are planned for March"), scope="team-opx-secret")
    with browse(memory, scope="ada") as client:
        page = client.get("/?scope=team-opz")
    assert page.status_code == 200 and "Nothing was ever stored in scope <b>team-opz</b>" in page.text
    assert 'href="/?scope=team-ops">team-ops</a> (1 note)' in page.text and "team-opx-secret" in page.text
    (tmp_path / "grants.toml").write_text(
        f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{digest(ADA)}"\nread = ["team-ops*", "team-opz", "ada"]\n'
    )
    with granted(memory, tmp_path) as client:
        page = client.get("/?scope=team-opz", headers={"Authorization": f"Bearer {ADA}"})
    assert page.status_code == 200 and 'href="/?scope=team-ops">team-ops</a>' in page.text
    assert "secret" not in page.text and "Layoffs" not in page.text  # a scope it may not read is not named


def test_every_page_says_who_a_persons_changes_are_recorded_as_and_how_to_change_it(
    memory: Memory, tmp_path: Path, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    for path in ("/", "/scopes", f"/chain/{ids['new']}", "/notes", "/changes", "/no/such/page", "/?as_of=x"):
        said = words(client.get(path).text)
        assert "recorded as Ada (person)" in said and "set CORRIGENDA_PERSON" in said, path
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    with granted(memory, tmp_path) as client:
        said = words(client.get("/", headers={"Authorization": f"Bearer {ADA}"}).text)
    assert "recorded as ada (person), the name of your credential" in said and "CORRIGENDA_PERSON" not in said


ADA, BOB = "ada-token-0123456789abcdef", "bob-token-0123456789abcdef"


def granted(
    memory: Memory, tmp_path: Path, scope: str = "ada", clock: Callable[[], float] = time.time, **settings: Any
) -> TestClient:
    """The web view with a grants file: ada reads team-* and ada, writes ada; bob reads and writes bob
    (unless the file is already there). `clock`: the time its sessions go by."""
    grants = tmp_path / "grants.toml"
    if not grants.exists():
        write_grants(grants, {"ada": ADA, "bob": BOB})
    app = build_ui(memory, scope, Settings(db=memory.uri, person="Ada", grants=str(grants), **settings), clock)
    return TestClient(app, base_url=ORIGIN, headers={"Origin": ORIGIN})


def write_grants(path: Path, tokens: dict[str, str]) -> None:
    """ada reads team-* and ada, writes ada; every other name reads and writes its own scope."""
    path.write_text("".join(
        f'[[credentials]]\nname = "{name}"\ntoken_sha256 = "{digest(token)}"\n'
        + ('read = ["team-*"]\nwrite = ["ada"]\n\n' if name == "ada" else f'write = ["{name}"]\n\n')
        for name, token in tokens.items()
    ))  # fmt: skip


def test_with_a_grants_file_a_credential_sees_and_changes_its_own_scopes_only(memory: Memory, tmp_path: Path) -> None:
    mine = memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada").note
    team = memory.remember(Draft(text="The team deploys on Tuesdays"), scope="team-ops").note
    bobs = memory.remember(Draft(text="Bob secret staging password hint"), scope="bob").note
    with granted(memory, tmp_path) as client:
        assert client.get("/").status_code == 401  # no credential: nothing from the memory
        assert "Ada build" not in client.get("/", headers={"Authorization": "Bearer wrong"}).text
        entered = client.get(f"/?token={ADA}", follow_redirects=False)
        assert entered.status_code == 303 and ADA not in entered.headers["location"]
        landing = client.get("/").text  # the session cookie now names ada
        assert "Ada build runs on the blue runner" in landing and "team-ops" in landing
        listed = client.get("/scopes").text
        assert "Scopes 1–2 of 2" in listed and ">bob<" not in listed and "Bob secret" not in listed

        refused = client.get(f"/chain/{bobs.id}")
        assert refused.status_code == 403 and "Bob secret" not in refused.text
        assert "scope 'bob': credential 'ada' may not read it" in html.unescape(refused.text)
        assert client.get("/?scope=bob").status_code == 403
        assert client.get("/notes?scope=bob").status_code == 403

        team_page = client.get(f"/chain/{team.id}").text
        assert "The team deploys on Tuesdays" in team_page and "may read scope team-ops but not change it" in team_page
        token = form_token(client.get(f"/chain/{mine.id}").text)
        fields = {"action": "revoke", "reason": "wrong", "csrf": token, "confirmed": "yes"}
        before = memory.history(team.id).model_dump()
        read_only = client.post("/act", data={**fields, "note_id": team.id})
        assert read_only.status_code == 403 and "may not write it" in read_only.text
        link = client.post("/act", data={**fields, "action": "link", "kind": "depends_on", "note_id": mine.id,
                                         "dst_id": bobs.id})  # fmt: skip
        assert link.status_code == 403  # the other end is bob's
        assert memory.history(team.id).model_dump() == before and not memory.history(mine.id).events[1:]

        done = client.post("/act", data={**fields, "action": "correct", "note_id": mine.id,
                                         "text": "Ada build runs on the green runner"}, follow_redirects=False)  # fmt: skip
        assert done.status_code == 303
        assert memory.history(mine.id).chain.heads[0].actor == "person:ada"  # the credential's name, a person

    with granted(memory, tmp_path) as client:  # bob, by bearer: his scope only, and no cookie of ada's works
        bob = {"Authorization": f"Bearer {BOB}"}
        assert "Bob secret" in client.get(f"/chain/{bobs.id}", headers=bob).text
        assert client.get(f"/chain/{mine.id}", headers=bob).status_code == 403
        client.cookies.set("corrigenda_ui", "ada." + "0" * 64)
        assert client.get("/").status_code == 401  # a session cookie is the credential's MAC, not its name


def test_a_cookie_minted_from_the_grants_files_digest_opens_nothing(memory: Memory, tmp_path: Path) -> None:
    """Whoever reads the grants file knows each token's digest; that is no key to a session."""
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    mac = hmac.new(digest(ADA).encode(), b"corrigenda web view session ada", hashlib.sha256).hexdigest()
    with granted(memory, tmp_path) as client:
        client.cookies.set("corrigenda_ui", f"ada.{mac}")
        page = client.get("/")
    assert page.status_code == 401 and "Ada build" not in page.text


def test_a_scope_outside_the_grants_is_refused_in_any_unicode_spelling(memory: Memory, tmp_path: Path) -> None:
    """'café-team' in NFD ('cafe' and a combining accent) matches a `cafe*` grant; the store reads it as
    the NFC 'café-team', which that grant does not cover."""
    memory.remember(Draft(text="The café team's door code is 4711"), scope="café-team")
    memory.remember(Draft(text="The cafe team meets on Mondays"), scope="cafe-team")
    (tmp_path / "grants.toml").write_text(
        f'[[credentials]]\nname = "ada"\ntoken_sha256 = "{digest(ADA)}"\nread = ["cafe*"]\n'
    )
    ada = {"Authorization": f"Bearer {ADA}"}
    with granted(memory, tmp_path, scope="cafe-team") as client:
        assert "The cafe team meets on Mondays" in client.get("/?scope=cafe-team", headers=ada).text
        for path in ("/", "/notes", "/changes", "/scopes"):
            page = client.get(f"{path}?scope=cafe%CC%81-team", headers=ada)
            assert page.status_code == 403, (path, page.status_code)
            assert "door code" not in page.text and "credential 'ada' may not read it" in html.unescape(page.text), path
        assert "door code" not in client.get("/?scope=cafe%CC%81-team&q=door+code", headers=ada).text


def test_an_empty_scope_is_refused_naming_only_scopes_the_credential_may_read(memory: Memory, tmp_path: Path) -> None:
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    memory.remember(Draft(text="The team deploys on Tuesdays"), scope="team-ops")
    memory.remember(Draft(text="Layoffs are planned for March"), scope="secret-hr-layoffs")
    ada = {"Authorization": f"Bearer {ADA}"}
    with granted(memory, tmp_path) as client:
        for path in ("/notes?scope=team-payments", "/changes?scope=team-payments", "/?scope=team-payments&q=deploys"):
            page = client.get(path, headers=ada)
            said = html.unescape(page.text)
            assert page.status_code == 400 and "nothing was ever stored in scope 'team-payments'" in said, path
            assert "'team-ops' (1 note)" in said and "'ada' (1 note)" in said, path
            assert "secret-hr" not in said and "Layoffs" not in said, path


def test_a_credential_whose_scopes_hold_no_note_yet_sees_pages_that_say_so(memory: Memory, tmp_path: Path) -> None:
    """bob may write 'bob' alone, which holds nothing; the web view opens on 'ada', which bob may not read."""
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    memory.remember(Draft(text="Layoffs are planned for March"), scope="secret-hr-layoffs")
    bob = {"Authorization": f"Bearer {BOB}"}
    with granted(memory, tmp_path) as client:
        for path in ("/", "/scopes", "/notes", "/changes", "/?q=layoffs"):
            page = client.get(path, headers=bob)
            assert page.status_code == 200, (path, page.status_code)
            assert "The scopes your credential may read hold no notes yet" in page.text, path
            assert "Ada build" not in page.text and "Layoffs" not in page.text and "secret-hr" not in page.text, path
            assert "<b>ada</b>" not in page.text, path  # not even the name of the scope it would open on


SECRET = "a-fleet-secret-of-32-characters-or-more"


class Clock:
    """The time a web view's sessions go by, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def logged_in(client: TestClient, token: str = ADA) -> str:
    """Open a session with `token`, as a person does once with ?token=; its cookie."""
    entered = client.get(f"/?token={token}", follow_redirects=False)
    assert entered.status_code == 303 and f"Max-Age={SESSION_LIFETIME}" in entered.headers["set-cookie"]
    cookie = client.cookies.get("corrigenda_ui")
    assert cookie and token not in cookie and digest(token) not in cookie
    return cookie


@pytest.mark.parametrize(
    "sent_from",
    [{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"}, {"Referer": "http://127.0.0.1:9000/trap"}],
)
def test_a_token_address_opened_from_another_site_opens_no_session(
    memory: Memory, tmp_path: Path, sent_from: dict[str, str]
) -> None:
    """Login CSRF: a page elsewhere sends the person's browser to ?token=THEIRS, to have the person's
    notes written into the attacker's scopes. The browser says where a navigation came from
    (Sec-Fetch-Site; else Referer), and a page cannot make it lie."""
    memory.remember(Draft(text="Bob secret staging password hint"), scope="bob")
    with granted(memory, tmp_path) as client:
        trap = client.get(f"/?token={BOB}", headers=sent_from, follow_redirects=False)
        assert trap.status_code == 403 and "set-cookie" not in trap.headers and "Bob secret" not in trap.text
        assert "address bar" in trap.text and "corrigenda_ui" not in client.cookies
        assert client.get("/").status_code == 401
        for typed in ({"Sec-Fetch-Site": "none"}, {"Sec-Fetch-Site": "same-origin"}, {"Referer": f"{ORIGIN}/x"}, {}):
            client.cookies.clear()
            assert client.get(f"/?token={BOB}", headers=typed, follow_redirects=False).status_code == 303, typed


def test_a_token_address_does_not_replace_another_credentials_session(memory: Memory, tmp_path: Path) -> None:
    with granted(memory, tmp_path) as client:
        adas = logged_in(client, ADA)
        other = client.get(f"/?token={BOB}", headers={"Sec-Fetch-Site": "none"}, follow_redirects=False)
        assert other.status_code == 409 and "set-cookie" not in other.headers
        assert "logged in as ada" in other.text and "Log out" in other.text
        assert client.cookies.get("corrigenda_ui") == adas and client.get("/").status_code == 200
        assert logged_in(client, ADA) != adas  # the same credential again: a new session in its place


def test_a_session_opened_with_the_token_ends_at_logout(memory: Memory, tmp_path: Path) -> None:
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    with granted(memory, tmp_path) as client:
        cookie = logged_in(client)
        landing = client.get("/").text
        assert "Ada build runs on the blue runner" in landing and "Log out</button>" in landing
        assert client.post("/logout").status_code == 403  # without the page's form token: nothing ends
        assert client.post("/logout", data={"csrf": form_token(landing)}, headers={"Origin": "http://evil.example"}
                           ).status_code == 403  # fmt: skip
        assert client.get("/").status_code == 200

        out = client.post("/logout", data={"csrf": form_token(landing)})
        assert out.status_code == 200 and "Logged out" in out.text and "Ada build" not in out.text
        assert 'corrigenda_ui=""' in out.headers["set-cookie"] or "Max-Age=0" in out.headers["set-cookie"]
        assert client.get("/").status_code == 401
        client.cookies.set("corrigenda_ui", cookie)  # a copy kept from before: ended all the same
        refused = client.get("/")
        assert refused.status_code == 401 and "Ada build" not in refused.text and "?token=" in refused.text
        client.cookies.clear()
        logged_in(client)  # the token opens a new one
        assert client.get("/").status_code == 200


def test_a_session_expires_after_its_lifetime(memory: Memory, tmp_path: Path) -> None:
    clock = Clock()
    with granted(memory, tmp_path, clock=clock) as client:
        logged_in(client)
        clock.now += SESSION_LIFETIME - 1
        assert client.get("/").status_code == 200
        clock.now += 1
        expired = client.get("/")
        assert expired.status_code == 401 and "This web view needs a token" in expired.text


def test_a_session_opens_only_the_servers_that_share_its_secret(memory: Memory, tmp_path: Path) -> None:
    with granted(memory, tmp_path) as first:
        cookie = logged_in(first)
    with granted(memory, tmp_path) as restarted:  # another process: a secret of its own
        restarted.cookies.set("corrigenda_ui", cookie)
        assert restarted.get("/").status_code == 401
    with granted(memory, tmp_path, session_secret=SECRET) as first:
        cookie = logged_in(first)
    with granted(memory, tmp_path, session_secret=SECRET) as second:  # a fleet's other server
        second.cookies.set("corrigenda_ui", cookie)
        assert second.get("/").status_code == 200
    with granted(memory, tmp_path, session_secret=SECRET[::-1]) as other:
        other.cookies.set("corrigenda_ui", cookie)
        assert other.get("/").status_code == 401


def test_a_page_from_one_server_of_a_fleet_posts_to_another_and_its_form_token_is_its_sessions_own(
    memory: Memory, tmp_path: Path
) -> None:
    """Behind a balancer, a page served by one server is posted to another: with the fleet's secret the
    form token is the same on both (it was drawn per process, and every such post was refused). It is
    the session's own: another session's page cannot lend its token."""
    note = memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada").note
    with granted(memory, tmp_path, session_secret=SECRET) as first:
        cookie = logged_in(first)
        token = form_token(first.get(f"/chain/{note.id}").text)
        first.cookies.clear()
        bobs = form_token(first.get(f"/chain/{note.id}?token={BOB}").text)
    fields = {"action": "revoke", "note_id": note.id, "reason": "the runner is green now", "confirmed": "yes"}
    with granted(memory, tmp_path, session_secret=SECRET) as second:
        second.cookies.set("corrigenda_ui", cookie)
        lent = second.post("/act", data={**fields, "csrf": bobs})
        assert lent.status_code == 403 and memory.history(note.id).chain.heads[0].state == "active"
        posted = second.post("/act", data={**fields, "csrf": token}, follow_redirects=False)
        assert posted.status_code == 303, posted.text
    assert memory.history(note.id).note.state == "revoked"


def test_the_session_of_a_credential_removed_or_given_a_new_token_opens_nothing(memory: Memory, tmp_path: Path) -> None:
    memory.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    with granted(memory, tmp_path, session_secret=SECRET) as client:
        adas = logged_in(client, ADA)
        client.cookies.clear()  # else ada's session stands: a token does not replace it
        bobs = logged_in(client, BOB)
    new_token = "ada-new-token-0123456789abcdef"
    write_grants(tmp_path / "grants.toml", {"ada": new_token})  # ada's token changed, bob removed
    with granted(memory, tmp_path, session_secret=SECRET) as client:  # the server started again with the file
        for cookie in (adas, bobs):
            client.cookies.set("corrigenda_ui", cookie)
            refused = client.get("/")
            assert refused.status_code == 401 and "Ada build" not in refused.text
        client.cookies.clear()
        assert client.get(f"/?token={ADA}").status_code == 401
        logged_in(client, new_token)
        assert "Ada build runs on the blue runner" in client.get("/").text


def test_logged_out_sessions_are_remembered_until_they_expire_and_no_more_than_max_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    sessions = Sessions(b"k" * 32, clock)
    digests = {"ada": digest(ADA), "bob": digest(BOB)}

    def opened(name: str, token: str) -> tuple[str, Session]:
        cookie = sessions.open(name, digest(token))
        session = sessions.check(cookie, digests)
        assert session is not None
        return cookie, session

    monkeypatch.setattr(ui_gate, "MAX_ENDED", 2)
    ada, bob = [opened("ada", ADA) for _ in range(3)], opened("bob", BOB)
    sessions.end(ada[0][1])
    sessions.end(ada[1][1])
    assert sessions.check(ada[0][0], digests) is None and sessions.check(ada[2][0], digests) is not None
    sessions.end(bob[1])  # full: bob's every session so far ends
    assert len(sessions.ended) == 2 and sessions.check(bob[0], digests) is None
    assert sessions.check(ada[2][0], digests) is not None  # ada's others are untouched
    clock.now += SESSION_LIFETIME
    sessions.end(opened("ada", ADA)[1])  # the expired ids are dropped before a new one is kept
    assert len(sessions.ended) == 1


def test_a_session_secret_too_short_to_be_a_key_is_refused() -> None:
    with pytest.raises(ValidationError, match="CORRIGENDA_SESSION_SECRET to at least 32 characters"):
        Settings(session_secret="short-secret")
