"""``argus_lab.mark_modules``: regions around a model's submodules without forward hooks (a real torch model on the
CPU, measured into a real DuckDB store)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import argus_lab
from argus_lab.errors import RegionMisuseError
from argus_lab.regions.modules import marked_modules
from argus_lab.store import Store

torch = pytest.importorskip("torch")
nn = torch.nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.Linear(8, 8)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x: Any) -> Any:
        return self.mlp(self.attn(x)) + x


class Model(nn.Module):
    def __init__(self, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(layers))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x


PATTERNS = {"layers.*.attn": "attn", "layers.*.mlp": "mlp"}


def test_marked_submodules_are_regions_nested_in_the_callers_region(tmp_path: Path) -> None:
    model, x = Model(), torch.randn(4, 8)
    with torch.no_grad():
        expected = model(x)
    marks = argus_lab.mark_modules(model, PATTERNS)
    assert len(marks) == 6 and dict(marked_modules(model)) == marks.names
    assert marks.names["layers.0.attn"] == "attn" and marks.names["layers.2.mlp"] == "mlp"
    assert not model.layers[0].attn._forward_hooks and not model.layers[0].attn._forward_pre_hooks  # no hooks

    def step() -> None:
        with argus_lab.region("step"), torch.no_grad():
            assert torch.equal(model(x), expected)  # the module computes what it did unmarked

    store = tmp_path / "marks.duckdb"
    argus_lab.measure(step, "host.wall", repeat=4, warmup=1, store=str(store), progress=False)
    rows = Store(store).rows(
        "SELECT path, count(*), count(DISTINCT parent_instance_id) FROM region_instances GROUP BY path ORDER BY path"
    )
    assert rows == [("step", 5, 1), ("step/attn", 15, 5), ("step/mlp", 15, 5)]  # 3 layers x 5 steps, each in its step
    (module,) = Store(store).rows("SELECT DISTINCT module FROM regions WHERE name = 'attn'")
    assert module == ("torch.nn.modules.linear",)  # the identity: the name in the class's module (nn.Linear)
    marks.remove()
    assert not list(marked_modules(model)) and "forward" not in model.layers[0].attn.__dict__
    marks.remove()  # twice is harmless


def test_remove_restores_a_forward_the_user_had_set_and_the_with_block_unmarks() -> None:
    model = Model(1)
    own = model.layers[0].attn.forward
    model.layers[0].attn.forward = own  # an instance attribute of the user's own
    with argus_lab.mark_modules(model, {"layers.0.attn": "attn"}):
        assert model.layers[0].attn.__dict__["forward"] is not own
    assert model.layers[0].attn.__dict__["forward"] is own


def test_an_exception_in_a_marked_module_closes_its_region_and_propagates() -> None:
    model = Model(1)
    marks = argus_lab.mark_modules(model, {"layers.0.attn": "attn"})
    with pytest.raises(RuntimeError), argus_lab.region("outer"):
        model(torch.randn(4, 9))  # wrong width: the Linear raises inside the marked forward
    assert argus_lab.current_path() == ""  # nothing left open
    with argus_lab.region("again"):  # and the next region opens and closes normally
        model(torch.randn(4, 8))
    marks.remove()


def test_mistakes_are_refused_with_the_fix() -> None:
    model = Model(2)
    with pytest.raises(RegionMisuseError, match=r"no submodule of Model matches 'layers\.\*\.attention'.*layers\.0"):
        argus_lab.mark_modules(model, {"layers.*.attn": "attn", "layers.*.attention": "x"})
    assert not list(marked_modules(model))  # nothing half marked
    marks = argus_lab.mark_modules(model, PATTERNS)
    with pytest.raises(RegionMisuseError, match=r"marked already .*call remove\(\)"):
        argus_lab.mark_modules(model, {"layers.0.attn": "attn"})
    marks.remove()
    with pytest.raises(RegionMisuseError, match=r"needs a torch\.nn\.Module"):
        argus_lab.mark_modules([model], PATTERNS)
    with pytest.raises(RegionMisuseError, match="contains '/'"):
        argus_lab.mark_modules(model, {"layers.*.attn": "a/b"})
    with pytest.raises(RegionMisuseError, match="dict of module-name patterns"):
        argus_lab.mark_modules(model, {})


def test_a_module_matched_by_two_patterns_takes_the_first() -> None:
    model = Model(1)
    with argus_lab.mark_modules(model, {"layers.0.*": "inner", "layers.0.attn": "attn"}) as marks:
        assert marks.names["layers.0.attn"] == "inner"
