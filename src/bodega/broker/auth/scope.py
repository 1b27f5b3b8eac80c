"""What a token may do, said as the Machines API's token answers say it.

``caveats`` describes a principal in the macaroon vocabulary the API's answers use;
``denial`` decides an ``authorize`` request: None when the token may take the action
on the resource, else why not. The facts it needs from the view (the app a machine or
volume belongs to, an app's org) are looked up by the caller and passed in.
"""

from __future__ import annotations

from bodega.broker.auth.tokens import Principal
from bodega.model.errors import BadRequest
from bodega.wire.public.tokens import ACTIONS, ALL, Caveat, CaveatBody, TokenAccess


def caveats(who: Principal) -> list[Caveat]:
    if who.admin or who.app is None:
        return []  # no caveat: everything
    found = [Caveat(type="apps", body=CaveatBody(apps={who.app: ALL}))]
    if who.machine:
        found.append(Caveat(type="from_machine", body=CaveatBody(id=who.machine)))
    if who.kms:
        found.append(Caveat(type="kms", body=CaveatBody(app_feature="secretkeys")))
    if who.expires_at:
        found.append(Caveat(type="validity_window",
                            body=CaveatBody(not_after=int(who.expires_at))))
    return found


def action_bits(action: int | str | None) -> int:
    """``resset.Action``'s bits from either spelling; 400 for anything else."""
    if action is None or action == "":
        return 1  # read
    if isinstance(action, int):
        if not 0 <= action <= ALL:
            raise BadRequest(f"invalid_argument: access.action {action} is not 0-{ALL}")
        return action
    bits = 0
    for letter in action:
        if letter not in ACTIONS:
            raise BadRequest(f"invalid_argument: access.action {action[:16]!r}: letters of "
                             "r, w, c, d, C")
        bits |= ACTIONS[letter]
    return bits


def denial(who: Principal, access: TokenAccess, *, machine_app: str | None,
           volume_app: str | None, app_org: str | None) -> str | None:
    """Why ``who`` may not take ``access``; None if it may. ``machine_app``/``volume_app`` are
    the apps the named machine and volume belong to (None: no such thing), ``app_org`` the
    org of the app the access is about (None: no such app). A token for one app hears the
    same reason for another app's things as for things that do not exist."""
    asked: list[tuple[str, str | None, str | None]] = [
        (f"app {access.app_name}", access.app_name, access.app_name if app_org else None),
        (f"machine {access.machine_id}", access.machine_id, machine_app),
        (f"volume {access.volume_id}", access.volume_id, volume_app)]
    named = [(label, owner) for label, given, owner in asked if given]
    if not who.admin:
        if access.org_feature or access.storage_object or access.mutation:
            return "org features, storage and mutations need an admin token"
        if not named:
            return "only an admin token acts on a whole org" if access.org_slug else \
                "the access names no app, machine or volume"
        for label, owner in named:
            if owner != who.app:
                return f"{label} is not app {who.app}'s (or does not exist)"
        if access.org_slug and access.org_slug != app_org:
            return f"app {who.app} is not in org {access.org_slug}"
        if who.kms and access.app_feature != "secretkeys":
            return "a KMS token is good for app_feature secretkeys only"
        return None
    for label, owner in named:
        if owner is None:
            return f"no {label}"
    if len({owner for _label, owner in named}) > 1:
        return "the app, machine and volume named are not of one app"
    if access.org_slug and named and access.org_slug != app_org:
        return f"the app is not in org {access.org_slug}"
    return None
