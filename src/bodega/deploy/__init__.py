"""Deploying an app from its ``bodega.toml``: config, a pure planner, and the executor that
carries a plan out through the public Machines API (with releases recorded in the cluster)."""

from bodega.deploy.config import AppConfig, ConfigError, load
from bodega.deploy.deployer import DeployOptions, DeployResult, deploy
from bodega.deploy.plan import Plan, PlanError, plan

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
