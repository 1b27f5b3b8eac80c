"""Deploying an app from its ``bodega.toml``: config, a pure planner, and the executor that
carries a plan out through the public Machines API (with releases recorded in the cluster).

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.deploy.machine_keys``) does not pay for the bodega.toml models beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.deploy.config import (
        AppConfig,
        ConfigError,
        load,
    )
    from bodega.deploy.deployer import (
        DeployOptions,
        DeployResult,
        deploy,
    )
    from bodega.deploy.plan import (
        Plan,
        PlanError,
        plan,
    )

_MODULE = {
    "AppConfig": "config",
    "ConfigError": "config",
    "DeployOptions": "deployer",
    "DeployResult": "deployer",
    "Plan": "plan",
    "PlanError": "plan",
    "deploy": "deployer",
    "load": "config",
    "plan": "plan",
}

__all__ = [
    "AppConfig",
    "ConfigError",
    "DeployOptions",
    "DeployResult",
    "Plan",
    "PlanError",
    "deploy",
    "load",
    "plan",
]


__getattr__ = lazy(__name__, globals(), _MODULE)
