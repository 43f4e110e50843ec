"""All configuration in one place: command-line flags, each mirrored by a CORRIGENDA_* variable."""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from corrigenda.store.errors import InvalidArgument
from corrigenda.store.model import MAX_ACTOR, PERSON
from corrigenda.store.storage.location import Location
from corrigenda.store.where import SCOPE_MAX, SCOPE_PATTERN, check_scope
from platformdirs import user_data_dir
from pydantic import AfterValidator, Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:
    from corrigenda.store import Memory


def package_version() -> str:
    """The installed corrigenda's version ("0" when run from a tree that was never installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("corrigenda")
    except PackageNotFoundError:
        return "0"


def default_db() -> str:
    """The per-user data directory of this platform: $XDG_DATA_HOME/corrigenda, else
    ~/.local/share/corrigenda on Linux; ~/Library/Application Support/corrigenda on macOS;
    %LOCALAPPDATA%\\corrigenda on Windows."""
    return user_data_dir("corrigenda", appauthor=False)


def login_name() -> str:
    """The name of whoever runs this process, as the system knows it ("someone" when it does not)."""
    import getpass

    try:
        return getpass.getuser() or "someone"
    except (OSError, KeyError):  # no login name and no LOGNAME/USER variable (a bare container)
        return "someone"


def scope_name(value: str | None) -> str | None:
    """A scope argument or setting, refused in the store's words rather than as a regular expression."""
    if value is None:
        return None
    try:
        return check_scope(value)
    except InvalidArgument as exc:
        raise PydanticCustomError("scope", str(exc).removeprefix(f"{exc.field}: ")) from None


# The pattern stays in the JSON Schema for clients; the validator gives the message.
ScopeName = Annotated[
    str | None, AfterValidator(scope_name), Field(json_schema_extra={"pattern": SCOPE_PATTERN, "maxLength": SCOPE_MAX})
]


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 with or without brackets) is this machine's loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


MIN_TOKEN_LENGTH = 16  # a guessable token on a reachable port is no lock at all
# The key of every web-view session: 32 characters of `secrets.token_urlsafe` carry 192 bits, beyond guessing.
MIN_SESSION_SECRET_LENGTH = 32

# NoDecode: a list variable holds comma-separated values, not the JSON pydantic-settings expects.
CommaSeparated = Annotated[list[str] | None, NoDecode]


class Settings(BaseSettings):
    # env_ignore_empty: a client config that leaves a setting blank (an MCPB bundle's optional
    # field, an unset ${...} variable) means "not set", not an empty value.
    model_config = SettingsConfigDict(env_prefix="CORRIGENDA_", extra="ignore", env_ignore_empty=True)

    db: str = Field(default_factory=default_db, description="Store directory, or s3://, gs:// or az://bucket/path.")
    # From the environment only, like the token: the pairs can hold a secret key.
    storage_options: Annotated[dict[str, str] | None, NoDecode] = Field(
        None,
        description="Object-store options for a bucket --db, as comma-separated key=value pairs "
        "(e.g. aws_endpoint=http://127.0.0.1:9000,allow_http=true); the cloud's own variables work too.",
    )
    single_writer: bool = Field(
        False,
        description="Only one process writes this store: on a bucket whose object store does not honour "
        "conditional writes, start with a warning instead of refusing (a second writer would lose commits).",
    )
    model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers model name or path.")
    scope: ScopeName = Field(
        None,
        description='Scope used when a tool call names none, by name; unset, it is the project\'s (README, "Scopes").',
    )
    project: str | None = Field(
        None,
        description="Project folder whose scope a call that names none uses (its work tree's top, named "
        "'folder#hash'); unset: the client's workspace root, else the working directory's work tree, else 'default'.",
    )
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)
    ui_port: int = Field(
        8766, ge=1, le=65535, description="Port of the web view (`corrigenda ui`, and `serve --ui` on stdio)."
    )
    ui: bool = Field(
        False,
        description="`serve` also serves the web view from its own process and memory: under /ui on "
        "the HTTP port, or on ui_port beside a stdio server.",
    )
    # From the environment only, never a flag: a flag's value shows in `ps` to every local user.
    token: SecretStr | None = Field(
        None, description="Bearer token every HTTP request must carry; required off loopback."
    )
    # From the environment only, like the token.
    session_secret: SecretStr | None = Field(
        None,
        description="Key of the web view's session cookies and of the state a 2026-07-28 client carries between "
        "the rounds of a question (CORRIGENDA_ASK_ON_UPDATE), the same on every server of a fleet behind one "
        "load balancer, so that what one server opened is good on all and across restarts; unset, each "
        "process draws its own at start and what it opened ends with it (ui_gate.py, http.request_state).",
    )
    grants: str | None = Field(
        None,
        description="Grants file (TOML): each HTTP credential's name, the SHA-256 of its token, and the scopes "
        'it may read and write (docs/reference.md, "Grants").',
    )
    oauth_issuer: str | None = Field(
        None,
        description="OAuth 2.1: the authorization server (its issuer URL) whose JWT access tokens HTTP accepts, "
        "each the credential of the grants file its subject, group or scope names; with CORRIGENDA_RESOURCE "
        'and CORRIGENDA_GRANTS (docs/reference.md, "OAuth").',
    )
    resource: str | None = Field(
        None,
        description="OAuth 2.1: this server's resource URL as clients reach it (behind a load balancer, the "
        "public https://…/mcp): the audience its access tokens must name, published in its RFC 9728 metadata.",
    )
    oauth_jwks: str | None = Field(
        None, description="OAuth 2.1: the issuer's keys (JWKS) URL; unset, the jwks_uri of the issuer's metadata."
    )
    allowed_hosts: CommaSeparated = Field(
        None, description="Host header values HTTP requests may carry (host:port, host:* for any port)."
    )
    allowed_origins: CommaSeparated = Field(
        None, description="Origin header values HTTP requests may carry (scheme://host:port, or :* for any port)."
    )
    min_similarity: float = Field(0.25, ge=-1.0, le=1.0, description="Cosine floor for a dense entry point.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
    person: str = Field(
        default_factory=login_name,
        min_length=1,
        max_length=MAX_ACTOR - len(PERSON),
        description="Your name, recorded as the actor of what you change by hand (the web view, the CLI), "
        "marked as a person: 'person:NAME'. Default: your login name.",
    )

    ask_on_update: bool = Field(
        False,
        description="When `remember` finds that a new note likely replaces an active one, ask the person "
        "(through the client, if it can ask) whether it replaces it, refines it, or both stay; the answer "
        "is recorded as an edge by 'person:NAME'. Off: the proposals are returned, nothing asked.",
    )

    # Whether `db` came from CORRIGENDA_DB, read with the settings (db_origin): the shared engine builds a
    # client's settings with that client's variables in place, and reads the settings after (engine.py).
    _db_from_variable: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any) -> None:
        self._db_from_variable = os.environ.get(DB_VARIABLE) == self.db

    @property
    def person_actor(self) -> str:
        """The actor of a person's own writes: their name, marked as a person's (never an agent's)."""
        return PERSON + self.person

    @field_validator("db")
    @classmethod
    def _some_place(cls, db: str) -> str:
        # An empty CORRIGENDA_DB is unset (env_ignore_empty): an MCPB bundle's blank field means the default.
        if not db.strip():
            raise PydanticCustomError(
                "db_empty",
                "--db (or CORRIGENDA_DB) is empty: give a store directory or s3://, gs:// or az:// bucket path, "
                "or leave it out for the per-user data directory, {default}",
                {"default": default_db()},
            )
        return db

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise PydanticCustomError(
                "token_too_short",
                "set CORRIGENDA_TOKEN to at least {length} characters, e.g. the output of "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`",
                {"length": MIN_TOKEN_LENGTH},
            )
        return token

    @field_validator("session_secret")
    @classmethod
    def _secret_long_enough(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value()) < MIN_SESSION_SECRET_LENGTH:
            raise PydanticCustomError(
                "session_secret_too_short",
                "set CORRIGENDA_SESSION_SECRET to at least {length} characters, e.g. the output of "
                "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`, the same on every server",
                {"length": MIN_SESSION_SECRET_LENGTH},
            )
        return secret

    @field_validator("oauth_issuer", "resource", "oauth_jwks")
    @classmethod
    def _oauth_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment or parts.query:
            raise PydanticCustomError("url", "'{url}' is not an http(s) URL without query or fragment", {"url": url})
        if parts.scheme == "http" and not is_loopback(parts.hostname):
            raise PydanticCustomError(
                "https", "'{url}' must be https: OAuth 2.1 allows http on loopback alone", {"url": url}
            )
        return url

    @model_validator(mode="after")
    def _oauth_complete(self) -> Settings:
        given = [
            name
            for name, on in (("CORRIGENDA_OAUTH_ISSUER", self.oauth_issuer), ("CORRIGENDA_RESOURCE", self.resource))
            if on
        ]
        if len(given) == 1 or (self.oauth_jwks and not given):
            raise PydanticCustomError(
                "oauth",
                "OAuth needs both CORRIGENDA_OAUTH_ISSUER (who issues the tokens) and CORRIGENDA_RESOURCE (this "
                "server's URL, the tokens' audience); only {given} is set",
                {"given": given[0] if given else "CORRIGENDA_OAUTH_JWKS"},
            )
        if given and self.grants is None:
            raise PydanticCustomError(
                "oauth",
                "OAuth needs CORRIGENDA_GRANTS: the grants file names the credential each token is "
                "(oauth_subject, oauth_group or oauth_scope) and what it may read and write",
            )
        return self

    @field_validator("storage_options", mode="before")
    @classmethod
    def _key_value_pairs(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pairs = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, equals, setting = item.partition("=")
            if not equals or not key.strip():
                raise PydanticCustomError(
                    "key_value", "'{item}' is not key=value (e.g. aws_region=us-east-1)", {"item": item.split("=")[0]}
                )
            pairs[key.strip().lower()] = setting.strip()
        return pairs or None

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()] or None
        return value


DB_FLAG, DB_VARIABLE, DB_DEFAULT = "--db", "CORRIGENDA_DB", "the default"


def db_origin(settings: Settings) -> str:
    """Where the store's path came from: DB_VARIABLE, DB_DEFAULT, else DB_FLAG (a flag wins over the
    variable, which wins over the default)."""
    if settings._db_from_variable:
        return DB_VARIABLE
    return DB_DEFAULT if settings.db == default_db() else DB_FLAG


def missing_store(settings: Settings) -> str | None:
    """None if the store's directory is there (or the store is a bucket, which says what is wrong
    itself); else the sentence that says there is none, where, and whence that path. A read never makes
    a store: a mistyped path would otherwise answer as an empty memory."""
    directory = Location.of(settings.db).directory
    if directory is None or os.path.isdir(directory):
        return None
    origin = db_origin(settings)
    whence = "the default: the per-user data directory" if origin == DB_DEFAULT else f"from {origin}"
    return f"there is no store at {os.path.abspath(settings.db)} ({whence})"


def build_memory(settings: Settings) -> Memory:
    """The store and model the settings name: what a server serves and what a CLI command reads or writes.
    Here rather than in app.py, which imports the MCP SDK (0.6 s) that a CLI command does not need."""
    from corrigenda.store import Memory, RetrievalSettings, SentenceTransformerEmbedder

    return Memory(
        settings.db,
        SentenceTransformerEmbedder(settings.model),
        settings=RetrievalSettings(min_similarity=settings.min_similarity),
        storage_options=settings.storage_options,
    )
