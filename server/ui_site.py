"""What every route of the web view stands on. The one `Site` a web view serves (its store, the project's
scope, the settings, its sessions and grants) is fixed when ui.build_ui builds it and kept on the Starlette
app's state (`site_of`); the routes (ui_read.py, ui_hands.py) are module-level functions of the request
that reach it through the helpers here: who the caller is and what its grant lets it read and change,
where the request is (`here`, `plain`), the store's work run off the event loop with its refusals turned
into `Refused`, a page rendered with the header and way out every page has, and `guarded`, which answers
a refusal with a page saying that nothing was changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from corrigenda.store import CorrigendaError, Memory, NotFound
from corrigenda.store.views import ScopeList
from pydantic_core import PydanticCustomError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from . import ui_html as h
from . import ui_pages as pages
from . import ui_truth as truth
from .arguments import iso_8601
from .config import Settings
from .errors import readable_scopes_only
from .grants import Grants, NotGranted, admit
from .ui_gate import Sessions, grant_of, session_of

LANDING_SCOPES = 10
DONE = {  # what a page says after a person's write (`?done=`): fixed words, never text from the address
    "correct": "Corrected: the new note is current and the old one is history.",
    "revoke": "Revoked: the note is history.",
    "reinstate": "Reinstated.",
    "link-depends_on": "Linked: the note now needs the other one, and recall brings that one with it.",
    "link-refines": "Linked: the note now refines the other one; both stay current.",
    "link-supersedes": "Linked: the note now replaces the other one, which is history.",
    "link-distinct": "Linked: the two notes state different facts; both stay current.",
    "settled-supersedes": "Recorded: the newer note replaces the older one, which is now history.",
    "settled-distinct": "Recorded: they are different facts. Both stay current, and recall no longer marks the "
    "older one as possibly outdated.",
    "remember": "Added: the note is current. Revoke it to take it back.",
    "remember-same": "Already there: a current note of this scope says exactly that; nothing was added.",
    "forget": "Forgotten: the note is erased.",
    **truth.DONE,
}
T = TypeVar("T")


class Refused(Exception):
    """A request the page answers with a message: what was wrong, and nothing was changed."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NothingToShow(Exception):
    """No scope is named, and the caller may read none that holds anything: every page says so."""


@dataclass(frozen=True)
class Site:
    """What the routes of one web view share, fixed when it is built: the store, the project's scope
    (`default_scope`, where it opens when that holds notes and the caller may read it), the settings, the
    sessions its form tokens go by, and the grants (None: every caller is the local user, who may do
    anything)."""

    memory: Memory
    default_scope: str
    settings: Settings
    sessions: Sessions
    grants: Grants | None


def site_of(request: Request) -> Site:
    """The Site of the web view answering `request` (ui.build_ui keeps it on the app's state)."""
    site = request.app.state.site
    assert isinstance(site, Site)
    return site


def person(request: Request) -> str:
    return pages.person_of(site_of(request).settings, grant_of(request))


def permit(request: Request, scope: str, write: bool, what: str) -> str:
    """The scope as the store names it, once the caller's grant allows it (grants.admit); else Refused
    (403, naming the scope). Audited either way."""
    try:
        return admit(grant_of(request), scope, write, f"web view {what}")
    except NotGranted as exc:
        raise Refused(str(exc), 403) from None
    except CorrigendaError as exc:
        raise Refused(str(exc)) from None


def visible(request: Request) -> Callable[[str], bool] | None:
    grant = grant_of(request)
    return None if grant is None else grant.may_read


def writable(request: Request) -> Callable[[str], bool] | None:
    grant = grant_of(request)
    return None if grant is None else grant.may_write


async def store(work: Callable[[], T]) -> T:
    try:
        return await run_in_threadpool(work)
    except NotFound as exc:
        raise Refused(str(exc), 404) from exc
    except CorrigendaError as exc:
        raise Refused(str(exc)) from exc


async def read(request: Request, work: Callable[[], T]) -> T:
    """`store` for work that reads a scope: refused as holding nothing, it names only scopes the caller
    may read (errors.readable_scopes_only)."""
    shown = visible(request)

    def confined() -> T:
        with readable_scopes_only(shown):
            return work()

    return await store(confined)


async def here(request: Request) -> h.Here:
    """Where the request is: its scope (else the landing scope), `as_of`, the query, the prefix, and
    the most recently changed scopes."""
    site = site_of(request)
    try:
        as_of = iso_8601(request.query_params.get("as_of") or None)
    except PydanticCustomError as exc:
        raise Refused(f"as_of: {exc}") from exc
    named = request.query_params.get("scope") or None
    if named is not None:
        named = permit(request, named, False, "page")
    shown = visible(request)
    project = site.default_scope if shown is None or shown(site.default_scope) else None
    listed = await store(lambda: site.memory.scope_page(0, LANDING_SCOPES, None, named or project, shown))
    if named is None and shown is not None and not listed.scopes:
        raise NothingToShow
    chosen = named or landing(listed, project)
    if chosen != (named or project):  # it opens on the most recently changed scope: its counts
        listed = listed.model_copy(update={"default_counts": listed.scopes[0]})
    return h.Here(
        base=request.scope.get("root_path", "").rstrip("/"), scope=chosen, as_of=as_of,
        q=request.query_params.get("q", "").strip(), csrf=site.sessions.form_token(session_of(request)), notice=DONE.get(request.query_params.get("done", "")),
        scopes=listed, writable=writable(request), person=pages.recorded_as(site.settings, grant_of(request)),
        instead_of=project if chosen != (named or project) else None,
    )  # fmt: skip


def landing(listed: ScopeList, project: str | None) -> str:
    """The project's scope if it holds anything (and may be read), else the most recently changed one,
    else the project's; `here` asks only when there is one of those."""
    if project is not None and (listed.default_counts is not None or not listed.scopes):
        return project
    return listed.scopes[0].scope


def plain(request: Request) -> h.Here:
    """Where a page that reads nothing stands: the scope asked for, else the project's if the caller
    may read it, else none."""
    site = site_of(request)
    shown = visible(request)
    project = site.default_scope if shown is None or shown(site.default_scope) else ""
    return h.Here(
        base=request.scope.get("root_path", "").rstrip("/"), scope=request.query_params.get("scope") or project,
        as_of=None, q="", csrf=site.sessions.form_token(session_of(request)), person=pages.recorded_as(site.settings, grant_of(request)),
    )  # fmt: skip


def page(request: Request, where: h.Here, title: str, body: str, status: int = 200) -> HTMLResponse:
    site = site_of(request)
    if site.grants is not None:  # a caller with a credential: the way to end its session
        body += (
            f'<form class="logout" method="post" action="{where.url("/logout")}">'
            f'<input type="hidden" name="csrf" value="{h.e(where.csrf)}"><button>Log out</button></form>'
        )
    return HTMLResponse(h.document(where, title, body, site.memory.uri), status_code=status)


def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def respond(request: Request) -> Response:
        try:
            return await handler(request)  # type: ignore[no-any-return]
        except Refused as exc:
            body = f'<p class="error">{h.e(exc)}</p><p>Nothing was changed.</p>'
            return page(request, plain(request), "Cannot do that", body, exc.status)
        except NothingToShow:
            body = (
                "<p>The scopes your credential may read hold no notes yet. Agents add to them with the "
                "<code>remember</code> tool; what they store shows here.</p>"
            )
            return page(request, plain(request), "No notes yet", body)

    return respond


async def no_such_page(request: Request, exc: Exception) -> Response:
    """A mistyped or outdated address: a page with the way back, not a bare "Not Found" (a missing
    file under /static, which no person opens, stays a bare 404)."""
    if request.scope.get("root_path", "").endswith("/static"):
        return PlainTextResponse("Not Found", 404)
    where = plain(request)
    body = (
        f'<p class="error">There is no page at <code>{h.e(request.url.path)}</code>.</p>'
        f'<p>Search above, or start from <a href="{where.url("/")}">the first page</a> or '
        f'<a href="{where.url("/scopes")}">all scopes</a>.</p>'
    )
    return page(request, where, "No such page", body, 404)
