"""The scope language: which region instances a request covers.

A scope is a list of clauses separated by ``;`` or whitespace (see ``docs/scopes.md``)::

    decode/*/attn; **/mlp; instances=2:; ranks=0,1; devices=0; streams=7; threads=main

* A clause without ``=`` is a **region glob** on the region path: segments are separated by ``/``, ``*`` matches
  any characters within one segment, ``?`` one character, and a ``**`` segment matches zero or more whole
  segments.  A glob matches the whole path.  Several globs are alternatives; no glob means every region.
* ``instances=`` takes Python-like slices of the per-path instance index (0 = the first instance):
  ``2:`` skips two warm-up instances, ``2:10``, ``::2``, ``5``; several are separated by ``,``.
* ``ranks=``, ``devices=`` and ``streams=`` take non-negative integers or slices, separated by ``,``.
* ``threads=`` takes thread names or numeric thread ids, separated by ``,``.

:meth:`Scope.parse` turns the text into a frozen :class:`Scope`; ``str(scope)`` is its canonical form and parses
back to an equal value.  A malformed scope raises :class:`~argus_lab.errors.ScopeSyntaxError` with a caret under
the bad character and a valid example.  This module is light (standard library only).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from argus_lab.errors import ScopeSyntaxError
from argus_lab.regions import NVTX_DOMAIN

EXAMPLE = "decode/*/attn; instances=2:; ranks=0,1"
"""A valid scope, shown in every syntax error message."""

KEYS: tuple[str, ...] = ("instances", "ranks", "devices", "streams", "threads")
"""The keys of ``key=value`` clauses, in canonical order."""

_NAME_PUNCT = frozenset("_.-+<>#:")
_TOKEN = re.compile(r"\s+|[;=,]|[^\s;=,]+")


def _fail(text: str, pos: int, what: str) -> ScopeSyntaxError:
    shown = re.sub(r"\s", " ", text)
    pos = max(0, min(pos, len(shown)))
    msg = (
        f"malformed scope at column {pos + 1}: {what}\n"
        f"    {shown}\n"
        f"    {' ' * pos}^\n"
        f"a valid scope looks like `{EXAMPLE}` (see docs/scopes.md)"
    )
    return ScopeSyntaxError(msg)


@dataclass(frozen=True)
class IndexRange:
    """A Python-like slice ``start:stop:step`` over non-negative integers (``stop=None``: unbounded)."""

    start: int = 0
    stop: int | None = None
    step: int = 1

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int) or value < self.start:
            return False
        if self.stop is not None and value >= self.stop:
            return False
        return (value - self.start) % self.step == 0

    def __str__(self) -> str:
        if self.step == 1 and self.stop == self.start + 1:
            return str(self.start)
        head = f"{self.start or ''}:{'' if self.stop is None else self.stop}"
        return head if self.step == 1 else f"{head}:{self.step}"


@dataclass(frozen=True)
class IndexSet:
    """A union of :class:`IndexRange` values."""

    ranges: tuple[IndexRange, ...]

    def __contains__(self, value: object) -> bool:
        return any(value in r for r in self.ranges)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.ranges)


@dataclass(frozen=True)
class Scope:
    """Which region instances a request covers; every field left empty means "no restriction".

    Attributes
    ----------
    globs
        Region globs on the region path (alternatives); empty = every region.
    instances, ranks, devices, streams
        Allowed per-path instance indexes, process ranks, device ordinals, stream ids; ``None`` = all.
    threads
        Allowed thread names or decimal thread ids; empty = all.
    """

    globs: tuple[str, ...] = ()
    instances: IndexSet | None = None
    ranks: IndexSet | None = None
    devices: IndexSet | None = None
    streams: IndexSet | None = None
    threads: tuple[str, ...] = ()

    # -- parsing ----------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | Scope | None) -> Scope:
        """Parse scope text (``None`` or ``""`` = everything); a :class:`Scope` is returned unchanged.

        Raises
        ------
        ScopeSyntaxError
            With the column, a caret under the bad character and a valid example.
        """
        if isinstance(text, Scope):
            return text
        if text is None:
            return cls()
        return _Parser(text).parse()

    # -- predicates -------------------------------------------------------------------------------
    def matches_path(self, path: str) -> bool:
        """Whether a region path such as ``decode/layer/attn`` is covered by the globs."""
        if not self.globs:
            return True
        segs = path.split("/")
        return any(glob_match(g, segs) for g in self.globs)

    def matches(
        self,
        path: str,
        instance_index: int | None = None,
        rank: int | None = None,
        device: int | None = None,
        stream: int | None = None,
        thread: int | str | None = None,
        thread_name: str | None = None,
    ) -> bool:
        """Whether a region instance is covered; an argument left ``None`` is not checked.

        ``thread`` may be a thread name or a numeric id; ``thread_name`` adds the name when ``thread`` is the id.
        """
        if not self.matches_path(path):
            return False
        for allowed, value in (
            (self.instances, instance_index),
            (self.ranks, rank),
            (self.devices, device),
            (self.streams, stream),
        ):
            if allowed is not None and value is not None and value not in allowed:
                return False
        if self.threads and (thread is not None or thread_name is not None):
            given = {str(t) for t in (thread, thread_name) if t is not None}
            if not given & set(self.threads):
                return False
        return True

    @property
    def is_everything(self) -> bool:
        """Whether the scope restricts nothing."""
        return self == Scope()

    # -- Nsight Compute ---------------------------------------------------------------------------
    def nvtx_includes(self, domain: str = NVTX_DOMAIN) -> tuple[str, ...]:
        """The ``ncu --nvtx-include`` expressions that select the kernels of the scope's region globs.

        Regions are NVTX push/pop ranges in domain ``argus``, so a path ``outer/inner`` is the expression
        ``argus@outer/inner/``.  ncu matches a push/pop expression anywhere on the range stack, so the
        expressions select a superset of the globs' kernels (the exact scope is applied again when evidence is
        attributed):

        * a glob with ``*`` or ``?`` becomes a ``regex:`` expression with one pattern per range (``*`` -> ``.*``,
          ``?`` -> ``.``; no ``/`` inside a pattern, since ``/`` separates the ranges of the expression);
        * ``**`` cannot be written in ncu's syntax: the glob is cut at its ``**`` segments and the last
          remaining run of segments is used (``**/attn`` -> ``argus@attn/``, ``decode/**`` -> ``argus@decode/``);
        * a glob that is only ``**`` (or no glob at all) needs no filter: the result is ``()``.
        """
        out: list[str] = []
        for glob in self.globs:
            chunks: list[list[str]] = [[]]
            for seg in glob.split("/"):
                if seg == "**":
                    chunks.append([])
                else:
                    chunks[-1].append(seg)
            kept = [c for c in chunks if c]
            if not kept:
                return ()
            segs = kept[-1]
            if any(ch in seg for seg in segs for ch in "*?"):
                expr = "regex:" + domain + "@" + "".join(_segment_regex(s, ".") + "/" for s in segs)
            else:
                expr = domain + "@" + "".join(s + "/" for s in segs)
            if expr not in out:
                out.append(expr)
        return tuple(out)

    # -- text -------------------------------------------------------------------------------------
    def __str__(self) -> str:
        parts = list(self.globs)
        for key in KEYS:
            value = getattr(self, key)
            if key == "threads":
                if value:
                    parts.append(f"threads={','.join(value)}")
            elif value is not None:
                parts.append(f"{key}={value}")
        return "; ".join(parts)


def _segment_regex(seg: str, any_char: str = "[^/]") -> str:
    return "".join(any_char + "*" if ch == "*" else any_char if ch == "?" else re.escape(ch) for ch in seg)


def segment_match(pattern: str, name: str) -> bool:
    """Whether one path segment ``name`` matches a glob segment (``*`` any characters, ``?`` one character).

    Greedy matching that only ever goes back to the last ``*`` (no backtracking regex): at most
    ``len(pattern) * len(name)`` steps, so ``*a*a*a*a*a*a*b`` against a 100-character name is instant.
    """
    return _wildcard(pattern, name, lambda p, c: p == "?" or p == c, "*")


def glob_match(glob: str, segments: list[str]) -> bool:
    """Whether a region path (its ``segments``) matches a whole region glob (``**`` = zero or more segments).

    The same greedy algorithm one level up: a ``**`` segment plays the part of ``*`` over whole segments, and a
    segment pattern matches one segment (:func:`segment_match`); the cost stays polynomial in the path.
    """
    return _wildcard(glob.split("/"), segments, lambda p, c: segment_match(p, c), "**")


def _wildcard(pattern: Sequence[str], items: Sequence[str], one: Callable[[str, str], bool], star: str) -> bool:
    """Wildcard matching of ``items`` against ``pattern`` where ``star`` matches any run of items and every other
    element matches one item by ``one``: the classic two-pointer algorithm (resume after the last star)."""
    p = i = 0
    star_p, star_i = -1, 0
    n, m = len(pattern), len(items)
    while i < m:
        if p < n and pattern[p] != star and one(pattern[p], items[i]):
            p += 1
            i += 1
        elif p < n and pattern[p] == star:
            star_p, star_i = p, i
            p += 1
        elif star_p >= 0:
            star_i += 1
            p, i = star_p + 1, star_i
        else:
            return False
    while p < n and pattern[p] == star:
        p += 1
    return p == n


Kind = Literal["ws", "sep", "eq", "comma", "word"]


class _Parser:
    """A hand-written scanner/parser that remembers columns for error messages."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[Kind, str, int]] = []
        for m in _TOKEN.finditer(text):
            tok = m.group()
            kind: Kind = (
                "ws"
                if tok.isspace()
                else "sep"
                if tok == ";"
                else "eq"
                if tok == "="
                else "comma"
                if tok == ","
                else "word"
            )
            self.tokens.append((kind, tok, m.start()))
        self.i = 0

    def fail(self, pos: int, what: str) -> ScopeSyntaxError:
        return _fail(self.text, pos, what)

    def peek(self, skip_ws: bool = True) -> tuple[Kind, str, int] | None:
        j = self.i
        while j < len(self.tokens) and skip_ws and self.tokens[j][0] == "ws":
            j += 1
        return self.tokens[j] if j < len(self.tokens) else None

    def take(self, skip_ws: bool = True) -> tuple[Kind, str, int] | None:
        while self.i < len(self.tokens) and skip_ws and self.tokens[self.i][0] == "ws":
            self.i += 1
        if self.i >= len(self.tokens):
            return None
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def parse(self) -> Scope:
        globs: list[str] = []
        values: dict[str, object] = {}
        while True:
            tok = self.take()
            if tok is None:
                break
            kind, word, pos = tok
            if kind == "sep":
                continue
            if kind != "word":
                raise self.fail(pos, f"expected a region glob or a key=value clause, found {word!r}")
            nxt = self.peek()
            if nxt is not None and nxt[0] == "eq":
                self.take()
                key = self._key(word, pos)
                if key in values:
                    raise self.fail(pos, f"{key}= is given twice; list every value in one clause: `{key}=0,1`")
                values[key] = self._values(key, pos + len(word))
            else:
                _check_glob(self.text, word, pos)
                if word not in globs:
                    globs.append(word)
            end = self.peek(skip_ws=False)
            if end is not None and end[0] not in ("ws", "sep"):
                hint = (
                    "use `;` or a space between clauses"
                    if end[0] != "comma"
                    else "separate region globs with `;` or a space (commas separate values after `key=`)"
                )
                raise self.fail(end[2], f"unexpected {end[1]!r}; {hint}")
        instances = values.get("instances")
        ranks = values.get("ranks")
        devices = values.get("devices")
        streams = values.get("streams")
        threads = values.get("threads", ())
        assert instances is None or isinstance(instances, IndexSet)
        assert ranks is None or isinstance(ranks, IndexSet)
        assert devices is None or isinstance(devices, IndexSet)
        assert streams is None or isinstance(streams, IndexSet)
        assert isinstance(threads, tuple)
        return Scope(tuple(globs), instances, ranks, devices, streams, threads)

    def _key(self, word: str, pos: int) -> str:
        if word in KEYS:
            return word
        close = difflib.get_close_matches(word, KEYS, n=1, cutoff=0.5)
        hint = f"did you mean `{close[0]}=`? " if close else ""
        raise self.fail(pos, f"unknown key {word!r}; {hint}keys are {', '.join(k + '=' for k in KEYS)}")

    def _values(self, key: str, eq_pos: int) -> IndexSet | tuple[str, ...]:
        items: list[tuple[str, int]] = []
        while True:
            tok = self.peek()
            if tok is None or tok[0] != "word":
                where = tok[2] if tok is not None else len(self.text)
                example = "main" if key == "threads" else "2:" if key == "instances" else "0,1"
                raise self.fail(where, f"{key}= needs a value here, e.g. `{key}={example}`")
            self.take()
            items.append((tok[1], tok[2]))
            nxt = self.peek()
            if nxt is None or nxt[0] != "comma":
                break
            self.take()
        if key == "threads":
            names: list[str] = []
            for word, pos in items:
                for k, ch in enumerate(word):
                    if not (ch.isalnum() or ch in _NAME_PUNCT):
                        raise self.fail(pos + k, f"{ch!r} cannot appear in a thread name")
                if word not in names:
                    names.append(word)
            return tuple(names)
        ranges: list[IndexRange] = []
        for word, pos in items:
            r = self._range(key, word, pos)
            if r not in ranges:
                ranges.append(r)
        return IndexSet(tuple(ranges))

    def _range(self, key: str, word: str, pos: int) -> IndexRange:
        parts = word.split(":")
        if len(parts) > 3:
            col = pos + len(parts[0]) + len(parts[1]) + len(parts[2]) + 2
            raise self.fail(col, f"a slice has at most three parts `start:stop:step`, e.g. `{key}=2:10:2`")
        nums: list[int | None] = []
        col = pos
        for part in parts:
            if part == "":
                nums.append(None)
            else:
                for k, ch in enumerate(part):
                    if not ch.isdigit() or not ch.isascii():
                        what = (
                            "negative indexes are not supported (instances count from 0 in each run)"
                            if ch == "-"
                            else f"{ch!r} is not a digit"
                        )
                        raise self.fail(col + k, f"{what}; {key}= takes integers or slices such as `2:` or `::2`")
                nums.append(int(part))
            col += len(part) + 1
        if len(nums) == 1:
            if nums[0] is None:
                raise self.fail(pos, f"{key}= needs a value here")
            return IndexRange(nums[0], nums[0] + 1, 1)
        start = nums[0] or 0
        stop = nums[1]
        step = nums[2] if len(nums) == 3 and nums[2] is not None else 1
        if step == 0:
            raise self.fail(pos + len(parts[0]) + len(parts[1]) + 2, "a slice step cannot be 0; use 1 or more")
        if stop is not None and stop <= start:
            raise self.fail(pos, f"the slice {word!r} selects nothing (stop must be greater than start)")
        return IndexRange(start, stop, step)


def _check_glob(text: str, glob: str, pos: int) -> None:
    col = pos
    for seg in glob.split("/"):
        if seg == "":
            what = (
                "a region glob cannot start with `/` (paths are relative: `decode/attn`)"
                if col == pos
                else "empty path segment; write `a/b`, `a/*/b` or `a/**/b`"
            )
            raise _fail(text, col, what)
        if "**" in seg and seg != "**":
            raise _fail(text, col + seg.index("**"), "`**` must be a whole segment, as in `**/attn`")
        for k, ch in enumerate(seg):
            if not (ch.isalnum() or ch in _NAME_PUNCT or ch in "*?"):
                raise _fail(
                    text,
                    col + k,
                    f"{ch!r} cannot appear in a region glob (letters, digits, `_.-+<>#:`, `*`, `?`, `**`)",
                )
        col += len(seg) + 1


__all__ = ["EXAMPLE", "KEYS", "IndexRange", "IndexSet", "Scope"]
