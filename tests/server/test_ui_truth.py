"""What a person records in the web view about what holds (server/ui_truth.py), through real HTTP requests
to the web view in this process (Starlette's test client, real LanceDB): "Still true" on a current note,
a subject declared to hold one value (and withdrawn) from a chain's page or the scope's page, and the
scope's check setting; each recorded as the person, each bad input refused with the store's words and
nothing changed."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from corrigenda.store import Draft, Memory, SentenceTransformerEmbedder
from starlette.testclient import TestClient

from .test_ui import seed
from .test_ui_hands import ADA, browse, form_token, granted, words

NOW = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)  # the store's clock: six weeks after the seed's correction


@pytest.fixture
def clock() -> list[datetime]:
    """The store's time, which a test moves on: `clock[0]`."""
    return [NOW]


@pytest.fixture
def store(db: str, embedder: SentenceTransformerEmbedder, clock: list[datetime]) -> Memory:
    return Memory(db, embedder, clock=lambda: clock[0])


@pytest.fixture
def seeded(store: Memory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    ids = seed(store)
    with browse(store) as client:
        yield client, ids


def form_of(page: str, action: str) -> dict[str, str]:
    """The hidden fields of the page's first form that posts `action`."""
    form = next(f for f in page.split("<form")[1:] if f'name="action" value="{action}"' in f.split("</form>")[0])
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.split("</form>")[0]))


def test_still_true_on_a_current_note_records_the_persons_check_and_the_page_shows_it(
    store: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    page = client.get(f"/chain/{ids['new']}").text
    assert "<summary>Still true</summary>" in page and "how did you check (optional)" in page
    fields = form_of(page, "confirm")
    assert fields["note_id"] == ids["new"]
    assert "checked" not in words(page.split("<h2>Timeline</h2>")[0])  # never checked yet

    done = client.post("/act", data={**fields, "reason": "read the nginx config"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == f"/chain/{ids['new']}?done=confirm"
    check = store.history(ids["new"]).note.last_checked
    assert check is not None and (check.actor, check.reason, check.at) == ("person:Ada", "read the nginx config", NOW)
    shown = words(client.get(done.headers["location"]).text)
    assert "Confirmed: the note still holds." in shown
    assert "checked 2026-12-31 12:00:00 UTC by Ada (person): “read the nginx config”" in shown
    assert (
        "Ada (person) checked that “The payments service listens on port 9090” still holds because “read the " in shown
    )
    assert "The payments service listens on port 9090" in shown.split("NOW")[1].split("HISTORY")[0]  # still current

    again = client.post("/act", data=fields, follow_redirects=False)  # nothing said of how: it is optional
    assert again.status_code == 303
    assert store.history(ids["new"]).note.last_checked.reason is None  # type: ignore[union-attr]


def test_still_true_on_a_note_that_is_history_or_forgotten_is_refused_naming_its_state(
    store: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    page = client.get(f"/chain/{ids['new']}").text
    assert page.count("<summary>Still true</summary>") == 1  # on the current note only, not on its history
    fields = {**form_of(page, "confirm"), "reason": "looked"}
    before = [store.history(i).model_dump() for i in (ids["old"], ids["new"])]
    old = client.post("/act", data={**fields, "note_id": ids["old"]})
    assert old.status_code == 400 and "Nothing was changed." in old.text
    assert f"{ids['old']} is not current (superseded by" in old.text and f"({ids['new']}) instead" in old.text
    gone = client.post("/act", data={**fields, "note_id": ids["gone"]})
    assert gone.status_code == 400 and "was forgotten (erased for good)" in gone.text
    unknown = client.post("/act", data={**fields, "note_id": "not-a-note"})
    assert unknown.status_code == 400 and "note_id:" in unknown.text
    assert [store.history(i).model_dump() for i in (ids["old"], ids["new"])] == before


def test_a_scope_setting_marks_notes_unchecked_in_place_until_a_person_says_still_true(
    store: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, ids = seeded
    landing = client.get("/").text
    assert "Checks do not expire here" in landing and 'class="unchecked"' not in landing
    setting = form_of(landing, "check_every")
    assert setting["scope"] == "ops" and 'name="days" min="0" value="0"' in landing

    done = client.post("/act", data={**setting, "days": "30", "reason": "ports move"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/?scope=ops&done=check_every"
    landing = words(client.get(done.headers["location"]).text)
    assert "Saved: how long a check lasts" in landing and "A check lasts 30 days" in landing
    chain = client.get(f"/chain/{ids['new']}").text
    now = words(chain.split('<li class="note now">')[1].split("</li>")[0])
    assert "The payments service listens on port 9090" in now  # marked, still the current note, in its place
    assert "unchecked since 2026-11-20 14:00:00 UTC" in now

    client.post("/act", data={**form_of(chain, "confirm"), "reason": "curl :9090"})
    shown = client.get(f"/chain/{ids['new']}").text
    now = words(shown.split('<li class="note now">')[1].split("</li>")[0])
    assert "unchecked since" not in now and "checked 2026-12-31 12:00:00 UTC by Ada (person)" in now

    for days, said in (("thirty", "days: 'thirty' is not a whole number of days"), ("-1", "days: -1 is not")):
        refused = client.post("/act", data={**setting, "days": days})
        assert refused.status_code == 400 and said in html.unescape(refused.text), days
    assert "A check lasts 30 days" in words(client.get("/").text)  # the refused settings changed nothing


def test_a_subject_is_declared_to_hold_one_value_from_a_chain_page_and_withdrawn_there(
    store: Memory, clock: list[datetime]
) -> None:
    old = store.remember(Draft(text="Deploys may run 02:00-04:00 UTC", subject="deploy.window"), scope="ops").note
    with browse(store) as client:
        page = client.get(f"/chain/{old.id}").text
        said = words(page.split("<h2>Subject</h2>")[1])
        assert said.startswith("deploy.window may hold several values in scope ops")
        fields = form_of(page, "one_value")
        assert (fields["subject"], fields["scope"], fields["note_id"]) == ("deploy.window", "ops", old.id)

        done = client.post("/act", data={**fields, "reason": "one window at a time"}, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"] == f"/chain/{old.id}?done=one_value"
        page = client.get(done.headers["location"]).text
        said = words(page.split("<h2>Subject</h2>")[1])
        assert "Declared: the subject holds one value in this scope." in words(page)
        assert said.startswith("deploy.window holds one value in scope ops, declared by Ada (person) at 2026-12-31 ")
        assert "because “one window at a time”" in said
        [declaration] = store.one_value_subjects("ops")
        assert (declaration.actor, declaration.reason) == ("person:Ada", "one window at a time")

        # the store's, not the page's: a note of that subject, however spelled, now replaces the old one
        new = store.remember(Draft(text="Deploys may run 03:00-05:00 UTC", subject="Deploy window"), scope="ops")
        assert new.replaced is not None and [n.id for n in new.replaced.notes] == [old.id]

        clock[0] = NOW + timedelta(hours=1)
        page = client.get(f"/chain/{new.note.id}").text
        withdrawn = client.post("/act", data=form_of(page, "many_values"), follow_redirects=False)
        assert withdrawn.headers["location"] == f"/chain/{new.note.id}?done=many_values"
        said = words(client.get(withdrawn.headers["location"]).text)
        assert "Withdrawn: the subject may hold several values" in said
        assert "Deploy window may hold several values in scope ops" in said
        assert store.one_value_subjects("ops") == []
        assert store.history(old.id).note.state.value == "superseded"  # withdrawing replaced nothing back

        then = client.get(f"/chain/{new.note.id}?as_of=2026-12-31T12:00:00").text  # as the page was then: no form
        assert "holds one value in scope ops, declared by Ada" in words(then) and 'value="one_value"' not in then


def test_the_scope_page_lists_subjects_that_hold_one_value_and_declares_one_by_name(
    store: Memory, seeded: tuple[TestClient, dict[str, str]]
) -> None:
    client, _ = seeded
    landing = client.get("/").text
    assert "<h2>Subjects that hold one value</h2><p>None:" in landing
    fields = form_of(landing, "one_value")
    assert fields["scope"] == "ops" and "subject" not in fields  # typed in

    for subject, said in (("  ", "subject: must not be empty"), ("...", "has no letter or digit"),
                          ("x" * 300, "subject:")):  # fmt: skip
        refused = client.post("/act", data={**fields, "subject": subject})
        assert refused.status_code == 400 and said in html.unescape(refused.text), subject
        assert "Nothing was changed." in refused.text
    assert store.one_value_subjects("ops") == []

    done = client.post("/act", data={**fields, "subject": "billing.owner"}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/?scope=ops&done=one_value"
    landing = client.get(done.headers["location"]).text
    listed = words(landing.split("<h2>Subjects that hold one value</h2>")[1].split("<h2>")[0])
    assert listed.startswith("A note added with one of these subjects replaces its current note")
    assert "billing.owner, declared by Ada (person) at 2026-12-31 12:00:00 UTC" in listed
    assert form_of(landing, "many_values")["subject"] == "billing.owner"  # withdrawn from here too
    same = client.post("/act", data={**fields, "subject": "Billing Owner"}, follow_redirects=False)
    assert same.headers["location"] == "/?scope=ops&done=one_value-same" and len(store.one_value_subjects("ops")) == 1


def test_declaring_a_subject_with_several_current_notes_says_so_and_leaves_them(store: Memory) -> None:
    first = store.remember(Draft(text="The on-call lead is Ana", subject="oncall.lead"), scope="ops").note
    second = store.remember(Draft(text="The on-call lead is Bo", subject="oncall.lead"), scope="ops").note
    with browse(store) as client:
        fields = form_of(client.get(f"/chain/{second.id}").text, "one_value")
        done = client.post("/act", data=fields, follow_redirects=False)
        assert done.headers["location"] == f"/chain/{second.id}?done=one_value-several"
        assert "It has several current notes now: they stay as they are" in client.get(done.headers["location"]).text
    assert [store.history(n.id).note.state.value for n in (first, second)] == ["active", "active"]


def test_a_credential_that_may_only_read_a_scope_gets_no_form_and_its_posts_change_nothing(
    store: Memory, tmp_path: Path
) -> None:
    team = store.remember(Draft(text="The team deploys on Tuesdays", subject="deploy.day"), scope="team-ops").note
    store.remember(Draft(text="Ada build runs on the blue runner"), scope="ada")
    with granted(store, tmp_path) as client:
        client.get(f"/?token={ADA}")
        page = client.get(f"/chain/{team.id}").text
        assert "Still true" not in page and 'value="one_value"' not in page
        assert "deploy.day may hold several values in scope team-ops" in words(page)  # said, with no form
        scope_page = client.get("/?scope=team-ops").text
        assert "Checks do not expire here" in scope_page and 'value="check_every"' not in scope_page
        token = form_token(client.get("/").text)
        for fields in (
            {"action": "confirm", "note_id": team.id},
            {"action": "one_value", "scope": "team-ops", "subject": "deploy.day"},
            {"action": "check_every", "scope": "team-ops", "days": "7"},
        ):
            refused = client.post("/act", data={**fields, "csrf": token})
            assert refused.status_code == 403 and "may not write it" in refused.text, fields
            assert client.post("/act", data=fields).status_code == 403  # nor without the form token
    assert store.history(team.id).events == [] and store.one_value_subjects("team-ops") == []
    assert "Checks do not expire here" in scope_page
