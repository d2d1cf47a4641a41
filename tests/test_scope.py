"""The scope language: parsing, canonical text, predicates, ncu NVTX filters and error messages."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from argus_lab.errors import ScopeSyntaxError
from argus_lab.plan.scope import EXAMPLE, IndexRange, IndexSet, Scope

# -- a reference glob matcher written independently of the regex translation -------------------------


def _seg_match(pattern: str, name: str) -> bool:
    if not pattern:
        return not name
    head = pattern[0]
    if head == "*":
        return any(_seg_match(pattern[1:], name[k:]) for k in range(len(name) + 1))
    if not name:
        return False
    return (head == "?" or head == name[0]) and _seg_match(pattern[1:], name[1:])


def _ref_match(globs: list[str], segs: list[str]) -> bool:
    if not globs:
        return not segs
    if globs[0] == "**":
        return any(_ref_match(globs[1:], segs[k:]) for k in range(len(segs) + 1))
    return bool(segs) and _seg_match(globs[0], segs[0]) and _ref_match(globs[1:], segs[1:])


NAMES = st.sampled_from(["a", "b", "ab", "attn", "mlp", "x.y", "l0", "l1"])
GLOB_SEGS = st.one_of(NAMES, st.sampled_from(["*", "?", "a*", "*b", "l?", "**", "*t*"]))
GLOBS = st.lists(GLOB_SEGS, min_size=1, max_size=4).map("/".join)
PATHS = st.lists(NAMES, min_size=1, max_size=5).map("/".join)


@given(GLOBS, PATHS)
def test_glob_matching_agrees_with_a_reference_matcher(glob: str, path: str) -> None:
    scope = Scope.parse(glob)
    assert scope.matches_path(path) == _ref_match(glob.split("/"), path.split("/"))


def _ncu_selects(expr: str, stack: list[str]) -> bool:
    """ncu's push/pop filter as documented: the expression's ranges appear consecutively anywhere on the stack."""
    regex = expr.startswith("regex:")
    body = expr.removeprefix("regex:").split("@", 1)[1]
    parts = body.rstrip("/").split("/")
    for start in range(len(stack) - len(parts) + 1):
        window = stack[start : start + len(parts)]
        if all((re.fullmatch(p, w) is not None) if regex else p == w for p, w in zip(parts, window, strict=True)):
            return True
    return False


@given(GLOBS, PATHS)
def test_nvtx_includes_select_a_superset_of_the_glob(glob: str, path: str) -> None:
    scope = Scope.parse(glob)
    includes = scope.nvtx_includes()
    if scope.matches_path(path):
        assert not includes or any(_ncu_selects(e, path.split("/")) for e in includes)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("decode/layer/attn", ("argus@decode/layer/attn/",)),
        ("decode/*/attn", ("regex:argus@decode/.*/attn/",)),
        ("**/attn", ("argus@attn/",)),
        ("decode/**", ("argus@decode/",)),
        ("decode/**/l?/attn", ("regex:argus@l./attn/",)),
        ("x.y", ("argus@x.y/",)),
        ("x.*", (r"regex:argus@x\..*/",)),
        ("**", ()),
        ("instances=2:", ()),
        ("a b", ("argus@a/", "argus@b/")),
    ],
)
def test_nvtx_includes(text: str, expected: tuple[str, ...]) -> None:
    assert Scope.parse(text).nvtx_includes() == expected


def test_nvtx_includes_other_domain() -> None:
    assert Scope.parse("outer/inner").nvtx_includes("mydomain") == ("mydomain@outer/inner/",)


def test_parse_full_example() -> None:
    s = Scope.parse("decode/*/attn; **/mlp instances=2:,::5 ranks=0,1; devices=0 streams=7 threads=main,123")
    assert s.globs == ("decode/*/attn", "**/mlp")
    assert s.instances == IndexSet((IndexRange(2, None, 1), IndexRange(0, None, 5)))
    assert s.ranks == IndexSet((IndexRange(0, 1), IndexRange(1, 2)))
    assert s.devices == IndexSet((IndexRange(0, 1),))
    assert s.streams == IndexSet((IndexRange(7, 8),))
    assert s.threads == ("main", "123")
    assert str(s) == "decode/*/attn; **/mlp; instances=2:,::5; ranks=0,1; devices=0; streams=7; threads=main,123"


def test_spaces_around_equals_and_commas() -> None:
    assert Scope.parse("ranks = 0, 1 ;instances= 2:") == Scope.parse("ranks=0,1 instances=2:")


@pytest.mark.parametrize("text", ["", "   ", ";;", None])
def test_empty_scope_is_everything(text: str | None) -> None:
    s = Scope.parse(text)
    assert s.is_everything
    assert str(s) == ""
    assert s.matches("any/path", 0, 3, 1, 9, "worker")


def test_parse_passes_a_scope_through() -> None:
    s = Scope.parse("a")
    assert Scope.parse(s) is s


def test_matches_each_dimension() -> None:
    s = Scope.parse("decode/*/attn instances=2:10:2 ranks=1 devices=0,2 streams=7 threads=main")
    assert s.matches("decode/l0/attn", 2, 1, 0, 7, "main")
    assert not s.matches("decode/l0/mlp", 2, 1, 0, 7, "main")
    assert not s.matches("decode/l0/attn", 3, 1, 0, 7, "main")
    assert not s.matches("decode/l0/attn", 10, 1, 0, 7, "main")
    assert not s.matches("decode/l0/attn", 2, 0, 0, 7, "main")
    assert not s.matches("decode/l0/attn", 2, 1, 1, 7, "main")
    assert not s.matches("decode/l0/attn", 2, 1, 2, 8, "main")
    assert not s.matches("decode/l0/attn", 2, 1, 2, 7, "worker")
    assert s.matches("decode/l0/attn", 2, 1, 2, 7, 140001, thread_name="main")
    # unknown dimensions are not checked
    assert s.matches("decode/l0/attn")


def test_numeric_thread_id() -> None:
    s = Scope.parse("threads=140001")
    assert s.matches("a", thread=140001)
    assert not s.matches("a", thread=140002)


@given(
    st.integers(0, 30),
    st.one_of(st.none(), st.integers(1, 40)),
    st.integers(1, 5),
    st.integers(0, 60),
)
def test_index_range_behaves_like_python_range(start: int, stop: int | None, step: int, value: int) -> None:
    if stop is not None and stop <= start:
        return
    r = IndexRange(start, stop, step)
    assert (value in r) == (value in range(start, 10**6 if stop is None else stop, step))
    assert Scope.parse(f"instances={r}").instances == IndexSet((r,))


RANGES = st.builds(
    lambda a, n, s: IndexRange(a, None if n == 0 else a + n, s), st.integers(0, 9), st.integers(0, 9), st.integers(1, 3)
)
INDEXSETS = st.one_of(
    st.none(), st.lists(RANGES, min_size=1, max_size=3, unique=True).map(lambda r: IndexSet(tuple(r)))
)
SCOPES = st.builds(
    Scope,
    st.lists(GLOBS, max_size=3, unique=True).map(tuple),
    INDEXSETS,
    INDEXSETS,
    INDEXSETS,
    INDEXSETS,
    st.lists(st.sampled_from(["main", "worker-1", "7"]), max_size=2, unique=True).map(tuple),
)


@settings(max_examples=200)
@given(SCOPES)
def test_canonical_text_round_trips(scope: Scope) -> None:
    text = str(scope)
    assert Scope.parse(text) == scope
    assert str(Scope.parse(text)) == text


# -- malformed scopes -------------------------------------------------------------------------------


def _caret_column(message: str) -> int:
    lines = message.splitlines()
    caret = next(ln for ln in lines if ln.strip() == "^")
    return caret.index("^") - 4


@pytest.mark.parametrize(
    ("text", "column", "phrase"),
    [
        ("decode//attn", 7, "empty path segment"),
        ("/decode", 0, "cannot start with `/`"),
        ("decode/", 7, "empty path segment"),
        ("de$code", 2, "'$' cannot appear in a region glob"),
        ("ab**/x", 2, "`**` must be a whole segment"),
        ("inst=2", 0, "did you mean `instances=`"),
        ("colour=red", 0, "unknown key 'colour'"),
        ("instances=-1", 10, "negative indexes are not supported"),
        ("instances=2:x", 12, "'x' is not a digit"),
        ("instances=1:2:3:4", 15, "at most three parts"),
        ("instances=1::0", 13, "step cannot be 0"),
        ("instances=5:3", 10, "selects nothing"),
        ("ranks=", 6, "ranks= needs a value"),
        ("ranks=0 ranks=1", 8, "given twice"),
        ("a,b", 1, "separate region globs"),
        ("= a", 0, "expected a region glob or a key=value clause"),
        ("threads=ma!n", 10, "'!' cannot appear in a thread name"),
    ],
)
def test_malformed_scope_points_at_the_bad_character(text: str, column: int, phrase: str) -> None:
    with pytest.raises(ScopeSyntaxError) as info:
        Scope.parse(text)
    message = str(info.value)
    assert phrase in message
    assert f"column {column + 1}" in message
    assert _caret_column(message) == column
    assert f"    {text}" in message
    assert EXAMPLE in message
    Scope.parse(EXAMPLE)  # the example shown is valid


def test_newlines_are_shown_as_spaces_so_the_caret_lines_up() -> None:
    with pytest.raises(ScopeSyntaxError) as info:
        Scope.parse("a\n$")
    assert "    a $" in str(info.value)
    assert _caret_column(str(info.value)) == 2
