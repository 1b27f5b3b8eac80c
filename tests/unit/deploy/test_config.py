"""bodega.toml: the fly.toml subset, warnings for ignored keys, errors with file, line, field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bodega.deploy.core.config import ConfigError, config_file, load, parse, unserved_statics
from bodega.deploy.core.machine_spec import GROUP_KEY, RELEASE_KEY, argv, machine_config
from bodega.model.capacity import Ask, Totals, Usage, shortfalls
from bodega.model.machine_config import Check

FIXTURES = Path(__file__).parent / "fixtures"


def test_the_fly_toml_fly_launch_writes_loads_with_warnings_for_ignored_keys() -> None:
    config, warnings = load(FIXTURES / "fly-launch-python.toml")
    assert config.app == "hello-flask"
    assert config.primary_region == "ams"
    assert config.http_service is not None
    assert config.http_service.internal_port == 8080
    assert config.vm[0].guest().model_dump(exclude_none=True) == {
        "cpu_kind": "shared", "cpus": 1, "memory_mb": 1024}
    assert sorted(w.key for w in warnings) == ["build.builder", "console_command"]
    assert all(w.message.startswith("ignored by bodega: ") for w in warnings)
    assert str(warnings[0]).startswith(str(FIXTURES / "fly-launch-python.toml") + ":")
    spec = machine_config(config, "app", 3)
    assert spec.metadata == {GROUP_KEY: "app", RELEASE_KEY: "3"}
    assert spec.init is not None
    assert spec.init.exec == ["gunicorn", "--bind", ":8080", "--workers", "2", "hello:app"]
    (service,) = spec.services or []
    assert service.internal_port == 8080
    assert service.autostop == "stop"


def test_an_unknown_key_is_a_warning_naming_file_line_and_key_and_an_error_when_strict() -> None:
    text = 'app = "x"\n\n[deploy]\n  strategy = "rolling"\n  max_unavailible = 2\n'
    said = ("app/bodega.toml:5: deploy.max_unavailible: unknown key "
            "(did you mean `max_unavailable`?)")
    config, warnings = parse(text, "app/bodega.toml")
    assert [str(w) for w in warnings] == [said]
    assert config.deploy.max_unavailable == 1
    with pytest.raises(ConfigError) as err:
        parse(text, "app/bodega.toml", strict=True)
    assert str(err.value) == said


HELLO = """app = "x"

[http_service]
  internal_port = 8080

  [[http_service.checks]]
    path = "/healthz"
"""


def test_a_typod_table_is_reported_before_what_it_leaves_missing() -> None:
    text = HELLO.replace("[http_service]", "[http_servce]")
    with pytest.raises(ConfigError) as err:
        parse(text, "typo3.toml")
    assert str(err.value) == ("typo3.toml:3: http_servce: unknown key "
                              "(did you mean `http_service`?)")


def test_a_typod_key_is_reported_not_the_key_it_leaves_missing() -> None:
    text = HELLO.replace("internal_port", "internal_prot")
    with pytest.raises(ConfigError) as err:
        parse(text, "typo.toml")
    assert str(err.value) == ("typo.toml:4: http_service.internal_prot: unknown key "
                              "(did you mean `internal_port`?)")
    # In a list of tables, a map of checks, and with nothing close: no guess.
    services = 'app = "x"\n[[services]]\n  internal_port = 1\n  protocl = "tcp"\n'
    with pytest.raises(ConfigError, match=r"^s.toml:4: services.0.protocl: unknown key "
                                          r"\(did you mean `protocol`\?\)$"):
        parse(services, "s.toml", strict=True)
    checks = 'app = "x"\n[checks.alive]\n  port = 1\n  intervl = "2s"\n'
    assert [str(w) for w in parse(checks, "c.toml")[1]] == [
        "c.toml:4: checks.alive.intervl: unknown key (did you mean `interval`?)"]
    assert [str(w) for w in parse('app = "x"\nzebra = 1\n', "z.toml")[1]] == [
        "z.toml:2: zebra: unknown key"]


def test_a_bad_duration_names_file_line_and_key() -> None:
    text = 'app = "x"\n\n[deploy]\n  wait_timeout = "60 seconds"\n'
    with pytest.raises(ConfigError) as err:
        parse(text, "d.toml")
    assert str(err.value) == ("d.toml:4: deploy.wait_timeout: not a duration '60 seconds' "
                              "(use e.g. 60s, 1m30s)")
    checks = HELLO + '    interval = "2 s"\n'
    with pytest.raises(ConfigError, match=r"^d.toml:8: http_service.checks.0.interval: not a "
                                          r"duration '2 s'"):
        parse(checks, "d.toml")
    assert parse(text.replace("60 seconds", "1m30s"))[0].deploy.wait_timeout == "1m30s"


def test_a_directory_means_its_bodega_toml(tmp_path: Path) -> None:
    (tmp_path / "bodega.toml").write_text('app = "in-a-dir"\n')
    assert load(tmp_path)[0].app == "in-a-dir"
    assert config_file(tmp_path) == tmp_path / "bodega.toml"
    assert config_file(tmp_path / "bodega.toml") == tmp_path / "bodega.toml"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError) as err:
        load(empty)
    assert str(err.value) == (f"{empty}: no bodega.toml or fly.toml in this directory (write "
                              "one with `bodega launch`, or pass -c FILE)")


def test_a_bad_value_names_its_line() -> None:
    text = 'app = "x"\n[http_service]\ninternal_port = 99999\n'
    with pytest.raises(ConfigError, match=r"^b.toml:3: http_service.internal_port: "):
        parse(text, "b.toml")
    with pytest.raises(ConfigError, match=r"^b.toml:2: deploy.strategy: "):
        parse('app = "x"\ndeploy = {strategy = "yolo"}\n', "b.toml")
    with pytest.raises(ConfigError, match=r"^b.toml: Invalid value \(at line 1, column 7\)"):
        parse("app = \n", "b.toml")
    with pytest.raises(ConfigError, match=r"^b.toml:3: vm.0.size: unknown machine size"):
        parse('app = "x"\n[[vm]]\nsize = "huge"\n', "b.toml")
    with pytest.raises(ConfigError, match=r"^b.toml:1: app: required"):
        parse('[env]\nA = "1"\n', "b.toml")


def test_processes_split_like_a_shell_but_never_through_one(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("")
    config, _ = parse('app = "x"\n[processes]\n'
                      'web = "python3 app.py --greeting \'hello there\' ; rm -rf /"\n')
    words = argv(config, "web", tmp_path)
    # The path next to bodega.toml is made absolute (machines run in their own directory);
    # ";" is an argument like any other, not a command separator.
    assert words == ["python3", str(tmp_path / "app.py"), "--greeting", "hello there", ";",
                     "rm", "-rf", "/"]


def test_a_config_the_machines_api_would_refuse_is_an_error_naming_group_and_field() -> None:
    config, _ = parse('app = "x"\n[build]\nimage = "nginx"\n[[vm]]\nmemory = 300\n')
    said = ("process group 'app': invalid_argument: guest.memory_mb: Value error, memory_mb "
            "must be a multiple of 128")
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        machine_config(config, "app", 1)


def test_process_driver_needs_a_command_and_an_image_does_not() -> None:
    config, _ = parse('app = "x"\n')
    with pytest.raises(ValueError, match="no command"):
        machine_config(config, "app", 1)
    config, _ = parse('app = "x"\n[build]\nimage = "nginx"\n')
    assert machine_config(config, "app", 1).image == "nginx"


def test_checks_and_services_reach_the_group_they_name() -> None:
    config, _ = parse('''
app = "x"
[processes]
web = "python3 web.py"
worker = "python3 worker.py"
[[services]]
internal_port = 8080
processes = ["web"]
  [[services.ports]]
  port = 80
  handlers = ["http"]
  [[services.http_checks]]
  path = "/healthz"
  interval = "2s"
  headers = { Host = "example.com" }
[checks.alive]
type = "tcp"
port = 9000
processes = ["worker"]
''')
    # As the Machines API takes them, and answers them.
    web = machine_config(config, "web", 1).to_wire()
    worker = machine_config(config, "worker", 1).to_wire()
    assert web["services"][0]["checks"] == [{
        "type": "http", "path": "/healthz", "interval": "2s", "port": 8080,
        "headers": [{"name": "Host", "values": ["example.com"]}]}]
    Check.model_validate(web["services"][0]["checks"][0])  # as the Machines API takes it
    assert "checks" not in web
    assert "services" not in worker
    assert worker["checks"] == {"alive": {"type": "tcp", "port": 9000}}


SERVICE = """app = "echo"

[[services]]
  internal_port = 7000

  [[services.ports]]
{port}
"""


@pytest.mark.parametrize(("port", "error"), [
    ('    port = 7001\n    handlers = ["tcp"]',
     "bodega.toml:8: services.0.ports.0.handlers.0: Input should be 'http', 'tls', "
     "'proxy_proto' or 'pg_tls'"),
    ('    port = 7001\n    proxy_proto_options = { version = "v2" }',
     "bodega.toml:6: services.0.ports.0: proxy_proto_options needs the proxy_proto handler"),
    ('    port = 7001\n    handlers = ["proxy_proto"]\n'
     '    proxy_proto_options = { version = "v3" }',
     "bodega.toml:9: services.0.ports.0.proxy_proto_options.version: Input should be 'v1' or "
     "'v2'"),
    ("    start_port = 7001",
     "bodega.toml:6: services.0.ports.0: end_port must be given, and at least start_port"),
    ("    handler = []", "bodega.toml:7: services.0.ports.0.handler: unknown key (did you mean "
                         "`handlers`?)"),
])
def test_a_bad_services_block_is_one_line_naming_the_key(port: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(SERVICE.format(port=port))
    assert str(caught.value) == error


def test_tcp_services_with_every_handler_reach_the_machine_config() -> None:
    config, _ = parse(SERVICE.format(port='    port = 7001\n    handlers = ["tls"]\n'
                                          '  [[services.ports]]\n    port = 7002\n'
                                          '    handlers = ["proxy_proto"]\n'
                                          '    proxy_proto_options = { version = "v2" }\n'
                                          '  [[services.ports]]\n    start_port = 7010\n'
                                          '    end_port = 7012'))
    assert [p.model_dump(exclude_none=True) for p in config.services[0].ports] == [
        {"port": 7001, "handlers": ["tls"]},
        {"port": 7002, "handlers": ["proxy_proto"], "proxy_proto_options": {"version": "v2"}},
        {"start_port": 7010, "end_port": 7012, "handlers": []}]


def test_a_vm_section_chooses_the_isolation_and_refuses_an_unknown_one() -> None:
    text = ('app = "x"\n[build]\n  image = "127.0.0.1:5000/x:1"\n'
            '[[vm]]\n  size = "shared-cpu-1x"\n  isolation = "sandbox"\n')
    config, _ = parse(text, "iso.toml")
    assert config.vm[0].guest().isolation == "sandbox"
    assert machine_config(config, "app", 1).model_dump(exclude_none=True)["guest"][
        "isolation"] == "sandbox"
    with pytest.raises(ConfigError, match=r"^bad.toml:6: vm.0.isolation: Input should be "
                                          r"'container', 'sandbox' or 'vm'"):
        parse(text.replace('"sandbox"', '"kata"'), "bad.toml")


def test_a_gpu_size_loads_and_placement_refuses_it_where_no_worker_has_one() -> None:
    config, _ = parse('app = "x"\n[build]\n  image = "r.example/x:1"\n[[vm]]\n'
                      '  size = "a100-40gb"\n')
    spec = machine_config(config, "app", 1)
    assert spec.guest is not None
    assert (spec.guest.gpus, spec.guest.gpu_kind, spec.guest.cpus, spec.guest.memory_mb) == (
        1, "a100-pcie-40gb", 8, 32768)
    ask = Ask.for_config(spec)
    no_gpu = Totals(cpus=16, memory_mb=65536, disk_gb=100)
    assert shortfalls(no_gpu, Usage(), ask) == ["gpu: needs 1 a100-pcie-40gb, 0 free"]
    with_gpu = Totals(cpus=16, memory_mb=65536, disk_gb=100, gpus={"a100-pcie-40gb": 1})
    assert shortfalls(with_gpu, Usage(), ask) == []


def test_swap_reaches_init_and_a_size_no_worker_gives_is_one_line_naming_the_key() -> None:
    text = 'app = "x"\nswap_size_mb = 512\n[build]\n  image = "127.0.0.1:5000/x:1"\n'
    config, _ = parse(text, "swap.toml")
    assert machine_config(config, "app", 1).model_dump(exclude_none=True)["init"] == {
        "swap_size_mb": 512}
    with pytest.raises(ConfigError) as caught:
        parse(text.replace("512", "100000"), "swap.toml")
    assert str(caught.value) == ("swap.toml:2: swap_size_mb: Input should be less than or "
                                 "equal to 65536")


STATICS = """app = "x"

[build]
  image = "registry.example/x:1"

[processes]
  web = "serve"
  worker = "work"

[[statics]]
  guest_path = "/app/public"
  url_prefix = "/static"
  index_document = "index.html"
"""


def test_statics_go_on_every_groups_machines_and_none_when_run_as_processes(
        tmp_path: Path) -> None:
    config, warnings = parse(STATICS)
    assert warnings == []
    for group in ("web", "worker"):
        (static,) = machine_config(config, group, 1).statics or []
        assert static.model_dump(exclude_none=True) == {
            "guest_path": "/app/public", "url_prefix": "/static", "index_document": "index.html"}
    path = tmp_path / "fly.toml"
    path.write_text(STATICS.replace('[build]\n  image = "registry.example/x:1"\n', ""))
    processes, _ = load(path)
    assert machine_config(processes, "web", 1).statics is None
    (note,) = unserved_statics(processes, path)
    assert (note.key, note.line) == ("statics.0", 8)
    assert note.message.startswith("not served: an app run as host processes has no image")


def test_a_relative_guest_path_is_an_error_naming_its_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse(STATICS.replace('"/app/public"', '"app/public"'), "fly.toml")
    assert str(err.value).startswith("fly.toml:11: statics.0.guest_path: ")
    assert "must start with '/'" in str(err.value)


def test_metrics_is_kept_in_each_groups_machine_config_as_fly_keeps_it() -> None:
    config, notes = parse('app = "web"\n[build]\nimage = "reg.example/web:1"\n'
                          '[processes]\napp = "serve"\nworker = "work"\n'
                          '[[metrics]]\nport = 9091\npath = "/m"\nprocesses = ["app"]\n'
                          '[[metrics]]\nport = 9092\n', "fly.toml")
    assert notes == []  # acted on now: no "bodega does not scrape" warning
    app = machine_config(config, "app", 1).metrics
    assert app is not None
    assert (app.port, app.path, app.https) == (9091, "/m", False)
    worker = machine_config(config, "worker", 1).metrics
    assert worker is not None
    assert (worker.port, worker.path) == (9092, "/metrics")
    old_style, _ = parse('app = "web"\n[experimental]\nmetrics_port = 9100\n', "fly.toml")
    assert [m.port for m in old_style.metrics] == [9100]
    with pytest.raises(ConfigError):
        parse('app = "web"\n[metrics]\nport = 0\n', "fly.toml")
