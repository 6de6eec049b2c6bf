"""The config search path: argv forms, order, shadowing, pkg:// and Hydra's own behaviour."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sweeps import ConfigError, compose
from sweeps.config.overrides import add_builtin_searchpath, searchpath_override
from sweeps.config.paths import CONF_DIR, find_conf_dir
from sweeps.config.search_path import Entry, SearchPath, builtin
from sweeps.config.search_path_args import for_compose, from_argv

BUILTIN = f"file://{CONF_DIR}"
SP = "hydra.searchpath"


def experiment_yaml(name: str) -> str:
    return textwrap.dedent(f"""\
        # @package _global_
        # python -m sweeps --config-dir conf +experiment={name}
        experiment:
          name: {name}
          trainable: trainables.digits:train_mlp
          metric: val_acc
          mode: max
          params: {{lr: 0.05}}
          search_space:
            lr: interval(0.01, 0.1)
        """)


@pytest.fixture
def user(tmp_path: Path) -> Path:
    """``tmp/u`` (mine, digits) and ``tmp/v`` (other, digits); cwd is ``tmp``."""
    for root, names in (("u", ["mine", "digits"]), ("v", ["other", "digits"])):
        (tmp_path / root / "experiment").mkdir(parents=True)
        for name in names:
            text = experiment_yaml(f"{root}_{name}" if name == "digits" else name)
            (tmp_path / root / "experiment" / f"{name}.yaml").write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], [("built-in", BUILTIN)]),
     (["+experiment=mine"], [("built-in", BUILTIN)]),
     (["--config-dir", "u", "+experiment=mine"], [("--config-dir", "file://{t}/u"),
                                                   ("built-in", BUILTIN)]),
     (["-cd", "u"], [("--config-dir", "file://{t}/u"), ("built-in", BUILTIN)]),
     (["--config-dir=u"], [("--config-dir", "file://{t}/u"), ("built-in", BUILTIN)]),
     ([f"{SP}=[file://v,pkg://x.conf]"], [("hydra.searchpath", "file://v"),
                                           ("hydra.searchpath", "pkg://x.conf"),
                                           ("built-in", BUILTIN)]),
     # --config-dir comes before hydra.searchpath entries whatever the argv order
     ([f"{SP}=[file://v]", "-cd", "u"], [("--config-dir", "file://{t}/u"),
                                          ("hydra.searchpath", "file://v"),
                                          ("built-in", BUILTIN)]),
     # Hydra reads only the FIRST override whose key is exactly hydra.searchpath
     ([f"{SP}=[file://v]", f"{SP}=[file://u]"], [("hydra.searchpath", "file://v"),
                                                  ("built-in", BUILTIN)]),
     ([f"+{SP}=[file://v]"], [("built-in", BUILTIN)]),
     (["--help"], [("built-in", BUILTIN)]),  # Hydra's own flags pass through
     ],
)
def test_search_path_from_argv(user: Path, argv: list[str],
                               expected: list[tuple[str, str]]) -> None:
    entries = from_argv(argv).entries
    assert [(e.label, e.path) for e in entries] == [
        (label, path.format(t=user)) for label, path in expected]


@pytest.mark.parametrize(("argv", "message"), [
    (["--cfg"], "command line: 'argument --cfg/-c: expected one argument' (Hydra's parser)"),
    (["-cd", "u", "+experiment=mine", "--dry-run"],
     "command line: '--dry-run' is not a flag Hydra knows"),
])
def test_argv_hydra_refuses_is_named_in_one_line(user: Path, argv: list[str],
                                                 message: str) -> None:
    """Not the search path without the --config-dir Hydra's parser gave up on (an unknown
    flag then read as "experiment not found in the built-in conf/")."""
    with pytest.raises(ConfigError) as info:
        from_argv(argv)
    assert str(info.value).startswith(message), str(info.value)
    assert "sweep.dry_run=true" in str(info.value)


def test_missing_config_dir_names_the_path_and_the_fix(user: Path) -> None:
    with pytest.raises(ConfigError) as info:
        from_argv(["--config-dir", "nope", "+experiment=mine"])
    assert str(info.value) == (
        f"--config-dir: '{user / 'nope'}' is not a directory; pass the directory that holds "
        "your experiment/ folder, e.g. --config-dir ./conf for ./conf/experiment/NAME.yaml")


@pytest.mark.parametrize(
    ("argv", "name", "winner"),
    [(["-cd", "u"], "digits", "u"), ([f"{SP}=[file://v]"], "digits", "v"),
     (["-cd", "u", f"{SP}=[file://v]"], "digits", "u"),
     ([f"{SP}=[file://v,file://u]"], "digits", "v"), ([f"{SP}=[file://u,v]"], "digits", "u"),
     (["-cd", "v"], "mine", None), (["-cd", "u"], "digits_cnn", "conf"),
     ([], "digits", "conf")],
)
def test_the_first_entry_that_has_the_file_wins(user: Path, argv: list[str], name: str,
                                                winner: str | None) -> None:
    source = from_argv(argv).find(name)
    if winner is None:
        assert source is None
        return
    assert source is not None
    root = CONF_DIR if winner == "conf" else user / winner
    assert source.file == str(root / "experiment" / f"{name}.yaml")


@pytest.mark.parametrize(
    ("argv", "name", "experiment_name"),
    [(["-cd", "u"], "digits", "u_digits"), ([f"{SP}=[file://v]"], "digits", "v_digits"),
     (["-cd", "u", f"{SP}=[file://v]"], "digits", "u_digits"), ([], "digits", "digits")],
)
def test_hydra_composes_the_file_the_search_path_names(user: Path, argv: list[str], name: str,
                                                       experiment_name: str) -> None:
    config_dir = "u" if "-cd" in argv else None
    overrides = [a for a in argv if a.startswith(SP)]
    cfg = compose(name, overrides, config_dir=config_dir)
    assert cfg.experiment.name == experiment_name
    assert for_compose(config_dir, overrides).find(name) == from_argv(argv).find(name)


def test_plain_hydra_would_let_the_built_in_win(user: Path) -> None:
    """Why sweeps appends its conf to hydra.searchpath: as Hydra's ``main`` source it wins."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from sweeps.config.schema import register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = hydra_compose("sweep", [f"{SP}=[file://{user / 'u'}]", "+experiment=digits"],
                            return_hydra_config=True)
    providers = [s.provider for s in cfg.hydra.runtime.config_sources]
    assert providers == ["hydra", "main", "hydra.searchpath in command-line", "schema"]
    assert cfg.experiment.name == "digits", "Hydra changed its search-path order"


def test_pkg_entries_are_read_like_hydra_reads_them(user: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = user / "myproj" / "conf" / "experiment"
    pkg.mkdir(parents=True)
    for init in (user / "myproj" / "__init__.py", pkg.parent / "__init__.py"):
        init.write_text("")
    (pkg / "digits.yaml").write_text(experiment_yaml("pkg_digits"))
    monkeypatch.syspath_prepend(str(user))
    sp = from_argv([f"{SP}=[pkg://myproj.conf,pkg://not_there.conf]"])
    assert [e.exists() for e in sp.entries] == [True, False, True]
    assert sp.find("digits").file == str(pkg / "digits.yaml")
    assert sp.entries[0].where == f"pkg://myproj.conf at {pkg.parent}"
    assert compose("digits", [f"{SP}=[pkg://myproj.conf]"]).experiment.name == "pkg_digits"


def test_listing_marks_shadowed_experiments(user: Path) -> None:
    text = from_argv(["-cd", "u", f"{SP}=[file://v]"]).listing()
    assert ("experiment: digits, digits_cnn, digits_data, digits_lightning, digits_multiobjective, "
            "hf_text, hf_vit, mine, other") in text
    assert f"1. {user / 'u'} (--config-dir)" in text
    assert f"     digits  (shadowed by {user / 'u'}, --config-dir)" in text
    assert f"3. {CONF_DIR} (built-in)" in text and "scheduler: asha, none" in text


def test_missing_entries_are_marked(user: Path) -> None:
    sp = SearchPath((Entry("hydra.searchpath in command-line", "file://gone"), builtin()))
    assert sp.describe() == f"{user / 'gone'} (hydra.searchpath, missing), {CONF_DIR} (built-in)"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["+experiment=x"], [searchpath_override([BUILTIN]), "+experiment=x"]),
     ([], [searchpath_override([BUILTIN])]),
     (["--info"], [searchpath_override([BUILTIN]), "--info"]),  # not --info's value
     (["-cd", "u", "+experiment=x", "a=1"], ["-cd", "u", searchpath_override([BUILTIN]),
                                             "+experiment=x", "a=1"]),
     (["+experiment=x", f"{SP}=[file://v,'pkg://a.b']", "--cfg", "job"],
      ["+experiment=x", searchpath_override(["file://v", "pkg://a.b", BUILTIN]), "--cfg", "job"]),
     ],
)
def test_builtin_conf_goes_last_in_hydra_searchpath(argv: list[str],
                                                    expected: list[str]) -> None:
    assert add_builtin_searchpath(argv) == expected


@pytest.mark.parametrize(("path", "override"),
                         [("file:///a b", "hydra.searchpath=['file:///a b']"),
                          ("file:///it's", r"hydra.searchpath=['file:///it\'s']"),
                          ("file:///a,b]", "hydra.searchpath=['file:///a,b]']")])
def test_paths_survive_hydra_quoting(path: str, override: str) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    assert searchpath_override([path]) == override
    assert OverridesParser.create().parse_override(override).value() == [path]


def test_conf_dir_is_found_installed_or_in_a_checkout(tmp_path: Path) -> None:
    installed = tmp_path / "site" / "sweeps"
    (installed / "conf").mkdir(parents=True)
    (installed / "conf" / "sweep.yaml").write_text("{}")
    assert find_conf_dir(installed) == installed / "conf"
    assert find_conf_dir(CONF_DIR.parent / "sweeps") == CONF_DIR
    with pytest.raises(ConfigError, match="has no sweep.yaml"):
        find_conf_dir(tmp_path / "empty" / "sweeps")
