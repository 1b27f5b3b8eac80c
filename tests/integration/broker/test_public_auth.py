"""The public API's tokens: app tokens expire in 90 days, and failed logins are rate-limited
per source address (429 with Retry-After), with successful requests never refused."""

from __future__ import annotations

from pathlib import Path

from .broker_kit import in_process_cluster

DAY = 86400.0


async def test_an_app_token_lasts_ninety_days_unless_asked_otherwise(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        await c.add_broker()
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            default = await api.post("/v1/apps/web/deploy_token", json={})
            short = await api.post("/v1/apps/web/deploy_token", json={"expiry": "1h"})
            bad = await api.post("/v1/apps/web/deploy_token", json={"expiry": "soon"})
        assert (default.status_code, short.status_code) == (200, 200)
        assert bad.status_code == 400
        assert bad.json()["status"] == "invalid_argument"
        lives = sorted(row["expires_at"] - row["created_at"] for row in c.catalog.rows("tokens"))
        assert lives == [3600.0, 90 * DAY]
        async with c.api(token=default.json()["token"]) as app:
            assert (await app.get("/v1/apps/web/machines")).status_code == 200


async def test_an_address_that_keeps_failing_is_told_to_wait_and_a_good_token_still_works(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        broker = await c.add_broker()
        broker.tokens.clock = lambda: 1000.0  # no refill while the test runs
        burst = int(broker.tokens.limiter.burst)
        async with c.api(token="not-a-token") as wrong, c.api() as admin, \
                c.api(token=None) as anonymous:
            codes = [(await wrong.get("/v1/apps")).status_code for _ in range(burst)]
            assert codes == [401] * burst
            limited = await wrong.get("/v1/apps")
            assert limited.status_code == 429
            assert limited.json()["status"] == "rate_limited"
            assert "too many failed authentications" in limited.json()["error"]
            assert int(limited.headers["retry-after"]) >= 1
            assert (await anonymous.get("/v1/apps")).status_code == 429  # no token: a failure
            # The same address with a good token: never refused for its failures.
            assert (await admin.get("/v1/apps")).status_code == 200
            assert (await anonymous.get("/v1/health")).status_code == 200  # open routes too
            broker.tokens.clock = lambda: 1000.0 + 3.0 / broker.tokens.limiter.per_second
            assert (await wrong.get("/v1/apps")).status_code == 401  # three back: 401 again


async def test_a_forged_forwarded_for_does_not_escape_the_limit(tmp_path: Path) -> None:
    """The broker sits behind no proxy: the address counted is the connection's, whatever
    X-Forwarded-For a client sends (from loopback too)."""
    async with in_process_cluster(tmp_path) as c:
        broker = await c.add_broker()
        broker.tokens.clock = lambda: 1000.0
        burst = int(broker.tokens.limiter.burst)
        async with c.api(token="not-a-token") as wrong:
            codes = [(await wrong.get("/v1/apps", headers={
                "x-forwarded-for": f"192.0.2.{n % 250 + 1}"})).status_code
                for n in range(burst + 1)]
        assert codes == [401] * burst + [429]
