"""The auth room's pure core: OIDC tokens derived and checked without a store, and
the limiter of failed authentications.

Its modules are imported by their own names.
"""

__all__: list[str] = []
