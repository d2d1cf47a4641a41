"""Device regions without a GPU: names and identity, the static marker check, and the decoder on SYNTHETIC
buffers (pairing, nesting, times, per-SM figures, tail imbalance, and every misuse message with its fix)."""

from __future__ import annotations

import numpy as np
import pytest

from argus_lab.backends.device.decode import DeviceBufferError, decode
from argus_lab.device import region_code, regions
from argus_lab.errors import RegionMisuseError
from tests.device_reference import summarize
from tests.device_synth import build

PHASES = regions("tile", "load", "mma", "epilogue", module="tests.kernels")


def _tile(t: int) -> list[tuple[str, bool, int]]:
    return [("tile", False, t), ("load", False, t + 10), ("load", True, t + 30), ("mma", False, t + 30),
            ("mma", True, t + 90), ("tile", True, t + 100)]  # fmt: skip


def test_region_codes_are_stable_and_identity_is_the_device_kind() -> None:
    assert region_code("load") == region_code("load") != region_code("mma")
    assert 0 <= region_code("a-very-long-region-name") < 2**31
    r = PHASES.region("load")
    assert (r.kind, r.module, r.name) == ("device", "tests.kernels", "load")
    assert r.region_id == regions("load", module="tests.kernels").region("load").region_id


@pytest.mark.parametrize(
    ("names", "fix"),
    [((), "declare at least one"), (("a/b",), "nest regions instead"), (("",), "non-empty string"),
     (("x", "x"), "declare each name once")],
)  # fmt: skip
def test_bad_declarations_name_the_fix(names: tuple[str, ...], fix: str) -> None:
    with pytest.raises(RegionMisuseError, match=fix):
        regions(*names)


def test_unknown_name_in_the_table_names_the_declaration_to_add() -> None:
    with pytest.raises(RegionMisuseError, match=r"regions\('tile', 'load', 'mma', 'epilogue', 'lod'\)"):
        PHASES.code("lod")


def test_static_check_finds_undeclared_names_and_unbalanced_markers() -> None:
    class Kernel:  # stands for a @triton.jit function: the check reads only its source text
        __name__ = "k"
        src = (
            "def k(probe):\n"
            "    c = dm.begin(probe)\n"
            "    c = dm.enter(probe, c, 'load')\n"
            "    c = dm.enter(probe, c, 'lod')\n"
            "    c = dm.exit(probe, c, 'lod')\n"
            "    c = dm.enter(probe, c, name)\n"
            "    dm.end(probe, c)\n"
        )

    with pytest.raises(RegionMisuseError) as err:
        PHASES.check_kernel(Kernel())
    text = str(err.value)
    assert "'lod' is not declared" in text
    assert "region 'load' has 1 enter() and 0 exit()" in text
    assert "needs the region name as a string literal" in text


def test_decoder_pairs_nested_regions_with_times_and_sm() -> None:
    """SYNTHETIC: two CTAs on two SMs, two tiles each; the rows carry SM, depth, sequence and durations."""
    buf = build([(0, 3, _tile(0) + _tile(200)), (1, 7, _tile(0) + _tile(300))])
    d = decode(buf, PHASES, launch=4)
    assert d.problems == ()
    assert len(d.intervals) == 12
    cols = d.columns()
    sel = (cols["region"] == "mma") & (cols["cta"] == 1)
    assert cols["seq"][sel].tolist() == [0, 1]
    assert cols["depth"][sel].tolist() == [1, 1]
    assert cols["sm"][sel].tolist() == [7, 7]
    np.testing.assert_allclose(cols["dur_ns"][sel], [60.0, 60.0])  # from cycles at the program's measured rate
    assert (cols["t_end_ns"][sel] - cols["t_start_ns"][sel]).tolist() == [60, 60]
    assert set(cols["launch"].tolist()) == {4}


def test_decoder_unwraps_the_32_bit_cycle_counter() -> None:
    """SYNTHETIC: a region longer than 2**32 cycles (at 4 cycles/ns) still gets its full duration."""
    long = 1_200_000_000  # ns; 4.8e9 cycles > 2**32
    buf = build([(0, 0, [("load", False, 0), ("load", True, long)])], cycles_per_ns=4)
    d = decode(buf, PHASES)
    assert int(d.intervals.clk_end[0] - d.intervals.clk_start[0]) == 4 * long
    np.testing.assert_allclose(d.intervals.dur_ns, [long])


def test_summary_gives_count_time_per_cta_busy_and_tail() -> None:
    """SYNTHETIC: SM 7 runs one tile more than SM 3: the tail imbalance is the extra tile's span."""
    buf = build([(0, 3, _tile(0)), (1, 7, _tile(0) + _tile(100)), (2, 5, _tile(0))])
    f = summarize(decode(buf, PHASES))
    mma = next(r for r in f.regions if r.region == "mma")
    assert (mma.count, mma.ctas) == (4, 3)
    assert mma.time_per_cta_median_ns == pytest.approx(60.0)
    assert mma.time_per_cta_max_ns == pytest.approx(120.0)
    assert f.sms.sm.tolist() == [3, 5, 7]
    assert f.sms.busy_ns.tolist() == [200, 200, 300]
    assert f.tail_imbalance_ns == pytest.approx(100.0)
    np.testing.assert_allclose(f.sms.region_ns["mma"], [60, 60, 120])


@pytest.mark.parametrize(
    ("events", "fix"),
    [
        ([("load", True, 5)], r"exit\('load'\) at event 0 has no open region; put `dm.enter"),
        ([("load", False, 0), ("mma", False, 5), ("load", True, 9), ("mma", True, 12)],
         r"closes 'mma' \(entered at event 1\); exit regions in the reverse order"),
        ([("load", False, 0), ("load", True, 5), ("mma", False, 6)], r"entered and never exited; every `dm.enter"),
    ],
)  # fmt: skip
def test_misuse_in_the_buffer_is_explained(events: list[tuple[str, bool, int]], fix: str) -> None:
    """SYNTHETIC: malformed marker sequences raise with the fix; strict=False keeps the well-formed rows."""
    buf = build([(0, 0, events), (1, 1, _tile(0))])
    with pytest.raises(DeviceBufferError, match=fix):
        decode(buf, PHASES)
    kept = decode(buf, PHASES, strict=False)
    assert int((kept.intervals.cta == 1).sum()) == 3
    assert len(kept.problems) == 1


def test_buffer_too_small_reports_the_needed_size_and_keeps_what_fits() -> None:
    """SYNTHETIC: 12 events into a slot of 8: the message asks for events_per_cta >= 12."""
    buf = build([(0, 0, _tile(0) + _tile(200))], events_per_slot=8)
    with pytest.raises(DeviceBufferError, match=r"allocate the probe with events_per_cta >= 12"):
        decode(buf, PHASES)
    d = decode(buf, PHASES, strict=False)
    assert sorted(d.region_names()) == ["load", "mma", "tile"]  # the second tile's open regions are cut off
    assert int(d.programs.dropped[0]) == 4


def test_grid_larger_than_the_probe_and_undeclared_codes_are_reported() -> None:
    """SYNTHETIC: the overflow flag and a region name the table does not hold."""
    buf = build([(0, 0, [("other", False, 0), ("other", True, 5)])], grid_overflow=True)
    with pytest.raises(DeviceBufferError) as err:
        decode(buf, PHASES)
    assert "one slot per program of the launch grid" in str(err.value)
    assert "add the kernel's region names to argus_lab.device.regions" in str(err.value)


def test_unfinished_program_is_reported_and_its_written_events_kept() -> None:
    """SYNTHETIC: a CTA that never reached dm.end (no count written)."""
    buf = build([(0, 0, _tile(0))], finished=False)
    with pytest.raises(DeviceBufferError, match=r"never dm.end: call `dm.end\(probe, c\)`"):
        decode(buf, PHASES)
    assert len(decode(buf, PHASES, strict=False).intervals) == 3


def test_not_a_probe_buffer_names_the_allocator() -> None:
    with pytest.raises(DeviceBufferError, match=r"ProbeBuffer\.allocate"):
        decode(np.zeros(64, dtype=np.int64), PHASES)
