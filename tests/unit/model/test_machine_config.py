import pytest
from pydantic import ValidationError

from bodega.model.duration import format_duration, parse_duration
from bodega.model.errors import BadRequest
from bodega.model.machine_config import MachineConfig, preset
from bodega.wire.public.fly import checked


def test_autostop_accepts_bool_or_string_and_answers_like_the_real_api() -> None:
    config = MachineConfig.model_validate(
        {
            "image": "app",
            "services": [
                {"internal_port": 8080, "autostop": True},
                {"internal_port": 8081, "autostop": "off"},
                {"internal_port": 8082, "autostop": "suspend"},
            ],
        }
    )
    assert [s.autostop for s in config.services or []] == ["stop", "off", "suspend"]
    wire = config.to_wire()
    assert [s["autostop"] for s in wire["services"]] == [True, False, "suspend"]


def test_unknown_fields_are_kept_and_unset_ones_omitted() -> None:
    config = MachineConfig.model_validate({"image": "app", "dns": {"skip_registration": True}})
    wire = config.to_wire()
    assert wire == {"image": "app", "dns": {"skip_registration": True}}


def test_size_preset_fills_guest() -> None:
    config = MachineConfig.model_validate({"image": "app", "size": "performance-2x"})
    guest = config.effective_guest()
    assert (guest.cpu_kind, guest.cpus, guest.memory_mb) == ("performance", 2, 4096)
    assert preset("shared-cpu-4x") == ("shared", 4, 1024)
    with pytest.raises(ValueError, match="unknown machine size"):
        preset("huge")


def test_command_order_of_precedence() -> None:
    def cmd(data: dict[str, object]) -> list[str] | None:
        return MachineConfig.model_validate({"image": "x", **data}).command()

    assert cmd({"init": {"exec": ["a"], "cmd": ["b"]}}) == ["a"]
    assert cmd({"init": {"entrypoint": ["a"], "cmd": ["b", "c"]}}) == ["a", "b", "c"]
    assert cmd({"processes": [{"cmd": ["p"]}]}) == ["p"]
    assert cmd({}) is None


def test_restart_policy_defaults_to_on_failure_with_ten_retries() -> None:
    assert MachineConfig(image="x").restart_policy() == ("on-failure", 10)
    config = MachineConfig.model_validate({"image": "x", "restart": {"policy": "no"}})
    assert config.restart_policy() == ("no", 10)


@pytest.mark.parametrize(
    "data",
    [
        {"image": ""},
        {"image": "x", "guest": {"memory_mb": 300}},
        {"image": "x", "guest": {"cpus": 0}},
        {"image": "x", "guest": {"cpu_kind": "turbo"}},
        {"image": "x", "services": [{"internal_port": 70000}]},
        {"image": "x", "stop_config": {"signal": "SIGNOPE"}},
        {"image": "x", "checks": {"c": {"interval": "soon"}}},
        {"image": "x", "mounts": [{"path": "/a"}, {"path": "/b"}]},
        {"image": "x", "init": {"swap_size_mb": -1}},
        {"image": "x", "init": {"swap_size_mb": 65537}},
    ],
)
def test_invalid_configs_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MachineConfig.model_validate(data)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h", 3600.0), (2_000_000_000, 2.0),
     ("1500000000", 1.5), (None, 7.0), ("", 7.0)],
)
def test_parse_duration(value: str | int | None, seconds: float) -> None:
    assert parse_duration(value, 7.0) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["ten", "10x", "s", "-1s", True, -5])
def test_parse_duration_rejects_garbage(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value, 1.0)  # type: ignore[arg-type]


def test_format_duration() -> None:
    assert format_duration(10) == "10s"
    assert format_duration(0.25) == "250ms"


def test_swap_is_a_size_from_none_to_64_gb_and_a_bad_one_is_said_as_a_400() -> None:
    for size in (0, 512, 65536):
        init = MachineConfig.model_validate({"image": "x", "init": {"swap_size_mb": size}}).init
        assert init is not None
        assert init.swap_size_mb == size
    with pytest.raises(BadRequest) as refused:
        checked(MachineConfig, {"image": "x", "init": {"swap_size_mb": 1 << 30}}, "config")
    assert refused.value.http_status == 400
    assert refused.value.message == ("invalid_argument: config.init.swap_size_mb: Input "
                                     "should be less than or equal to 65536")
