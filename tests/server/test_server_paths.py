"""Which store files the server extension lists and accepts (all under the server root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import argus_lab
from argus_lab.faces.server.paths import MAX_DEPTH, StorePathError, find_stores, resolve_store


def test_listing_skips_hidden_deep_and_outside_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "x.duckdb").write_bytes(b"")
    (root / "top.duckdb").write_bytes(b"")
    (root / "notes.txt").write_text("")
    (root / ".ipynb_checkpoints").mkdir()
    (root / ".ipynb_checkpoints" / "hidden.duckdb").write_bytes(b"")
    deep = root.joinpath(*[f"d{i}" for i in range(MAX_DEPTH + 1)])
    deep.mkdir(parents=True)
    (deep / "deep.duckdb").write_bytes(b"")
    (tmp_path / "outside.duckdb").write_bytes(b"")
    (root / "link.duckdb").symlink_to(tmp_path / "outside.duckdb")
    (root / "linkdir").symlink_to(tmp_path)
    assert sorted(s.path for s in find_stores(root)) == ["a/x.duckdb", "top.duckdb"]


def test_resolve_accepts_root_relative_and_refuses_escapes(tmp_path: Path) -> None:
    (tmp_path / "s.duckdb").write_bytes(b"")
    assert resolve_store(tmp_path, "s.duckdb") == (tmp_path / "s.duckdb").resolve()
    assert resolve_store(tmp_path, "/s.duckdb") == (tmp_path / "s.duckdb").resolve()  # rooted at the server root
    for bad in ("../s.duckdb", "sub/../../s.duckdb", "missing.duckdb", "s.duckdb/..", " "):
        with pytest.raises(StorePathError):
            resolve_store(tmp_path, bad)


def test_extension_version_matches_the_python_package() -> None:
    package = json.loads((Path(__file__).parents[2] / "extension" / "package.json").read_text())
    assert package["version"] == argus_lab.__version__
    assert package["jupyterlab"]["outputDir"] == "../argus_lab/labextension"
