"""How a process reaches its host's registry agent: HTTP on the agent's Unix socket.

The socket lives in the agent's data dir (mode 0700): only the host's own
bodega processes (the user that runs them) can connect, so the local API needs
no token and no TLS. Six calls (``agent.py`` serves them):

- ``hand``: rows this process wrote (a sync reply served from its own store),
  answered with what the agent has now seen of this process's versions;
- ``rows_of``: every row of this process the agent holds (a process whose own
  store is new audits its past with them);
- ``sync_round``: pull from peers now;
- ``changes``: a long poll, answered when the tables the caller follows
  changed in the agent's view since its mark (how a process follows the view
  without reading it many times a second, nor at every row the agent applies);
- ``check_in``: the process is alive (the agent speaks for it in SWIM,
  ``membership/core/tenants.py``), held until the cluster's members change or about
  a second has passed, and answered with the members when they changed;
- ``leave``: the process is stopping for good.

Any failure to reach the agent is ``AgentUnavailable``: the caller keeps its rows
and hands them again once the agent answers.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bodega.registry.membership.core.messages import DecodeError
from bodega.registry.replication.core.exchange import SyncReply
from bodega.registry.replication.core.known import Known
from bodega.registry.sync.core.rowwire import decode_reply, reply_json

SOCKET_NAME = "local.sock"
HAND_PATH = "/v1/local/hand"
ROWS_OF_PATH = "/v1/local/rows-of"
SYNC_PATH = "/v1/local/sync"
CHANGES_PATH = "/v1/local/changes"
CHECK_IN_PATH = "/v1/local/check-in"
LEAVE_PATH = "/v1/local/leave"
CHANGES_TIMEOUT = 60.0  # beyond the agent's own limit on holding a call (agent.WAIT_LIMIT)
CHECK_IN_MOST_HELD = 2.0  # the longest the agent holds a check-in: well inside the 3 s
# after which it takes a silent tenant for suspect


class ChangeMark(BaseModel):
    """Where a follower is in the agent's view: the agent's life, and how many times it had
    applied rows to the tables asked about in it. An empty epoch is no mark at all."""
    model_config = ConfigDict(extra="forbid")
    epoch: str = Field(default="", max_length=64)
    generation: int = Field(default=0, ge=0)


class ChangesAsked(BaseModel):
    """A ``changes`` call: answer once any of ``tables`` (None: any table) changed since
    ``mark``."""
    model_config = ConfigDict(extra="forbid")
    mark: ChangeMark
    tables: list[str] | None = Field(default=None, max_length=64)


class CheckIn(BaseModel):
    """A process of the host says it is alive, and who it is (what the agent gossips for
    it). ``generation`` is its own count of its lives; ``mark`` is the members' version it
    holds (from the last answer); the agent holds the call until they change or ``hold``
    seconds pass."""
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    role: str = Field(min_length=1, max_length=16)
    region: str = Field(max_length=32)
    meta: dict[str, str] = Field(default_factory=dict)
    generation: int = Field(ge=1, lt=2**62)
    mark: str = Field(default="", max_length=200)
    hold: float = Field(default=0.0, ge=0.0, le=CHECK_IN_MOST_HELD)


class Presence(BaseModel):
    """The agent's answer to a check-in: the record it gossips for the process, the
    members' version, and when that version is not the asker's mark, the members
    (``record_json`` arrays): those that changed since the asker's mark if it is of the
    agent's life, else every one; and the seconds each suspect member has left to refute.
    The asker merges them over what it holds either way."""
    model_config = ConfigDict(extra="forbid")
    epoch: str = Field(max_length=64)
    mark: str = Field(max_length=200)
    you: list[object]
    members: list[list[object]] | None = None
    suspicions: dict[str, float] = Field(default_factory=dict)


class Leave(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)


class AgentUnavailable(Exception):
    """The host's registry agent did not answer (down, restarting, or refusing)."""


class AgentLink:
    def __init__(self, agent_dir: Path, timeout: float = 5.0) -> None:
        self.socket = agent_dir / SOCKET_NAME
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def hand(self, origin: str, reply: SyncReply, floor: int) -> Known:
        answer = await self._post(HAND_PATH, {"origin": origin, "floor": floor,
                                              "reply": reply_json(reply)})
        try:
            return Known.from_json(answer.get("known"))
        except (ValueError, TypeError) as exc:
            raise AgentUnavailable(f"the agent's answer is malformed: {exc}") from exc

    async def rows_of(self, origin: str) -> SyncReply:
        answer = await self._post(ROWS_OF_PATH, {"origin": origin})
        try:
            return decode_reply(answer.get("reply"))
        except DecodeError as exc:
            raise AgentUnavailable(f"the agent's answer is malformed: {exc}") from exc

    async def sync_round(self) -> int:
        answer = await self._post(SYNC_PATH, {})
        pulled = answer.get("pulled", 0)
        return pulled if isinstance(pulled, int) else 0

    async def changes(self, mark: ChangeMark, tables: list[str] | None = None) -> ChangeMark:
        """The agent's mark once any of ``tables`` (None: any table) of its view changed
        since ``mark`` (or it held the call for as long as it holds one)."""
        asked = ChangesAsked(mark=mark, tables=tables)
        answer = await self._post(CHANGES_PATH, asked.model_dump(),
                                  timeout=aiohttp.ClientTimeout(total=CHANGES_TIMEOUT))
        try:
            return ChangeMark.model_validate(answer)
        except ValidationError as exc:
            raise AgentUnavailable(f"the agent's answer is malformed: {exc}") from exc

    async def check_in(self, asked: CheckIn) -> Presence:
        answer = await self._post(CHECK_IN_PATH, asked.model_dump(), timeout=aiohttp.ClientTimeout(
            total=asked.hold + self._timeout.total if self._timeout.total else None))
        try:
            return Presence.model_validate(answer)
        except ValidationError as exc:
            raise AgentUnavailable(f"the agent's answer is malformed: {exc}") from exc

    async def leave(self, name: str) -> None:
        await self._post(LEAVE_PATH, Leave(name=name).model_dump())

    async def _post(self, path: str, body: dict[str, object],
                    timeout: aiohttp.ClientTimeout | None = None) -> dict[str, object]:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.socket)), timeout=self._timeout)
        try:
            async with self._session.post(f"http://agent{path}", json=body,
                                          timeout=timeout or self._timeout) as response:
                answer = await response.json(content_type=None)
                if response.status != 200 or not isinstance(answer, dict):
                    error = answer.get("error") if isinstance(answer, dict) else answer
                    raise AgentUnavailable(f"the agent answered {response.status}: {error}")
                return answer
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise AgentUnavailable(f"the registry agent at {self.socket} did not answer: "
                                   f"{exc or type(exc).__name__}") from exc

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
