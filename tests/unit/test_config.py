import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from reginamq.cli import main
from reginamq.config import DEFAULT_PORT, SettingError, Settings, shard_file_urls


def test_defaults():
    settings = Settings.from_env({})
    assert settings.port == DEFAULT_PORT and settings.database_url is None
    assert settings.workers == max(1, len(os.sched_getaffinity(0)) // 2)


def test_workers_default_to_one_per_two_cores_this_process_may_use(monkeypatch):
    for cores, workers in ((1, 1), (2, 1), (3, 1), (8, 4), (200, 64)):
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid, n=cores: set(range(n)))
        assert Settings.from_env({}).workers == workers
    assert Settings.from_env({"REGINAMQ_WORKERS": "3"}).workers == 3


def test_flags_beat_reginamq_env_which_beats_queen_env():
    env = {"REGINAMQ_PORT": "7000", "PG_HOST": "db.internal", "PG_PASSWORD": "s3cr:t"}
    assert Settings.from_env(env).port == 7000
    assert Settings.from_env(env, port=7100).port == 7100
    assert Settings.from_env(env).database_url == "postgresql://postgres:s3cr%3At@db.internal:5432/postgres"
    env["REGINAMQ_DATABASE_URL"] = "postgresql://x@y/z"
    assert Settings.from_env(env).database_url == "postgresql://x@y/z"


def test_settings_round_trip_through_the_environment():
    settings = Settings(port=7001, workers=3, data_dir=Path("/tmp/x"), database_url="postgresql://a@b/c")
    assert Settings.from_env(settings.to_env()) == settings


def test_default_subscription_mode_is_new_as_on_queen():
    assert Settings().default_subscription_mode == "new"
    assert Settings.from_env({}).default_subscription_mode == "new"


def test_queen_default_subscription_mode_is_honoured_below_reginamq_and_the_flag():
    assert Settings.from_env({"DEFAULT_SUBSCRIPTION_MODE": "all"}).default_subscription_mode == "all"
    env = {"DEFAULT_SUBSCRIPTION_MODE": "all", "REGINAMQ_DEFAULT_SUBSCRIPTION_MODE": "new"}
    assert Settings.from_env(env).default_subscription_mode == "new"
    assert Settings.from_env(env, default_subscription_mode="all").default_subscription_mode == "all"


@pytest.mark.parametrize("raw", ["new", "NEW", " new-only ", "new_only", "NewOnly"])
@pytest.mark.parametrize("variable", ["REGINAMQ_DEFAULT_SUBSCRIPTION_MODE", "DEFAULT_SUBSCRIPTION_MODE"])
def test_queens_spellings_of_new_are_new(variable, raw):
    assert Settings.from_env({variable: raw}).default_subscription_mode == "new"


@pytest.mark.parametrize("variable", ["REGINAMQ_DEFAULT_SUBSCRIPTION_MODE", "DEFAULT_SUBSCRIPTION_MODE"])
def test_all_in_any_case_is_all_and_round_trips(variable):
    settings = Settings.from_env({variable: " All "})
    assert settings.default_subscription_mode == "all"
    assert Settings.from_env(settings.to_env()) == settings


@pytest.mark.parametrize("raw", ["latest", "now", "al", "new only"])
@pytest.mark.parametrize("variable", ["REGINAMQ_DEFAULT_SUBSCRIPTION_MODE", "DEFAULT_SUBSCRIPTION_MODE"])
def test_an_unknown_subscription_mode_is_refused_naming_the_variable(variable, raw):
    with pytest.raises(ValueError, match=f"^{variable} must be all or new"):
        Settings.from_env({variable: raw})


def test_retention_settings_from_the_environment_with_their_ranges():
    settings = Settings.from_env({"REGINAMQ_RETENTION_PARALLELISM": "4", "REGINAMQ_PARTITION_IDLE_DAYS": "0.5"})
    assert (settings.retention_parallelism, settings.partition_idle_days) == (4, 0.5)
    assert Settings.from_env(settings.to_env()) == settings
    assert (Settings().retention_parallelism, Settings().partition_idle_days) == (1, 7.0)
    for name, value in (("REGINAMQ_RETENTION_PARALLELISM", "17"), ("REGINAMQ_RETENTION_PARALLELISM", "0"),
                        ("REGINAMQ_PARTITION_IDLE_DAYS", "-1")):
        with pytest.raises(ValueError, match=name):
            Settings.from_env({name: value})


def test_push_flush_spacing_from_the_environment_with_its_range():
    assert Settings().push_flush_spacing_ms == 10.0
    settings = Settings.from_env({"REGINAMQ_PUSH_FLUSH_SPACING_MS": "20"})
    assert settings.push_flush_spacing_ms == 20.0
    assert Settings.from_env(settings.to_env()) == settings
    for value in ("-1", "1001"):
        with pytest.raises(ValueError, match="REGINAMQ_PUSH_FLUSH_SPACING_MS"):
            Settings.from_env({"REGINAMQ_PUSH_FLUSH_SPACING_MS": value})


def test_the_spool_folder_stays_when_a_member_database_is_added():
    def folder(urls: str) -> Path:
        return Settings(database_url=urls).resolved_spool_dir()

    assert folder("postgresql://a/q postgresql://b/q") == folder("postgresql://a/q postgresql://b/q postgresql://c/q")
    assert folder("postgresql://a/q") != folder("postgresql://b/q")


def test_a_shard_file_lists_one_database_url_a_line_in_order(tmp_path):
    listed = tmp_path / "shards"
    listed.write_text("# the catalog first\npostgresql://a/queue\n\n  postgresql://b/queue  \n#postgresql://c/queue\n")
    assert shard_file_urls(listed) == ["postgresql://a/queue", "postgresql://b/queue"]


@pytest.mark.parametrize("text, complaint", [("# nothing\n\n", "lists no database URL"),
                                             ("postgresql://a/q postgresql://b/q\n", "one database URL a line")])
def test_a_shard_file_that_cannot_be_used_is_refused_naming_it(tmp_path, text, complaint):
    listed = tmp_path / "shards"
    listed.write_text(text)
    with pytest.raises(SettingError, match=complaint) as refused:
        shard_file_urls(listed)
    assert str(listed) in str(refused.value)
    with pytest.raises(SettingError, match="cannot read the shard file"):
        shard_file_urls(tmp_path / "missing")


def test_serve_takes_the_member_databases_from_one_place_only(tmp_path):
    listed = tmp_path / "shards"
    listed.write_text("postgresql://a/queue\n")
    refused = CliRunner().invoke(main, ["serve", "--database-url", "postgresql://b/queue", "--shard-file", str(listed)])
    assert refused.exit_code == 2 and "not both" in refused.output


def test_settings_given_as_python_values_are_checked_as_the_environment_is():
    settings = Settings.checked({}, pool_size=4, push_flush_spacing_ms=5, data_dir="/tmp/x",
                                default_subscription_mode="new-only", log_level="DEBUG")
    assert (settings.pool_size, settings.push_flush_spacing_ms, settings.data_dir) == (4, 5.0, Path("/tmp/x"))
    assert (settings.default_subscription_mode, settings.log_level) == ("new", "debug")
    assert Settings.checked({"REGINAMQ_POOL_SIZE": "7"}).pool_size == 7
    assert Settings.checked({"REGINAMQ_POOL_SIZE": "7"}, pool_size=None).pool_size == 7


@pytest.mark.parametrize(("given", "complaint"), [
    ({"pool_size": 0}, "pool_size must be between 1 and 500, not 0"),
    ({"pool_size": True}, "pool_size must be an integer, not True"),
    ({"pool_size": 2.5}, "pool_size must be an integer, not 2.5"),
    ({"max_body_bytes": 10}, "max_body_bytes must be at least 1024, not 10"),
    ({"maintenance_interval": "5"}, "maintenance_interval must be a number, not '5'"),
    ({"log_level": "loud"}, "log_level must be one of debug, info, warning, error, not 'loud'"),
    ({"default_subscription_mode": "sometimes"}, "default_subscription_mode must be all or new, not 'sometimes'"),
    ({"payload_compression": "zip"}, "payload_compression must be one of auto, lz4, pglz, none, not 'zip'"),
    ({"data_dir": 3}, "data_dir must be a path, not 3"),
    ({"host": 5}, "host must be a string, not 5"),
    ({"pool": 4}, "unknown setting 'pool'"),
])
def test_a_setting_given_as_a_python_value_that_cannot_be_used_is_refused_naming_it(given, complaint):
    with pytest.raises(SettingError) as refused:
        Settings.checked({}, **given)
    assert str(refused.value) == complaint
