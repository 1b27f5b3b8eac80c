"""``JsonObject``: a JSON object at an edge, parsed just now or about to be written.

The one name for a dict of str to Any in bodega. It is used only where a value is read from
or written as JSON (or TOML) right there: a wire encoder's output, a document a peer
sent before a model reads it, the OpenAPI document, the OCI runtime spec, a row's
document as the registry stores and gossips it. It means nothing in the code beyond
that: a value that flows on from the edge gets a model (pydantic, a dataclass or a
TypedDict), not this.
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]
