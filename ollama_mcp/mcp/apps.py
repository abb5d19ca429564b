"""The apps behind the MCP edge: one per principal, opened in the background on first use
(``AppHolder``, so that ``initialize`` is answered at once), who a request comes from
(``caller_of``), which app serves a call (``serving``), and the running apps for the other doors
of the same process (``RunningApps``: the token check, the static resource, the browser view).

The deferred imports in ``AppHolder`` (the app, and before it ``head_start`` with our Ollama
client) are the lazy imports on the serve path, on purpose: this module imports only the SDK and
light modules of ours.
"""

from __future__ import annotations

import gc
import importlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context

from ollama_mcp import caller
from ollama_mcp.config import LOCAL_PRINCIPAL, Settings
from ollama_mcp.errors import ConfigError, OllamaMcpError
from ollama_mcp.inputs.search import LIST_EVERYTHING
from ollama_mcp.mcp.sharing import Need, Sharing, Solo

if TYPE_CHECKING:
    from ollama_mcp.app import App
    from ollama_mcp.domain import AccessToken as Token
    from ollama_mcp.head_start import HeadStart

log = logging.getLogger(__name__)


def imports_done() -> None:
    """The process's imports are over (the app's is the last): what they made (~100k objects: the
    SDK, pydantic, numpy) lives as long as the process, so it is frozen, left out of the
    collector's full passes, each of which would otherwise walk it all (~15 ms; loading 10k vectors
    set off enough to cost the first search 45 ms, and any later one could land inside a search).
    Then collection resumes if ``cli`` paused it for the imports (the little garbage they left,
    ~800 objects, is frozen with them). Once: later principals' apps are not garbage-free."""
    if not gc.get_freeze_count():
        gc.freeze()
    gc.enable()


class AppHolder:
    """Opens the app in the background and hands it to tool calls once it is ready.

    If opening fails (a folder that is not writable, a database from a newer version), each
    tool call reports why and the next one tries again, so fixing the cause needs no restart.
    Settings that cannot be used (a ``ConfigError`` instead of ``Settings``) are reported the
    same way; they are read once per process, so only a restart with new ones helps.
    """

    def __init__(self, settings: Settings | ConfigError) -> None:
        self._settings = settings
        self._attempt_done = anyio.Event()
        self._retry = anyio.Event()
        self._app: App | None = None
        self._head_start: HeadStart | None = None  # while the app is being opened
        self._failure: OllamaMcpError | None = None
        self._failure_reported = False

    async def run(self) -> None:
        while True:
            try:
                if isinstance(self._settings, ConfigError):
                    raise self._settings
                # Both imported in a worker thread so the event loop keeps answering the handshake
                # (the head start's, with our Ollama client, ~5 ms; the app's, ~110 ms).
                head_start_module = await anyio.to_thread.run_sync(importlib.import_module, "ollama_mcp.head_start")
                async with head_start_module.HeadStart.running(self._settings) as head_start:
                    self._head_start = head_start
                    # (``ollama`` is not imported: embeddings go through our own client, and the
                    # ollama client, for chats, is imported on first use in a thread of its own.)
                    app_module = await anyio.to_thread.run_sync(importlib.import_module, "ollama_mcp.app")
                    imports_done()
                    async with app_module.open_app(self._settings, head_start=head_start) as app:
                        self._app, self._failure, self._head_start = app, None, None
                        self._attempt_done.set()
                        await anyio.sleep_forever()
            except OllamaMcpError as exc:
                log.error("could not open the memory store: %s", exc)
                self._app, self._failure = None, exc
            except Exception:
                log.exception("could not open the memory store")
                self._app = None
                self._failure = OllamaMcpError(
                    "The memory store could not be opened because of an internal error; details are in the server log."
                )
            finally:
                self._head_start = None  # (its requests ended with its block)
                imports_done()  # (also when the app could not be imported or opened)
            self._attempt_done.set()
            await self._retry.wait()
            self._retry = anyio.Event()

    def begin_search(self, query: object) -> None:
        """A search arrived while the app is being opened: its query goes to Ollama now
        (``head_start``), so that its embedding is computed while the app opens."""
        if self._head_start is not None and isinstance(query, str) and query.strip() not in LIST_EVERYTHING:
            self._head_start.search(query)

    async def app(self) -> App:
        await self._attempt_done.wait()
        if self._app is None and self._failure_reported:
            # A failure was reported by an earlier call: the user may have fixed it since.
            self._attempt_done, self._failure_reported = anyio.Event(), False
            self._retry.set()
            await self._attempt_done.wait()
        if self._app is None:
            self._failure_reported = True
            raise self._failure or OllamaMcpError("The memory store is not open; details are in the server log.")
        return self._app


class Principals:
    """One app per principal that has made a request, each opened (by its ``AppHolder``) on first
    use and run in the lifespan's task group. A stdio server has one: the settings' principal.
    ``sharing`` (a server with tokens only) routes a call on a shared conversation to its owner's."""

    def __init__(self, settings: Settings | ConfigError, tasks: TaskGroup, *, sharing: bool) -> None:
        self._settings = settings
        self._tasks = tasks
        self._holders: dict[str, AppHolder] = {}
        self.sharing: Sharing | Solo = Sharing(lambda principal: self.holder(principal).app()) if sharing else Solo()

    def holder(self, principal: str) -> AppHolder:
        found = self._holders.get(principal)
        if found is None:
            settings = (
                self._settings if isinstance(self._settings, ConfigError) else self._settings.for_principal(principal)
            )
            found = self._holders[principal] = AppHolder(settings)
            self._tasks.start_soon(found.run)
        return found

    def begin_search(self, principal: str, query: object) -> None:
        """A search's query for ``principal``'s app if it is being opened (``AppHolder.begin_search``)."""
        holder = self._holders.get(principal)
        if holder is not None:
            holder.begin_search(query)

    def own(self) -> AppHolder:
        """The app of the principal the settings name (stdio's, the CLI's, a tokenless HTTP server's)."""
        return self.holder(self.default_principal)

    @property
    def default_principal(self) -> str:
        return LOCAL_PRINCIPAL if isinstance(self._settings, ConfigError) else self._settings.principal


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: whose memory (principal), which client's current conversation
    (the MCP session over HTTP, else the token, else the process), and its name in the audit."""

    principal: str
    client: str
    actor: str | None


def caller_of(ctx: Context | None, default_principal: str) -> Caller:
    # The SDK's auth context holds the request's token; a session keeps the token it began with
    # (the SDK refuses a session's requests from any other principal).
    token = get_access_token()
    headers = None if ctx is None else ctx.headers
    session = None if headers is None else headers.get("mcp-session-id")
    if token is None:
        return Caller(default_principal, f"session:{session}" if session else caller.PROCESS, None)
    principal = token.subject or default_principal
    return Caller(principal, f"session:{session}" if session else f"{caller.TOKEN}{token.client_id}", token.client_id)


async def serving(
    principals: Principals, principal: str, conversation_id: object, need: Need, doing: str = "do that"
) -> App:
    """The app that serves ``principal``'s call on ``conversation_id``: its own, or the owner's
    of a conversation shared with it (``sharing``), once it is open (else why it is not)."""
    if conversation_id is not None:
        principal = await principals.sharing.serving(principal, conversation_id, need, doing)
    return await principals.holder(principal).app()


class RunningApps:
    """The apps the running lifespan has opened, one per principal, for the other doors of the
    same process: the token check, the static resource, the browser view under ``/ui``."""

    def __init__(self) -> None:
        self._running: list[Principals] = []

    def started(self, principals: Principals) -> None:
        self._running.append(principals)

    def stopped(self, principals: Principals) -> None:
        self._running.remove(principals)

    def _principals(self) -> Principals:
        if not self._running:
            raise OllamaMcpError("The server is not running.")
        return self._running[-1]

    async def of(self, principal: str) -> App:
        """The app of ``principal``, opened on first use."""
        return await self._principals().holder(principal).app()

    async def own(self) -> App:
        """The app of the settings' principal (a tokenless server acts for it)."""
        return await self._principals().own().app()

    async def of_request(self) -> App:
        """The app of the principal whose token the current request carries (else the own one)."""
        principals = self._principals()
        return await principals.holder(caller_of(None, principals.default_principal).principal).app()

    async def token(self, secret: str) -> Token | None:
        """The active token ``secret`` is, checked in the local principal's store; None if not one."""
        return await (await self.of(LOCAL_PRINCIPAL)).shares.token(secret)


class TokenVerifier:
    """The SDK's token-verifier hook: a bearer token is one of ours when the local principal's
    store holds its hash, not revoked; it then acts for its principal, named by the token."""

    def __init__(self, running: RunningApps) -> None:
        self._running = running

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            found = await self._running.token(token)
        except OllamaMcpError as exc:  # the request is refused (401); the reason is for the log
            log.error("could not check a bearer token: %s", exc)
            return None
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.name, scopes=[], subject=found.principal)
