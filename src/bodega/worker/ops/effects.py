"""The side effects of machine and volume operations, each safe to repeat.

``MachineEffects.perform`` is the only place where the worker's state
machines touch the host: the driver, the network and the volume directories.
It reads the current row, does the work, and reports what changed; the runner
records that in the same transaction that enters the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import grp
import os
import pwd
import shutil
import signal as signals
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from bodega.model.duration import parse_duration
from bodega.model.machine import ExitStatus
from bodega.networking.commands import CommandFailed
from bodega.runtime import machine_tokens
from bodega.runtime.waits import within
from bodega.worker.config import WorkerConfig
from bodega.worker.core.fsm import Effect, Step
from bodega.worker.core.guest_files import FilesRefused, guest_files
from bodega.worker.core.payloads import (
    CreateMachine,
    CreateVolume,
    EndsRun,
    Payload,
    StartMachine,
    StartsRun,
)
from bodega.worker.core.records import MachineRow
from bodega.worker.drivers.base import (
    RESOLV_CONF,
    Driver,
    DriverError,
    Mount,
    Suspend,
    TaskHandle,
    TaskSpec,
)
from bodega.worker.drivers.process.launch import ROOT_ENV, SHELL, USER_SWITCH
from bodega.worker.drivers.process.logfiles import log_path
from bodega.worker.host.core.identity import machine_identity
from bodega.worker.host.network import Network, NetworkError
from bodega.worker.host.network_fence import NetworkFence
from bodega.worker.host.private_net import PrivateNetwork
from bodega.worker.host.volume_copy import replace_tree
from bodega.worker.ops.runner import Attached, EffectFailed, Handled, Outcome
from bodega.worker.store import queries
from bodega.worker.store.database import Operation, Store

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

P = TypeVar("P", bound=Payload)


def payload_of(op: Operation, kind: type[P]) -> P:
    """The operation's payload as the kind a step's effect reads (the FSM table pairs them)."""
    if not isinstance(op.payload, kind):
        raise EffectFailed(f"{op.fsm} at {op.step} carries no {kind.__name__} payload")
    return op.payload


def signal_number(name: str | int | None, default: int) -> int:
    """A signal given as a name ("SIGTERM"), a bare name ("TERM") or a number."""
    if name is None or name == "":
        return default
    if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
        number = int(name)
        signals.Signals(number)  # raises ValueError for unknown numbers
        return number
    text = name.upper()
    if not text.startswith("SIG"):
        text = "SIG" + text
    return int(signals.Signals[text])


def machine_user(name: str | None, setgroups: Path = Path("/proc/self/setgroups"),
                 path: str = ROOT_ENV["PATH"]) -> tuple[int, int] | None:
    """(uid, gid) for running machines, when the worker is root and a user is configured.

    ValueError where the wrapper's switch to the machine's user (``launch.USER_SWITCH``, run
    here as the wrapper runs it, with ``path`` its ``PATH``) would fail every start:
    ``setgroups`` denied (a user namespace made so: the worker's groups cannot be dropped),
    or an ``unshare`` that takes no user (util-linux before 2.34)."""
    if name is None or os.geteuid() != 0:
        return None
    with contextlib.suppress(FileNotFoundError):  # a kernel before 3.19 has no such file
        if setgroups.read_text().strip() == "deny":
            raise ValueError(
                "machines cannot run as their own users here: this user namespace denies "
                "setgroups, so the worker's groups cannot be dropped (run the worker where "
                "/proc/self/setgroups says allow)")
    tried = subprocess.run([SHELL, "-c", f"user=0:0; {USER_SWITCH} true"], env={"PATH": path},
                           capture_output=True, text=True, check=False)
    if tried.returncode != 0:
        said = (tried.stderr.strip().splitlines() or [f"exit {tried.returncode}"])[-1]
        raise ValueError(
            f"machines cannot run as their own users here: unshare cannot take a user "
            f"({said}); it needs util-linux 2.34 or later")
    entry = pwd.getpwnam(name)
    gid = entry.pw_gid
    if name == "nobody":
        with contextlib.suppress(KeyError):
            gid = grp.getgrnam("nogroup").gr_gid
    return entry.pw_uid, gid


class MachineEffects:
    def __init__(
        self,
        config: WorkerConfig,
        store: Store,
        driver: Driver,
        network: Network,
        user: tuple[int, int] | None,
    ) -> None:
        self.config = config
        self.store = store
        self.driver = driver
        self.network = network
        self.user = user
        self.machine_tokens = machine_tokens.keyed(config.secrets_key)  # None: no key
        # The app's secrets for a launch (``host/secret_env.py``); none without a registry.
        self.secret_env: Callable[[str], dict[str, str]] = lambda _app: {}
        # The private network (6PN addresses, resolver), when the worker runs one; the fence
        # that keeps networks apart over IPv4, when machines have namespaces of their own.
        self.private: PrivateNetwork | None = None
        self.handoff: Callable[[Operation], Awaitable[Outcome]] | None = None  # ops/moves
        self.fence: NetworkFence | None = None
        # Set once the worker stops all its machines to exit: a restart's backoff ends at once
        # (its machine is stopped next), so a crash loop does not hold up the exit.
        self.draining = asyncio.Event()
        # The spec a create's prepare readied, by machine, for the launch that comes next
        # (``_readied``). Memory only: a worker that restarts between the two builds it again.
        self._launching: dict[str, TaskSpec] = {}

    def machine(self, machine_id: str) -> MachineRow:
        row = queries.get_machine(self.store.db, machine_id)
        if row is None:
            raise EffectFailed(f"machine {machine_id} vanished from the store")
        return row

    def task_spec(self, machine: MachineRow, start_seq: int | None = None) -> TaskSpec:
        config = machine.config
        guest = config.effective_guest()
        # Secrets win over the config's env, as on Fly; the machine's own variables win over both.
        env = {"PATH": DEFAULT_PATH, "HOME": "/", **(config.env or {}),
               **self.secret_env(machine.app)}
        private_ip = machine.private_ip or ""
        mounts: tuple[Mount, ...] = ()
        if self.private is not None:
            private_ip = self.private.address(machine.app, machine.ip_index) or private_ip
            mounts = (self._resolv_conf(machine),)
        for prefix in ("BODEGA", "FLY"):
            env[f"{prefix}_MACHINE_ID"] = machine.id
            env[f"{prefix}_APP_NAME"] = machine.app
            env[f"{prefix}_REGION"] = machine.region
            env[f"{prefix}_INSTANCE_ID"] = machine.instance_id
            env[f"{prefix}_PRIVATE_IP"] = private_ip
        env["FLY_IMAGE_REF"] = config.image
        # Who this machine is, provable to any broker (runtime/machine_tokens.py).
        if self.machine_tokens is not None:
            env[machine_tokens.ENV] = self.machine_tokens.mint(machine.app, machine.id)
        env["FLY_MACHINE_VERSION"] = machine.instance_id
        if machine.volume_id and config.mounts:
            mounts += (Mount(self.config.volume_dir(machine.volume_id), config.mounts[0].path),)
        return TaskSpec(
            machine_id=machine.id,
            instance_id=machine.instance_id,
            start_seq=machine.start_seq if start_seq is None else start_seq,
            app=machine.app,
            image=config.image,
            argv=config.command() or [],
            env=env,
            cpus=guest.cpus,
            cpu_kind=guest.cpu_kind,
            memory_mb=machine.memory_limit,
            machine_dir=self.config.machine_dir(machine.id),
            netns=machine.netns,
            mounts=mounts,
            user=machine_identity(self.user, machine.private_ip),
            entrypoint=config.init.entrypoint if config.init else None,
            cmd=config.init.cmd if config.init else None,
            isolation=guest.runs_in,
            swap_mb=(config.init.swap_size_mb or 0) if config.init else 0,
        )

    def _readied(self, op: Operation, machine: MachineRow, start_seq: int) -> TaskSpec | None:
        """The spec the create's prepare built and readied a moment ago, for its launch's
        spawn (``prepared``: the driver's start does not ready it again); None for any other
        start, which builds its own. The launch follows the create in the same drive, under
        the machine's lock: nothing of the machine changed between the two. Saves the spec's
        build (the app's secrets, the machine's token, its resolv.conf written) and the
        driver's second prepare, about 0.5 ms before the spawn."""
        spec = self._launching.pop(machine.id, None)
        launch = isinstance(op.payload, StartMachine) and op.payload.attached
        if spec is None or not launch or spec.instance_id != machine.instance_id:
            return None
        return replace(spec, start_seq=start_seq, prepared=True)

    def _resolv_conf(self, machine: MachineRow) -> Mount:
        """The machine's own copy of the private resolver's resolv.conf (its own: the wrapper
        hands a mount's source to the machine's user), bound over /etc/resolv.conf."""
        assert self.private is not None
        path = self.config.machine_dir(machine.id) / "resolv.conf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.private.resolv_conf.read_bytes())
        return Mount(path, RESOLV_CONF)

    def inert(self, op: Operation, step: Step) -> Outcome | None:
        """What ``step``'s effect would report, when it does nothing on this host (the null
        driver's prepare, attaching under host networking, a launch's ``starting`` after its
        create attached); None when it must be performed.
        The runner then enters the next step in the same commit instead of performing it."""
        match step.effect:
            case Effect.PREPARE if not self.driver.capabilities.prepares:
                return Outcome()
            case Effect.ATTACH_NETWORK:
                fixed = self.network.fixed_attachment()
                if fixed is not None:
                    return Outcome(update=Attached(fixed.private_ip, fixed.netns))
                if isinstance(op.payload, StartMachine) and op.payload.attached:
                    # The create attached it in the commit that began this start; a
                    # namespace gone since (a reboot) is attached again.
                    index = self.machine(op.resource_id).ip_index
                    if index is not None and self.network.ready(index):
                        return Outcome()
        return None

    async def perform(self, op: Operation, step: Step) -> Outcome:
        try:
            try:
                return await self._perform(op, step)
            except (DriverError, NetworkError, CommandFailed, FilesRefused) as exc:
                if step.effect in (Effect.PREPARE, Effect.SPAWN):
                    self._log_failure(op.resource_id, step.name, str(exc))
                raise EffectFailed(str(exc)) from exc
        except BaseException:
            # Whatever comes next for the machine (a retry, a start) builds its spec afresh.
            self._launching.pop(op.resource_id, None)
            raise

    def _log_failure(self, machine_id: str, step: str, error: str) -> None:
        """Say in the machine's own log why its program never ran (a command not found, an
        image that cannot be prepared): ``bodega logs`` is where a user looks first."""
        path = log_path(self.config.machine_dir(machine_id))
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as log_file:
                log_file.write(f"[bodega] the machine could not start ({step}): {error}\n")

    async def _perform(self, op: Operation, step: Step) -> Outcome:
        match step.effect:
            case Effect.NONE:
                return Outcome()
            case Effect.BACKOFF:
                delay = payload_of(op, StartMachine).delay
                with contextlib.suppress(TimeoutError):
                    await within(self.draining.wait(), delay)
                return Outcome()
            case Effect.ATTACH_NETWORK:
                machine = self.machine(op.resource_id)
                if machine.ip_index is None:
                    raise EffectFailed("machine has no address allocated")
                attachment = await self.network.attach(machine.id, machine.ip_index)
                if self.private is not None and attachment.netns is not None:
                    try:
                        await self.private.attach(machine.app, machine.ip_index,
                                                  attachment.netns)
                    except LookupError as exc:
                        raise EffectFailed(str(exc)) from exc
                if self.fence is not None and attachment.netns is not None:
                    await self.fence.attach(machine.app, machine.ip_index)
                return Outcome(update=Attached(attachment.private_ip, attachment.netns))
            case Effect.PREPARE:
                machine = self.machine(op.resource_id)
                spec = self.task_spec(machine)
                await self.driver.prepare(spec)
                if isinstance(op.payload, CreateMachine) and op.payload.launch:
                    self._launching[machine.id] = spec
                return Outcome()
            case Effect.SPAWN:
                run = payload_of(op, StartsRun)
                machine = self.machine(op.resource_id)
                spec = (self._readied(op, machine, run.start_seq)
                        or self.task_spec(machine, run.start_seq))
                if machine.config.files:  # their secrets as they are now, at every start
                    spec = replace(spec, files=guest_files(machine.config.files,
                                                           self.secret_env(machine.app)))
                handle = await self.driver.start(spec)
                return Outcome(payload=replace(run, pid=handle.pid), update=Handled(handle))
            case Effect.STOP_TASK:
                return await self._stop_task(op)
            case Effect.FREEZE:
                await self._freeze(self.machine(op.resource_id))
                return Outcome()
            case Effect.THAW:
                machine = self.machine(op.resource_id)
                return _handle_kept(machine, await self._thaw(machine))
            case Effect.TEARDOWN:
                machine = self.machine(op.resource_id)
                self._launching.pop(machine.id, None)
                parking = self.driver.capabilities.parking
                if parking is not None and machine.netns is not None:
                    parking.release(machine.netns)  # its namespace goes: so does its launcher
                await self.driver.destroy(machine.id, self.config.machine_dir(machine.id))
                await self.network.detach(machine.id, machine.ip_index)
                if self.fence is not None:
                    await self.fence.detach(machine.ip_index)
                return Outcome(update=Handled(None))
            case Effect.HANDOFF | Effect.SHIP_VOLUME | Effect.DROP_VOLUME if self.handoff:
                return await self.handoff(op)
            case Effect.PROVISION_VOLUME:
                path = self.config.volume_dir(op.resource_id)
                source = payload_of(op, CreateVolume).snapshot_id
                if source is not None:  # a copy whatever an interrupted try left
                    await asyncio.to_thread(replace_tree, self.config.snapshot_dir(source),
                                            path)
                await asyncio.to_thread(path.mkdir, parents=True, exist_ok=True)
                if self.user is not None:
                    os.chown(path, *self.user)
                return Outcome()
            case Effect.REMOVE_VOLUME:
                await asyncio.to_thread(_remove_tree, self.config.volume_dir(op.resource_id))
                return Outcome()
        raise EffectFailed(f"no effect for {step.effect}")

    def _suspend(self) -> Suspend:
        suspend = self.driver.capabilities.suspend
        if suspend is None:
            raise EffectFailed(f"the {self.driver.name} driver cannot suspend a machine")
        return suspend

    async def _freeze(self, machine: MachineRow) -> None:
        if machine.handle is None:
            raise EffectFailed("the machine has no process to suspend")
        suspend = self._suspend()
        try:
            await suspend.suspend(machine.handle)
        except DriverError:
            # Half frozen is neither state: thaw it so the machine is truly still started.
            with contextlib.suppress(DriverError):
                await suspend.resume(machine.handle)
            raise

    async def _thaw(self, machine: MachineRow) -> TaskHandle | None:
        """The machine's run going on; its handle (a new one where the suspend ended its
        process: a VM's, resumed from its snapshot)."""
        if machine.handle is None:
            return None
        return await self._suspend().resume(machine.handle)

    async def _stop_task(self, op: Operation) -> Outcome:
        ends = payload_of(op, EndsRun)
        machine = self.machine(op.resource_id)
        handle = machine.handle
        if ends.thaw:
            # A frozen process cannot act on a signal (nor die of SIGKILL on a v1 freezer).
            handle = await self._thaw(machine)
        update = _handle_kept(machine, handle).update
        if handle is None or not await self.driver.inspect(handle):
            if handle is None:
                return Outcome()
            exit_status = await self.driver.wait(handle)
            return Outcome(payload=replace(ends, exit=_exit_event(exit_status, True)),
                           update=update)
        stop_config = machine.config.stop_config
        default_signal = signal_number(stop_config.signal if stop_config else None,
                                       signals.SIGINT)
        sig = signal_number(ends.signal, default_signal)
        timeout = ends.timeout
        if timeout is None:
            timeout = parse_duration(stop_config.timeout if stop_config else None, 10.0)
        await self.driver.stop(handle, sig, timeout)
        exit_status = await self.driver.wait(handle)
        return Outcome(payload=replace(ends, exit=_exit_event(exit_status, True)), update=update)


def _handle_kept(machine: MachineRow, handle: TaskHandle | None) -> Outcome:
    """The record's update when its run goes on in another process (a VM resumed)."""
    return Outcome(update=Handled(handle)) if handle is not None and \
        handle != machine.handle else Outcome()


def _exit_event(status: ExitStatus, requested: bool) -> Mapping[str, Any]:
    return replace(status, requested_stop=requested).exit_event().doc()


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
