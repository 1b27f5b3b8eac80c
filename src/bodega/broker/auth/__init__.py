"""Who may call: tokens and principals, the failed-authentication limiter, token routes
and scopes, machines' OIDC tokens. Imports the view.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
