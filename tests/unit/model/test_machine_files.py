"""``config.files``: fly.File as the API takes it, and what a create refuses."""

import base64
from collections.abc import Mapping

import pytest
from pydantic import ValidationError

from bodega.model.limits import MAX_FILE_BYTES
from bodega.model.machine_config import MachineConfig

IMAGE = "registry.example/app:1"


def config(*files: Mapping[str, object], image: str = IMAGE) -> MachineConfig:
    return MachineConfig.model_validate({"image": image, "files": list(files)})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_files_are_typed_and_read_back_as_sent() -> None:
    sent: list[dict[str, object]] = [
        {"guest_path": "/app/x.conf", "raw_value": b64(b"listen 80\n"), "mode": 0o600},
        {"guest_path": "/etc/token", "secret_name": "TOKEN"}]
    made = config(*sent)
    made.check_limits()
    assert made.files is not None
    assert made.files[0].content() == b"listen 80\n"
    assert made.to_wire()["files"] == sent


@pytest.mark.parametrize(("file", "said"), [
    ({"guest_path": "app/x", "raw_value": "eA=="}, "files guest_path 'app/x'"),
    ({"guest_path": "/", "raw_value": "eA=="}, "files guest_path '/'"),
    ({"guest_path": "/a/../etc/passwd", "raw_value": "eA=="}, "no '.' or '..'"),
    ({"guest_path": "/x"}, "exactly one of raw_value and secret_name"),
    ({"guest_path": "/x", "raw_value": "eA==", "secret_name": "S"}, "exactly one of"),
    ({"guest_path": "/x", "raw_value": "not base64!"}, "raw_value is not base64"),
    ({"guest_path": "/x", "secret_name": " "}, "secret_name is empty"),
    ({"guest_path": "/x", "image_config": "img"}, "exactly one of"),
    ({"guest_path": "/x", "raw_value": b64(b"a" * (MAX_FILE_BYTES + 1))},
     f"at most {MAX_FILE_BYTES} bytes"),
])
def test_a_file_no_worker_could_write_is_refused(file: dict[str, object], said: str) -> None:
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(".", r"\.")):
        config(file).check_limits()


def test_the_same_path_twice_is_refused() -> None:
    file = {"guest_path": "/x", "raw_value": "eA=="}
    with pytest.raises(ValueError, match="more than once"):
        config(file, file).check_limits()


def test_mode_is_a_permission_and_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError, match="mode"):
        config({"guest_path": "/x", "raw_value": "eA==", "mode": 0o10000})
    with pytest.raises(ValidationError, match="owner"):
        config({"guest_path": "/x", "raw_value": "eA==", "owner": "root"})


def test_a_host_process_cannot_take_files() -> None:
    with pytest.raises(ValueError, match="files need an image machine"):
        config({"guest_path": "/x", "raw_value": "eA=="}, image="python3").check_limits()


def test_files_count_toward_the_config_size() -> None:
    big = b64(b"a" * (MAX_FILE_BYTES - 1))
    with pytest.raises(ValueError, match="bytes of JSON"):
        config({"guest_path": "/a", "raw_value": big},
               {"guest_path": "/b", "raw_value": big}).check_limits()


def test_a_config_stored_with_files_kept_as_sent_still_loads() -> None:
    stored = ('{"image": "registry.example/app:1", "files": [{"guest_path": "/x", '
              '"raw_value": "eA==", "owner": "root"}]}')
    loaded = MachineConfig.model_validate_json(stored, context={"stored": True})
    assert loaded.to_wire()["files"] == [{"guest_path": "/x", "raw_value": "eA=="}]
    with pytest.raises(ValidationError, match="owner"):
        MachineConfig.model_validate_json(stored)
