"""``argus_lab/config.py`` is the one place environment variables are declared and read: every ``ARGUS_*`` name the
package mentions is declared there with its default, no other module reads one from the environment itself, and a
value is read when asked for (unset: the default)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import argus_lab
from argus_lab import config

PACKAGE = Path(argus_lab.__file__).resolve().parent
SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "labextension" not in p.parts)
READ = re.compile(r"""(environ\.get\(|getenv\(|environ\[|env\.get\()\s*["'](ARGUS_[A-Z0-9_]+)""")


def test_every_argus_variable_the_package_names_is_declared_in_config() -> None:
    named = {m for p in SOURCES for m in re.findall(r"\bARGUS_[A-Z0-9_]+\b", p.read_text())}
    assert named, "the scan found no ARGUS_ name at all"
    assert named - set(config.VARIABLES) == set()


def test_no_module_but_config_reads_an_argus_variable_from_the_environment() -> None:
    direct = [
        f"{p.relative_to(PACKAGE)}: {m.group(0)}"
        for p in SOURCES
        if p.name != "config.py"
        for m in READ.finditer(p.read_text())
    ]
    assert direct == [], "read these through argus_lab.config.get/value:\n" + "\n".join(direct)


def test_a_variable_is_read_when_asked_with_its_default_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARGUS_NVTX", raising=False)
    assert config.get(config.ARGUS_NVTX) == "1"
    assert config.value(config.ARGUS_NVTX) is None
    monkeypatch.setenv("ARGUS_NVTX", "0")
    assert config.get(config.ARGUS_NVTX) == "0"
    assert config.get(config.ARGUS_CLOCK_SYNC, {"ARGUS_CLOCK_SYNC": "0"}) == "0"
    with pytest.raises(KeyError, match=r"declare it in argus_lab/config\.py"):
        config.get("ARGUS_NOT_A_VARIABLE")


def test_the_synthetic_direct_read_is_caught() -> None:
    """SYNTHETIC source: the pattern the second test scans for matches the ways a module could read a variable."""
    for line in (
        'os.environ.get("ARGUS_X")',
        "os.getenv('ARGUS_X')",
        'os.environ["ARGUS_X"]',
        'env.get("ARGUS_X", "1")',
    ):
        assert READ.search(line), line
