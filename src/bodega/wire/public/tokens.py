"""Token introspection on the wire: the Machines API's ``/v1/tokens`` bodies and answers.

bodega's tokens are bearer strings, not macaroons: a verified token's ``caveats`` say
what it may touch in the macaroon vocabulary (an ``apps`` caveat naming its app with
every action, a ``machine`` caveat for a machine's own token, ``kms`` for a KMS token),
so a service reading the answer can reason about scope the way it would on Fly.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.answer import Answer

ACTIONS = {"r": 1, "w": 2, "c": 4, "d": 8, "C": 16}
ALL = 31


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AuthenticateTokenRequest(_Body):
    header: str = Field(default="", max_length=4096)


class TokenAccess(_Body):
    action: int | str | None = None  # resset.Action bits, or "rwcdC" letters
    app_name: str | None = Field(default=None, max_length=63)
    machine_id: str | None = Field(default=None, max_length=64)
    volume_id: str | None = Field(default=None, max_length=64)
    org_slug: str | None = Field(default=None, max_length=63)
    app_feature: str | None = Field(default=None, max_length=64)
    machine_feature: str | None = Field(default=None, max_length=64)
    org_feature: str | None = Field(default=None, max_length=64)
    storage_object: str | None = Field(default=None, max_length=256)
    mutation: str | None = Field(default=None, max_length=256)
    command: list[str] | None = None
    source_machine: str | None = Field(default=None, max_length=64)


class AuthorizeTokenRequest(_Body):
    header: str = Field(default="", max_length=4096)
    access: TokenAccess = Field(default_factory=TokenAccess)


class CreateOIDCTokenRequest(_Body):
    aud: str | None = Field(default=None, max_length=1024)
    aws_principal_tags: bool | None = None


class CaveatBody(Answer):
    apps: dict[str, int] | None = None  # apps: each app's resset.Action bits
    id: str | None = None  # from_machine: the machine
    app_feature: str | None = None  # kms
    not_after: int | None = None  # validity_window: seconds since the epoch


class Caveat(Answer):
    type: str
    body: CaveatBody


class CaveatSet(Answer):
    caveats: list[Caveat] = []


class VerifiedToken(Answer):
    header: str | None = None
    caveats: CaveatSet | None = None


class Access(Answer):
    action: int | None = None
    cluster: str | None = None
    machine: str | None = None
    volume: str | None = None
    app_feature: str | None = None
    machine_feature: str | None = None
    feature: str | None = None
    storage_object: str | None = None
    mutation: str | None = None
    command: list[str] | None = None
    sourceMachine: str | None = None  # the API's own spelling
    sourceApp: str | None = None


class AuthorizeResponse(Answer):
    access: Access
    verified_token: VerifiedToken


class TokenInfo(Answer):
    token_id: str
    apps: list[str] | None = None
    org_slug: str | None = None
    organization: str | None = None
    restricted_to_machine: str | None = None
    source_machine_id: str | None = None
    user: str | None = None


class CurrentTokenResponse(Answer):
    tokens: list[TokenInfo] = []
