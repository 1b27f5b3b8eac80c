"""Host capacity, what a machine asks for, and whether it fits.

CPU is counted in millicpus of the host's physical cpus. A ``performance``
vCPU is dedicated and costs 1000; a ``shared`` vCPU costs
``ceil(1000 / shared_cpu_ratio)``, which is how shared cpus are
oversubscribed while dedicated ones never are. Memory, disk and GPUs are
never oversubscribed. This is the pure core of a worker's ledger and of the
broker's feasibility filter: both must agree on what "fits" means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TypedDict

from bodega.model.machine_config import MachineConfig
from bodega.model.rows.workers import HostTotals, HostUsage

CPU_KINDS = ("shared", "performance")
# A host that says nothing of its isolations (one from before they were chosen) offers what
# every host did then: containers.
DEFAULT_ISOLATIONS = ("container",)


# What a vm machine's VMM holds beside its guest's memory (qemu's own heap and, under
# emulation, its translated code): the host is charged it with the guest's, as the machine's
# memory cgroup allows it, so a host full of VMs is not over-committed.
VM_OVERHEAD_MB = 128


class AskWire(TypedDict, total=False):
    """An ask as JSON: how a worker stores it (its claims, its jobs' runs) and a placement's
    record shows it. Every key is written; an ask stored before a key existed lacks it,
    and reads as that key's default."""

    cpu_kind: str
    cpus: int
    memory_mb: int
    disk_gb: int
    gpus: int
    gpu_kind: str | None
    isolation: str


@dataclass(frozen=True)
class Ask:
    """What one machine (or one volume) needs from a host."""

    cpu_kind: str = "shared"
    cpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    gpus: int = 0
    gpu_kind: str | None = None
    isolation: str = "container"

    @classmethod
    def for_config(cls, config: MachineConfig) -> Ask:
        guest = config.effective_guest()
        return cls(
            cpu_kind=guest.cpu_kind,
            cpus=guest.cpus,
            memory_mb=guest.memory_mb + (VM_OVERHEAD_MB if guest.runs_in == "vm" else 0),
            gpus=guest.gpus or 0,
            gpu_kind=guest.gpu_kind,
            isolation=guest.runs_in,
        )

    def pinned(self, totals: Totals, used: Usage) -> Ask:
        """This ask with its GPU kind chosen as ``Usage.plus`` would choose it, so that
        adding it and taking it back out touch the same kind."""
        if not self.gpus or self.gpu_kind:
            return self
        return replace(self, gpu_kind=_any_gpu_kind(totals, used, self.gpus))

    def describe(self) -> str:
        memory = (f"{self.memory_mb - VM_OVERHEAD_MB} MB + {VM_OVERHEAD_MB} MB for its VM"
                  if self.isolation == "vm" and self.memory_mb > VM_OVERHEAD_MB
                  else f"{self.memory_mb} MB")
        text = f"{self.cpus} {self.cpu_kind} cpu, {memory}"
        if self.disk_gb:
            text += f", {self.disk_gb} GB disk"
        if self.gpus:
            text += f", {self.gpus} {self.gpu_kind or 'any'} gpu"
        if self.isolation != "container":
            text += f", {self.isolation} isolation"
        return text

    def to_wire(self) -> AskWire:
        return {
            "cpu_kind": self.cpu_kind, "cpus": self.cpus, "memory_mb": self.memory_mb,
            "disk_gb": self.disk_gb, "gpus": self.gpus, "gpu_kind": self.gpu_kind,
            "isolation": self.isolation,
        }

    @classmethod
    def from_wire(cls, data: AskWire) -> Ask:
        return cls(
            cpu_kind=str(data.get("cpu_kind", "shared")),
            cpus=int(data.get("cpus", 0)),
            memory_mb=int(data.get("memory_mb", 0)),
            disk_gb=int(data.get("disk_gb", 0)),
            gpus=int(data.get("gpus", 0)),
            gpu_kind=data.get("gpu_kind"),
            isolation=str(data.get("isolation") or "container"),
        )


@dataclass(frozen=True)
class Totals:
    """A host's configured limits."""

    cpus: int
    memory_mb: int
    disk_gb: int = 0
    gpus: dict[str, int] = field(default_factory=dict)
    shared_cpu_ratio: float = 4.0
    cpu_kinds: tuple[str, ...] = CPU_KINDS
    isolations: tuple[str, ...] = DEFAULT_ISOLATIONS  # those the worker ran at its start
    vm_accel: str = ""  # how its vm isolation runs: kvm, or tcg (qemu's emulation)

    @property
    def millicpus(self) -> int:
        return self.cpus * 1000

    def millicpus_for(self, ask: Ask) -> int:
        if ask.cpu_kind == "performance":
            return ask.cpus * 1000
        return ask.cpus * math.ceil(1000 / self.shared_cpu_ratio)

    def row(self) -> HostTotals:
        """As a worker's row and its API say it."""
        return HostTotals(
            cpus=self.cpus, memory_mb=self.memory_mb, disk_gb=self.disk_gb,
            gpus=dict(self.gpus), shared_cpu_ratio=self.shared_cpu_ratio,
            cpu_kinds=list(self.cpu_kinds), isolations=list(self.isolations),
            vm_accel=self.vm_accel,
        )

    @classmethod
    def from_row(cls, row: HostTotals) -> Totals:
        return cls(
            cpus=row.cpus, memory_mb=row.memory_mb, disk_gb=row.disk_gb, gpus=dict(row.gpus),
            shared_cpu_ratio=row.shared_cpu_ratio,
            cpu_kinds=tuple(row.cpu_kinds or CPU_KINDS),
            isolations=tuple(row.isolations or DEFAULT_ISOLATIONS), vm_accel=row.vm_accel,
        )


@dataclass(frozen=True)
class Usage:
    """What is committed on a host: live reservations plus machines holding resources."""

    millicpus: int = 0
    memory_mb: int = 0
    disk_gb: int = 0
    gpus: dict[str, int] = field(default_factory=dict)

    def plus(self, totals: Totals, ask: Ask, compute: bool = True) -> Usage:
        """Usage after adding ``ask``; with ``compute=False`` only its disk counts."""
        if not compute:
            return replace(self, disk_gb=self.disk_gb + ask.disk_gb)
        gpus = dict(self.gpus)
        if ask.gpus:
            kind = ask.gpu_kind or _any_gpu_kind(totals, self, ask.gpus) or "any"
            gpus[kind] = gpus.get(kind, 0) + ask.gpus
        return Usage(
            millicpus=self.millicpus + totals.millicpus_for(ask),
            memory_mb=self.memory_mb + ask.memory_mb,
            disk_gb=self.disk_gb + ask.disk_gb,
            gpus=gpus,
        )

    def minus(self, totals: Totals, ask: Ask) -> Usage:
        """Usage after taking ``ask`` back out (never below zero)."""
        gpus = dict(self.gpus)
        if ask.gpus and ask.gpu_kind in gpus:  # give back an ask pinned with Ask.pinned
            gpus[ask.gpu_kind] = max(0, gpus[ask.gpu_kind] - ask.gpus)
        return Usage(
            millicpus=max(0, self.millicpus - totals.millicpus_for(ask)),
            memory_mb=max(0, self.memory_mb - ask.memory_mb),
            disk_gb=max(0, self.disk_gb - ask.disk_gb),
            gpus=gpus,
        )

    def row(self) -> HostUsage:
        """As a worker's row and its API say it."""
        return HostUsage(millicpus=self.millicpus, memory_mb=self.memory_mb,
                         disk_gb=self.disk_gb, gpus=dict(self.gpus))

    @classmethod
    def from_row(cls, row: HostUsage) -> Usage:
        return cls(millicpus=row.millicpus, memory_mb=row.memory_mb, disk_gb=row.disk_gb,
                   gpus=dict(row.gpus))


def _any_gpu_kind(totals: Totals, used: Usage, count: int) -> str | None:
    for kind, total in sorted(totals.gpus.items()):
        if total - used.gpus.get(kind, 0) >= count:
            return kind
    return None


def shortfalls(totals: Totals, used: Usage, ask: Ask, compute: bool = True) -> list[str]:
    """Why ``ask`` does not fit on a host with ``used`` committed; empty when it fits."""
    reasons: list[str] = []
    if compute:
        if ask.isolation not in totals.isolations:
            reasons.append(f"isolation {ask.isolation} not offered")
        if ask.cpus and ask.cpu_kind not in totals.cpu_kinds:
            reasons.append(f"cpu kind {ask.cpu_kind} not offered")
        free_mcpu = totals.millicpus - used.millicpus
        need_mcpu = totals.millicpus_for(ask)
        if need_mcpu > free_mcpu:
            reasons.append(f"cpu: needs {need_mcpu} mcpu, {max(free_mcpu, 0)} mcpu free")
        free_mem = totals.memory_mb - used.memory_mb
        if ask.memory_mb > free_mem:
            reasons.append(f"memory: needs {ask.memory_mb} MB, {max(free_mem, 0)} MB free")
        if ask.gpus:
            if ask.gpu_kind:
                free_gpu = totals.gpus.get(ask.gpu_kind, 0) - used.gpus.get(ask.gpu_kind, 0)
                if ask.gpus > free_gpu:
                    reasons.append(f"gpu: needs {ask.gpus} {ask.gpu_kind}, {max(free_gpu, 0)} free")
            elif _any_gpu_kind(totals, used, ask.gpus) is None:
                reasons.append(f"gpu: needs {ask.gpus}, none free")
    free_disk = totals.disk_gb - used.disk_gb
    if ask.disk_gb > free_disk:
        reasons.append(f"disk: needs {ask.disk_gb} GB, {max(free_disk, 0)} GB free")
    return reasons


def fits(totals: Totals, used: Usage, ask: Ask, compute: bool = True) -> bool:
    return not shortfalls(totals, used, ask, compute)


def describe_free(totals: Totals, used: Usage) -> str:
    free_cpu = (totals.millicpus - used.millicpus) / 1000
    return (
        f"{free_cpu:g} cpus, {totals.memory_mb - used.memory_mb} MB memory, "
        f"{totals.disk_gb - used.disk_gb} GB disk free"
    )
