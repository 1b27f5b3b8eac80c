"""Deploying an app from its ``bodega.toml``: config, a pure planner, and the executor that
carries a plan out through the public Machines API (with releases recorded in the cluster).

Its names load on first use (PEP 562): a command that needs one small module
(``bodega.deploy.core.machine_keys``) does not pay for the bodega.toml models beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.lazy_names import lazy

if TYPE_CHECKING:
    from bodega.deploy.core.config import (
        AppConfig,
        ConfigError,
        load,
    )
    from bodega.deploy.core.plan import (
        Plan,
        PlanError,
        plan,
    )
    from bodega.deploy.deployer import (
        DeployOptions,
        DeployResult,
        deploy,
    )

_MODULE = {
    "AppConfig": "core.config",
    "ConfigError": "core.config",
    "DeployOptions": "deployer",
    "DeployResult": "deployer",
    "Plan": "core.plan",
    "PlanError": "core.plan",
    "deploy": "deployer",
    "load": "core.config",
    "plan": "core.plan",
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
