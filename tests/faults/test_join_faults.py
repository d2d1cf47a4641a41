"""The join ends whatever the stored rows say (issue 16, item 1).

A store whose parent links form a cycle (damaged, merged wrongly, or written by a foreign tool) made the recursive
ancestors query of the join run forever, holding the store's lock, with memory growing.  The rows are edited by
hand here (SYNTHETIC links over a real measurement); the join runs in a separate process with a time limit, so a
join that loops fails the test instead of hanging the suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from faultkit import cli, python

import argus_lab
from argus_lab.store import Store


def _measured(path: Path) -> dict[str, int]:
    """A real measurement of a -> b -> c and d (one repetition); the instance id of each path."""

    def work() -> None:
        with argus_lab.region("a"), argus_lab.region("b"), argus_lab.region("c"):
            pass
        with argus_lab.region("d"):
            pass

    argus_lab.measure(work, signals="host.wall", repeat=1, warmup=0, store=str(path))
    rows = Store(path).rows("SELECT path, instance_id FROM region_instances")
    return {p.split("/")[-1]: int(i) for p, i in rows}


def _join_in_a_process(path: Path) -> str:
    code = f"""
    import argus_lab
    from argus_lab.app.measure import join_runs
    from argus_lab.store import Store
    store = Store({str(path)!r})
    join_runs(store, every=True)
    print("\\n".join(argus_lab.Report(store).coverage()))
    """
    proc = python(code, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize(
    ("links", "members"),
    [
        ({"a": "b"}, {"a", "b"}),  # a -> b -> a
        ({"a": "a"}, {"a"}),  # a region instance that is its own parent
        ({"a": "c"}, {"a", "b", "c"}),  # a -> c -> b -> a, with nothing else touched
        ({"d": "d", "a": "c"}, {"a", "b", "c", "d"}),  # two cycles in one run
    ],
)
def test_a_join_over_parent_links_that_form_a_cycle_ends_and_says_so(
    store_path: Path, links: dict[str, str], members: set[str]
) -> None:
    ids = _measured(store_path)
    store = Store(store_path)
    for child, parent in links.items():  # SYNTHETIC: damaged parent links
        store.execute(
            "UPDATE region_instances SET parent_instance_id = ? WHERE instance_id = ?", [ids[parent], ids[child]]
        )
    coverage = _join_in_a_process(store_path)
    assert "the stored rows form a cycle" in coverage
    assert f"{len(members)} region instance(s)" in coverage
    # every instance still has its values, and the instances outside the cycles keep their nesting
    assert store.rows("SELECT count(DISTINCT instance_id) FROM instance_values WHERE signal = 'host.wall'") == [(4,)]
    show = cli("show", "--store", str(store_path))
    assert show.returncode == 0, show.stderr[-2000:]
    assert "form a cycle" in show.stdout


def test_links_out_of_time_order_without_a_cycle_are_kept(store_path: Path) -> None:
    """SYNTHETIC: an importer may number a parent after its child; the join keeps such a nesting as it is."""
    ids = _measured(store_path)
    store = Store(store_path)
    big = 10_000  # give b an id larger than its child c's (a suspect, not a cycle)
    store.execute("UPDATE region_instances SET instance_id = ? WHERE instance_id = ?", [big, ids["b"]])
    store.execute("UPDATE metrics SET instance_id = ? WHERE instance_id = ?", [big, ids["b"]])
    store.execute("UPDATE region_instances SET parent_instance_id = ? WHERE parent_instance_id = ?", [big, ids["b"]])
    store.execute("UPDATE region_instances SET start_ns = (SELECT start_ns FROM region_instances WHERE path = 'a/b/c')"
                  " WHERE path = 'a/b'")  # fmt: skip
    coverage = _join_in_a_process(store_path)
    assert "cycle" not in coverage
    rows = dict(
        store.rows(
            "SELECT i.path, v.inclusive - v.exclusive FROM instance_values v JOIN region_instances i "
            "USING (run_id, instance_id) WHERE v.signal = 'host.wall'"
        )
    )
    assert rows["a/b"] > 0  # b still contains c
    assert rows["a"] > 0
