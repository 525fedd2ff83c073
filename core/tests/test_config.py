"""`.txconfig` loading: search order, precedence, typed run options, errors."""
from __future__ import annotations

import io

import pytest

from tx import config
from tx.config import run_options
from tx.specs import runopts


@pytest.fixture
def opts() -> runopts:
    o = runopts()
    o.add("log_dir", type_=str, help="where logs go")
    o.add("prepend_cwd", type_=bool, help="cwd first", default=False)
    o.add("tags", type_=list, help="tags")
    o.add("env", type_=dict, help="env")
    o.add("queue", type_=str, help="queue", required=True)
    return o


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    monkeypatch.delenv(config.ENV_TXCONFIG, raising=False)
    return home, proj


def test_project_file_wins_over_home(dirs, opts):
    home, proj = dirs
    (home / ".txconfig").write_text("[local_cwd]\nlog_dir = /home-logs\nqueue = q1\n")
    (proj / ".txconfig").write_text("[local_cwd]\nlog_dir = /proj-logs\n")
    cfg = run_options.apply("local_cwd", {}, opts, dirs=[str(home), str(proj)])
    assert cfg == {"log_dir": "/proj-logs", "queue": "q1"}


def test_explicit_cfg_wins_and_values_are_typed(dirs, opts):
    home, proj = dirs
    (proj / ".txconfig").write_text(
        "[local_cwd]\nlog_dir = /x\nprepend_cwd = True\ntags = a;b\nenv = A:1;B:2\nqueue = None\n"
    )
    cfg = run_options.apply("local_cwd", {"log_dir": "/cli"}, opts, dirs=[str(proj)])
    assert cfg == {"log_dir": "/cli", "prepend_cwd": True, "tags": ["a", "b"], "env": {"A": "1", "B": "2"}}


def test_unknown_key_is_an_error_with_suggestion(dirs, opts):
    _, proj = dirs
    (proj / ".txconfig").write_text("[local_cwd]\nlog_dri = /x\n")
    with pytest.raises(config.ConfigError, match="unknown run option 'log_dri'.*did you mean 'log_dir'"):
        run_options.apply("local_cwd", {}, opts, dirs=[str(proj)])


def test_bad_bool_is_an_error(dirs, opts):
    _, proj = dirs
    (proj / ".txconfig").write_text("[local_cwd]\nprepend_cwd = maybe\n")
    with pytest.raises(config.ConfigError, match="prepend_cwd"):
        run_options.apply("local_cwd", {}, opts, dirs=[str(proj)])


def test_txconfig_env_names_the_only_file(dirs, tmp_path, monkeypatch):
    home, proj = dirs
    (proj / ".txconfig").write_text("[cli:run]\nscheduler = a\n")
    other = tmp_path / "other.ini"
    other.write_text("[cli:run]\nscheduler = b\n")
    monkeypatch.setenv(config.ENV_TXCONFIG, str(other))
    assert config.get_config("cli", "run", "scheduler", dirs=[str(proj)]) == "b"
    monkeypatch.setenv(config.ENV_TXCONFIG, str(tmp_path / "missing.ini"))
    with pytest.raises(config.ConfigError, match="no such file"):
        config.find_configs([str(proj)])


def test_sections_and_case_sensitive_keys(dirs):
    _, proj = dirs
    (proj / ".txconfig").write_text(
        "[component:dist.ddp]\nj = 2x4\nEnv = A=B\n[component:utils.echo]\nmsg = hi\n"
    )
    secs = config.load_sections("component", dirs=[str(proj)])
    assert secs == {"dist.ddp": {"j": "2x4", "Env": "A=B"}, "utils.echo": {"msg": "hi"}}


def test_malformed_file_is_one_line_error(dirs):
    _, proj = dirs
    (proj / ".txconfig").write_text("no section header\n")
    with pytest.raises(config.ConfigError) as ei:
        config.load_sections("cli", dirs=[str(proj)])
    assert "\n" not in str(ei.value) and ".txconfig" in str(ei.value)


def test_dump_template(opts):
    buf = io.StringIO()
    run_options.dump(buf, {"sched": opts}, required_only=True)
    assert buf.getvalue() == "[sched]\nqueue = #FIXME: (str) queue\n\n"
    buf = io.StringIO()
    run_options.dump(buf, {"sched": opts}, required_only=False)
    text = buf.getvalue()
    assert "prepend_cwd = False\n" in text and "log_dir = None\n" in text


def test_search_walks_up_from_cwd_then_home(tmp_path):
    home = tmp_path / "home"
    sub = tmp_path / "proj" / "a" / "b"
    sub.mkdir(parents=True)
    home.mkdir()
    dirs = config.search_dirs(cwd=str(sub), home=str(home))
    assert dirs[:4] == [str(sub), str(sub.parent), str(tmp_path / "proj"), str(tmp_path)]
    assert dirs[-2:] == ["/", str(home)]
    # a home that is a parent of the working directory is searched once, where the walk finds it
    dirs = config.search_dirs(cwd=str(sub), home=str(tmp_path / "proj"))
    assert dirs.count(str(tmp_path / "proj")) == 1 and dirs[-1] == "/"


def test_nearest_file_wins_from_a_subdirectory(tmp_path, monkeypatch, opts):
    """A project's .txconfig applies from its subdirectories; the nearest file wins key by
    key, and the home file fills what no project file sets."""
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    sub = proj / "src" / "pkg"
    sub.mkdir(parents=True)
    home.mkdir()
    (home / ".txconfig").write_text("[local_cwd]\nlog_dir = /home-logs\nqueue = home-q\ntags = h\n")
    (proj / ".txconfig").write_text("[local_cwd]\nlog_dir = /proj-logs\nqueue = proj-q\n")
    (proj / "src" / ".txconfig").write_text("[local_cwd]\nlog_dir = /src-logs\n")
    monkeypatch.delenv(config.ENV_TXCONFIG, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(sub)
    assert config.find_configs() == [
        str(home / ".txconfig"), str(proj / ".txconfig"), str(proj / "src" / ".txconfig")
    ]
    cfg = run_options.apply("local_cwd", {}, opts)
    assert cfg == {"log_dir": "/src-logs", "queue": "proj-q", "tags": ["h"]}
    # outside the project only the home file applies
    monkeypatch.chdir(tmp_path)
    assert config.find_configs() == [str(home / ".txconfig")]
    assert run_options.apply("local_cwd", {}, opts)["log_dir"] == "/home-logs"


def test_home_inside_the_walk_keeps_its_place(tmp_path, monkeypatch):
    """When home is a parent of the working directory, a project file below it still wins."""
    home = tmp_path / "home"
    proj = home / "proj"
    proj.mkdir(parents=True)
    (home / ".txconfig").write_text("[cli:run]\nscheduler = from-home\ncomponent = c\n")
    (proj / ".txconfig").write_text("[cli:run]\nscheduler = from-proj\n")
    monkeypatch.delenv(config.ENV_TXCONFIG, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(proj)
    assert config.find_configs() == [str(home / ".txconfig"), str(proj / ".txconfig")]
    assert config.get_configs("cli", "run") == {"scheduler": "from-proj", "component": "c"}


def test_template_has_every_option_commented_and_parses(opts, tmp_path, monkeypatch):
    buf = io.StringIO()
    run_options.template(buf, {"sched": opts, "other": runopts()})
    text = buf.getvalue()
    assert "# prepend_cwd (bool, default: False): cwd first\n# prepend_cwd = False\n" in text
    assert "# queue (str, required): queue\n# queue =\n" in text
    assert "# tags (List[str], default: unset): tags\n# tags =\n" in text
    assert "[cli:run]\n" in text and "[cli:gc]\n" in text and "[other]\n" in text
    path = tmp_path / ".txconfig"
    path.write_text(text)
    monkeypatch.delenv(config.ENV_TXCONFIG, raising=False)
    # as written it sets nothing; uncommenting a line sets that option
    assert run_options.apply("sched", {}, opts, dirs=[str(tmp_path)]) == {}
    path.write_text(text.replace("# prepend_cwd = False", "prepend_cwd = True"))
    assert run_options.apply("sched", {}, opts, dirs=[str(tmp_path)]) == {"prepend_cwd": True}
    path.write_text(text.replace("# keep = 7d", "keep = 2d"))
    assert config.parse_duration(config.get_config(*config.GC_SECTION, config.GC_KEEP, dirs=[str(tmp_path)])) == 172800


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("30m", 1800), ("1.5h", 5400),
                                          ("7d", 604800), ("2w", 1209600), (" 0 ", 0)])
def test_parse_duration(text, seconds):
    assert config.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7 days", "-1d", "d", "1y"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="bad duration"):
        config.parse_duration(text)


def test_checkpoint_urls_quote_as_urllib_does():
    """The checkpoint URL's percent-encoding (tx.config.recovery, without urllib.parse) is
    urllib.parse.quote(safe="")'s, byte for byte."""
    from urllib.parse import quote

    from tx.config.recovery import percent_encode

    for text in ["train", "a/b", "a b%c", "x~y_z-1.2", "ünï©ødé", "日本", "?#&=+;:@$,!*'()[]{}|\\^`\"<>", "\x00\x7f"]:
        assert percent_encode(text) == quote(text, safe=""), text
