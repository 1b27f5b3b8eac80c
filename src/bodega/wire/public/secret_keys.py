"""App secret keys on the wire: the Machines API's ``SecretKey`` requests and answers.

Bytes travel as JSON arrays of integers (0-255), as the document has them (Go's
``[]byte`` with ``format: byte`` unset). Like the other public bodies, unknown fields
are ignored; a byte out of range or a wrong type is a 400. Answers carry a key's
name, type, times and, for a signing key with one, its public key: never its
material.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.answer import Answer

Byte = Annotated[int, Field(ge=0, le=255)]
Bytes = list[Byte]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SetSecretkeyRequest(_Body):
    type: str = Field(max_length=64)
    value: Bytes | None = None  # absent for ``generate``


class EncryptSecretkeyRequest(_Body):
    plaintext: Bytes = Field(default_factory=list)
    associated_data: Bytes | None = None


class DecryptSecretkeyRequest(_Body):
    ciphertext: Bytes = Field(default_factory=list)
    associated_data: Bytes | None = None


class SignSecretkeyRequest(_Body):
    plaintext: Bytes = Field(default_factory=list)


class VerifySecretkeyRequest(_Body):
    plaintext: Bytes = Field(default_factory=list)
    signature: Bytes = Field(default_factory=list)


class SecretKey(Answer):
    name: str
    type: str
    created_at: str | None = None
    updated_at: str | None = None
    public_key: Bytes | None = None


class SecretKeys(Answer):
    secret_keys: list[SecretKey] = []


class SecretKeySet(SecretKey):
    version: int
    Version: int  # the same, as flyctl reads it


class SecretKeyDeleted(Answer):
    version: int
    Version: int


class Ciphertext(Answer):
    ciphertext: Bytes


class Plaintext(Answer):
    plaintext: Bytes


class Signature(Answer):
    signature: Bytes
