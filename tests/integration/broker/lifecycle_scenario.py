"""The whole machine lifecycle as a client written from the spec drives it."""

from __future__ import annotations

from typing import Any

import pytest

from .spec_client_kit import ApiError, SpecClient


async def full_lifecycle(fly: SpecClient, app: str, config: dict[str, Any]) -> None:
    """Apps, machines, leases, versions, metadata, cordon, waits, events, volumes, destroy."""
    await fly.create_app(app)
    assert (await fly.get_app(app)).organization.slug == "personal"  # type: ignore[union-attr]
    assert app in [a.name for a in (await fly.list_apps()).apps]

    m = await fly.launch(app, {"config": config, "region": "ams",
                                       "skip_launch": True, "name": "web-1"})
    assert (m.state, m.name, m.region) == ("created", "web-1", "ams")
    assert m.config is not None
    assert m.config["services"][0]["autostop"] is True
    assert m.id is not None
    assert m.instance_id is not None
    assert (await fly.start(app, m.id))["previous_state"] == "created"
    assert (await fly.wait(app, m.id, "started")).ok

    lease = await fly.acquire_lease(app, m.id, 30)
    assert lease.status == "success"
    refreshed = await fly.acquire_lease(app, m.id, 30, lease.data.nonce)
    assert refreshed.data.nonce == lease.data.nonce
    with pytest.raises(ApiError) as held:
        await fly.stop(app, m.id)
    assert held.value.code == 409
    assert "lease currently held" in held.value.body.error
    await fly.stop(app, m.id, nonce=lease.data.nonce)
    await fly.wait(app, m.id, "stopped", instance_id=m.instance_id)
    await fly.release_lease(app, m.id, lease.data.nonce)

    updated = await fly.update(app, m.id, {
        "config": {**config, "env": {"RELEASE": "2"}}, "skip_launch": True})
    assert updated.instance_id != m.instance_id
    versions = await fly.versions(app, m.id)
    assert {v.version for v in versions} == {m.instance_id, updated.instance_id}

    await fly.set_metadata(app, m.id, "fly_release_version", "2")
    assert (await fly.metadata(app, m.id))["fly_release_version"] == "2"
    listed = await fly.machines(app, **{"metadata.fly_release_version": "2"})
    assert [x.id for x in listed] == [m.id]
    await fly.cordon(app, m.id, True)
    assert (await fly.get(app, m.id)).cordoned is True
    await fly.cordon(app, m.id, False)

    with pytest.raises(ApiError) as timed_out:
        await fly.wait(app, m.id, "started", timeout=1)
    assert timed_out.value.code == 408
    assert timed_out.value.body.error.startswith("deadline_exceeded:")
    with pytest.raises(ApiError) as bad_wait:
        await fly.wait(app, m.id, "started", timeout=61)
    assert bad_wait.value.code == 400

    events = await fly.events(app, m.id)
    assert events[0].timestamp is not None
    assert events[-1].type == "launch"
    assert [e.timestamp for e in events] == sorted((e.timestamp or 0 for e in events),
                                                   reverse=True)

    vol = await fly.create_volume(app, "data", "ams")
    assert vol.id.startswith("vol_")
    assert vol.region == "ams"
    assert [v.id for v in await fly.list_volumes(app)] == [vol.id]

    await fly.destroy(app, m.id, kill=True)
    await fly.wait(app, m.id, "destroyed")
    assert await fly.machines(app) == []
    assert [x.state for x in await fly.machines(app, include_deleted="true")] == [
        "destroyed"]
    with pytest.raises(ApiError) as missing:
        await fly.get(app, "0123456789abcd")
    assert missing.value.code == 404
    assert "not found" in missing.value.body.error
