"""fly.toml's ``[[files]]`` into each group's machine config, as flyctl maps them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bodega.deploy.core.config import ConfigError, parse
from bodega.deploy.core.config_check import check
from bodega.deploy.core.fly_files import LocalFileError
from bodega.deploy.core.machine_spec import machine_config

HEAD = 'app = "x"\n[build]\nimage = "registry.example/app:1"\n'
GROUPS = '[processes]\napp = ""\nworker = "run-worker"\n'


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_each_source_becomes_the_apis_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "nginx.conf").write_bytes(b"\x00binary\xff")
    config, warnings = parse(HEAD + '''
[[files]]
guest_path = "/etc/nginx/nginx.conf"
local_path = "conf/nginx.conf"
[[files]]
guest_path = "/app/motd"
raw_value = "hello\\n"
[[files]]
guest_path = "/app/token"
secret_name = "TOKEN"
''')
    assert warnings == []
    made = machine_config(config, "app", 1, tmp_path)
    assert [f.model_dump(exclude_none=True) for f in made.files or []] == [
        # A local file is read at deploy time, relative to the config's directory.
        {"guest_path": "/etc/nginx/nginx.conf", "raw_value": b64(b"\x00binary\xff")},
        # raw_value is the file's text: the deploy base64-encodes it, as flyctl does.
        {"guest_path": "/app/motd", "raw_value": b64(b"hello\n")},
        # A secret's name only: the worker reads its value at each start.
        {"guest_path": "/app/token", "secret_name": "TOKEN"},
    ]


def test_an_entry_goes_to_the_groups_it_names_else_the_default_one() -> None:
    config, _ = parse(HEAD + GROUPS + '''
[[files]]
guest_path = "/a"
raw_value = "for app"
[[files]]
guest_path = "/w"
raw_value = "for worker"
processes = ["worker"]
[[files]]
guest_path = "/both"
raw_value = "both"
processes = ["app", "worker"]
''')
    paths = {group: [f.guest_path for f in machine_config(config, group, 1).files or []]
             for group in config.groups}
    assert paths == {"app": ["/a", "/both"], "worker": ["/w", "/both"]}


@pytest.mark.parametrize(("entry", "said"), [
    ('guest_path = "/a"\n', "give exactly one of local_path, raw_value and secret_name"),
    ('guest_path = "/a"\nraw_value = "x"\nsecret_name = "S"\n', "give exactly one of"),
    ('guest_path = "a"\nraw_value = "x"\n', "guest_path 'a': an absolute path"),
    ('guest_path = "/a"\nraw_value = "x"\nprocesses = ["nope"]\n',
     "files.0.processes names process group 'nope'"),
])
def test_a_bad_entry_names_its_key_and_line(entry: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(HEAD + "[[files]]\n" + entry)
    assert said in str(caught.value)
    if "processes" not in said:  # a whole-file rule's refusal has no line of its own
        assert caught.value.errors[0].line == 4


def test_a_process_app_cannot_take_files() -> None:
    config, _ = parse('app = "x"\n[processes]\napp = "python3 app.py"\n'
                      '[[files]]\nguest_path = "/a"\nraw_value = "x"\n')
    with pytest.raises(ValueError, match=r"\[\[files\]\] need an image machine"):
        machine_config(config, "app", 1)


def test_a_missing_local_path_is_one_line_of_config_validate(tmp_path: Path) -> None:
    toml = tmp_path / "fly.toml"
    toml.write_text(HEAD + GROUPS + '[[files]]\nguest_path = "/a"\nlocal_path = "gone.txt"\n'
                    'processes = ["app", "worker"]\n')
    checked = check(toml)
    assert not checked.ok
    assert [(e.key, e.line) for e in checked.errors] == [("files.0.local_path", 9)]
    assert f"cannot read local_path {tmp_path / 'gone.txt'}" in checked.errors[0].message
    config, _ = parse(toml.read_text())
    with pytest.raises(LocalFileError):
        machine_config(config, "app", 1, tmp_path)


def test_a_local_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"a" * (64 * 1024))
    config, _ = parse(HEAD + '[[files]]\nguest_path = "/a"\nlocal_path = "big"\n')
    with pytest.raises(ValueError, match="at most 32768 bytes"):
        machine_config(config, "app", 1, tmp_path)


def test_files_are_no_longer_warned_about() -> None:
    _, warnings = parse(HEAD + '[[files]]\nguest_path = "/a"\nsecret_name = "S"\n')
    assert warnings == []
