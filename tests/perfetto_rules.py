"""How Perfetto's trace processor imports a Chrome-trace JSON file, modelled for the export tests.

Perfetto's processor does not run in CI (its Python package downloads the binary on first use; this machine and the
H200 machine have no network; ``scripts/build-trace-processor`` builds one from source, and
``tests/test_perfetto_processor.py`` checks this replay against what that binary read), so the tests replay an
exported trace through the rules its JSON importer applies, as its source states them (``src/trace_processor``:
``importers/json/json_trace_tokenizer.cc``, ``json_trace_parser.cc``, ``importers/common/slice_tracker.cc``,
``flow_tracker.cc``, ``sorter/trace_sorter.h``):

* ``pid`` and ``tid`` are read as unsigned 32-bit numbers: a value outside that range becomes 0; a ``tid`` of 0 with
  a non-zero ``pid`` is taken as the ``pid``;
* events are sorted by timestamp; a trace with complete (``X``) events is sorted with a tie rule: at one timestamp
  ``E`` events come first, then ``X`` events, longest first, then every other event (flows, counters, instants, and
  zero-length ``X`` events) in file order;
* each thread track keeps a stack of open slices.  Before a complete event is placed, the slices that ended before
  it (or at its start, unless both are zero-length) are closed.  A slice that starts inside the open one and ends
  after it "partially overlaps": Perfetto drops it (older releases) or moves it to an overflow track with an import
  error (``slice_spill_overlapping_complete_event``); either way it is reported here;
* a flow start (``s``) binds to the topmost open slice of its track when it is read, a flow end with
  ``"bp": "e"`` likewise; without a slice on the track the flow is lost (``flow_no_enclosing_slice``).  Slices stay
  on the stack until the next slice of their track closes them, so a flow end read before its own slice binds to
  the slice before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UINT32 = 1 << 32
_LAST = 1 << 62  # sort key of events that are neither E nor X


@dataclass
class Imported:
    """What the replay found: slices per track, flow bindings, and every problem Perfetto would report."""

    slices: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Slice number (position of its X event in the file) -> the event."""
    flow_start: dict[Any, int] = field(default_factory=dict)
    """Flow id -> the slice its ``s`` event bound to."""
    flow_end: dict[Any, int] = field(default_factory=dict)
    """Flow id -> the slice its ``f`` event bound to."""
    overlapping: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    """(slice, the open slice it partially overlaps): dropped or spilled by Perfetto."""
    unbound_flows: list[dict[str, Any]] = field(default_factory=list)
    out_of_range_ids: list[dict[str, Any]] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return len(self.overlapping) + len(self.unbound_flows) + len(self.out_of_range_ids)


def _ns(value: Any) -> int:
    """A ``ts``/``dur`` in microseconds as written (three decimals) -> integer ns."""
    whole, _, frac = f"{value}".partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3]) if frac else int(whole) * 1000


def _track(event: dict[str, Any], found: Imported) -> tuple[int, int]:
    pid, tid = int(event.get("pid", 0)), int(event.get("tid", 0))
    if not (0 <= pid < UINT32 and 0 <= tid < UINT32):
        found.out_of_range_ids.append(event)
        pid = pid if 0 <= pid < UINT32 else 0
        tid = tid if 0 <= tid < UINT32 else 0
    if tid == 0 and pid != 0:
        tid = pid
    return pid, tid


def replay(doc: dict[str, Any]) -> Imported:
    """Replay the ``traceEvents`` of ``doc`` as Perfetto's JSON importer orders and nests them."""
    events = doc["traceEvents"]
    has_x = any(e.get("ph") == "X" for e in events)
    order = []
    for i, e in enumerate(events):
        if e.get("ph") == "M":
            continue
        ts = _ns(e["ts"])
        key = _LAST
        if has_x and e["ph"] == "E":
            key = -_LAST
        elif has_x and e["ph"] == "X":
            key = _LAST - _ns(e["dur"])
        order.append((ts, key, i))
    order.sort()
    found = Imported()
    stacks: dict[tuple[int, int], list[tuple[int, int, int]]] = {}  # track -> [(start, dur, slice number)]
    for ts, _, i in order:
        e = events[i]
        track = _track(e, found)
        stack = stacks.setdefault(track, [])
        if e["ph"] == "X":
            dur = _ns(e["dur"])
            while stack:
                start, d, _ = stack[-1]
                end = start + d
                if end < ts or (end == ts and not (d == 0 and dur == 0)):
                    stack.pop()
                    continue
                break
            if stack and ts < stack[-1][0] + stack[-1][1] < ts + dur:
                found.overlapping.append((e, events[stack[-1][2]]))
                continue
            stack.append((ts, dur, i))
            found.slices[i] = e
        elif e["ph"] in ("s", "f"):
            fid = (e.get("cat"), e.get("name"), e["id"])
            binds = e["ph"] == "s" or e.get("bp") == "e"
            if not binds:
                continue  # bound to the next slice of the track; argus_lab's export always writes "bp": "e"
            if not stack:
                found.unbound_flows.append(e)
                continue
            (found.flow_start if e["ph"] == "s" else found.flow_end)[fid] = stack[-1][2]
    return found
