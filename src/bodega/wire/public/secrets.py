"""App secrets on the wire: names, digests and times, never values.

The Machines API's ``AppSecret``, ``AppSecrets``, ``AppSecretsUpdateResp``,
``SetAppSecretResponse`` and ``DeleteAppSecretResponse``; the update answers
carry the app's secrets version twice, as ``version`` and as flyctl's ``Version``.
"""

from __future__ import annotations

from bodega.model.answer import Answer


class AppSecret(Answer):
    name: str
    digest: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    value: str | None = None  # never sent by bodega


class SecretList(Answer):
    """The API's ``AppSecrets``: an app's secrets, names and digests only."""

    secrets: list[AppSecret] = []


class SecretsUpdated(SecretList):
    version: int
    Version: int  # the same, as flyctl reads it


class SecretSet(AppSecret):
    version: int
    Version: int  # the same, as flyctl reads it


class SecretDeleted(Answer):
    version: int
    Version: int  # the same, as flyctl reads it
