"""Mutants of a suspect (``agent_engine.agent.mutants``): each operator, the order, the splice, the plan."""

from __future__ import annotations

import ast

import pytest

from agent_engine.agent.mutants import mutants, planned
from agent_engine.agent.rewrite_answers import Suspect

pytestmark = pytest.mark.core

METHOD = '''    def pop(self, items, child, n):
        """Pop the smallest."""
        if child + 1 < n and items[child] < items[child + 1]:
            child += 1
        return items[child:]'''


def texts(source: str, neighbours: tuple[str, ...] = ()) -> list[str]:
    return [m.text for m in mutants(source, neighbours)]


def test_every_mutant_parses_differs_and_appears_once() -> None:
    found = mutants(METHOD)
    assert found and len({m.text for m in found}) == len(found)
    for m in found:
        assert m.text != METHOD
        ast.parse("if True:\n" + m.text)


def test_edits_splice_one_place_and_keep_the_rest_byte_for_byte() -> None:
    source = "def f(a, b):  # keep this comment\n    return a <= b  # and this one\n"
    assert "def f(a, b):  # keep this comment\n    return a < b  # and this one\n" in texts(source)
    for text in texts(source):
        head, line, tail = text.split("\n")
        assert (head, tail) == ("def f(a, b):  # keep this comment", "")
        assert line.startswith("    return ") and line.endswith("  # and this one")


def returned(source: str) -> set[str]:
    """What each mutant of a one-line function returns."""
    return {text.split("\n")[1].strip().removeprefix("return ") for text in texts(source)}


def test_comparisons_are_negated_and_operators_changed_within_their_group() -> None:
    assert {"a < b", "a >= b", "a > b"} <= returned("def f(a, b):\n    return a <= b\n")
    assert {"a // b | a << 2", "a * b | a << 2", "a % b & a << 2", "a % b ^ a << 2",
            "a % b | a >> 2"} <= returned("def f(a, b):\n    return a % b | a << 2\n")
    assert "def f(n):\n    n **= 2\n" in texts("def f(n):\n    n *= 2\n")


def test_comparisons_are_loosened_tightened_and_flipped() -> None:
    found = texts(METHOD)
    assert METHOD.replace("items[child] < items[child + 1]", "items[child] > items[child + 1]") in found
    assert METHOD.replace("child + 1 < n", "child + 1 <= n") in found
    assert texts("def f(x, s):\n    return x not in s\n")[0] == "def f(x, s):\n    return x in s\n"


def test_constants_indices_slices_and_range_bounds_move_by_one() -> None:
    found = texts(METHOD)
    assert METHOD.replace("child += 1", "child += 2") in found
    assert METHOD.replace("items[child:]", "items[child + 1:]") in found
    assert "def f(n):\n    return list(range(n + 1))\n" in texts("def f(n):\n    return list(range(n))\n")
    assert "def f(s, i, j):\n    return s[(i + j) - 1]\n" in texts("def f(s, i, j):\n    return s[i + j]\n")


def test_conditions_are_negated_and_if_becomes_while() -> None:
    source = "def f(n, p):\n    if not n % p:\n        n //= p\n    return n\n"
    found = texts(source)
    assert "def f(n, p):\n    while not n % p:\n        n //= p\n    return n\n" in found
    assert "def f(n, p):\n    if n % p:\n        n //= p\n    return n\n" in found
    assert "def f(a, b):\n    if a and b:\n        return 1\n" in texts("def f(a, b):\n    if a or b:\n        return 1\n")


def test_an_except_clause_is_widened_to_a_sibling_error() -> None:
    source = "def get(seq, i, default):\n    try:\n        return seq[i]\n    except KeyError:\n        return default\n"
    assert source.replace("except KeyError:", "except (KeyError, IndexError):") in texts(source)


def test_a_sibling_method_the_function_calls_replaces_a_call() -> None:
    source = ("def parse_sum(self):\n    left = self.parse_product()\n    while self.peek() == '+':\n"
              "        right = self.parse_sum()\n        left = left + right\n    return left\n")
    found = texts(source)
    assert source.replace("right = self.parse_sum()", "right = self.parse_product()") in found
    assert source.replace("right = self.parse_sum()", "right = self.peek()") in found
    assert all("self.parse_product(1)" not in t for t in found)


def test_truncation_becomes_rounding() -> None:
    source = "def to_byte(p):\n    return int(p / 100 * 255)\n"
    assert "def to_byte(p):\n    return int(round(p / 100 * 255))\n" in texts(source)


def test_a_variable_on_the_same_line_replaces_another() -> None:
    source = "def key(kwargs):\n    return tuple(type(k) for k, v in sorted(kwargs))\n"
    assert "def key(kwargs):\n    return tuple(type(v) for k, v in sorted(kwargs))\n" in texts(source)


def test_a_statement_is_deleted_or_copied_from_a_neighbour() -> None:
    get = ("    def get(self, key):\n        node = self.map[key]\n        self.hits += 1\n"
           "        return node.value")
    put = "    def put(self, key, node):\n        self.map[key] = node\n        self._move_to_front(node)"
    found = mutants(get, (put,))
    copied = ("    def get(self, key):\n        node = self.map[key]\n        self.hits += 1\n"
              "        self._move_to_front(node)\n        return node.value")
    assert copied in [m.text for m in found]
    assert "    def get(self, key):\n        node = self.map[key]\n        return node.value" in [m.text for m in found]
    tiers = [m.tier for m in found]
    assert tiers == sorted(tiers) and found[[m.text for m in found].index(copied)].tier == 3


def test_a_value_never_read_is_given_to_its_namesake() -> None:
    source = ("def scan(s, end):\n    uni, end = read(s, end)\n    if s[end:end + 2] == 'u':\n"
              "        uni2, end2 = read(s, end + 2)\n        uni = uni + uni2\n    return uni, end\n")
    want = source.replace("        uni = uni + uni2\n", "        uni = uni + uni2\n        end = end2\n")
    found = mutants(source)
    assert want in [m.text for m in found]
    assert next(m for m in found if m.text == want).tier == 1


def test_a_value_never_read_is_put_back_into_each_later_return() -> None:
    source = ("def det(m):\n    rows, sign, pivots = eliminate(m)\n    product = 1\n    for i in pivots:\n"
              "        product *= rows[i][i]\n    return product\n")
    found = {m.text: m for m in mutants(source)}
    factor = source.replace("return product", "return sign * product")
    assert factor in found and found[factor].tier == 1
    assert source.replace("return product", "return product + sign") in found
    assert not any("return _ *" in t for t in texts("def f(x):\n    y, _ = g(x)\n    return y\n"))
    after = texts("def f(x):\n    return x\n    y = x\n")  # a return before the value exists is left alone
    assert after and not any("y *" in t or "+ y" in t for t in after)


def test_operands_arguments_statements_and_chained_calls_trade_places() -> None:
    assert "def f(a, b):\n    return b - a\n" in texts("def f(a, b):\n    return a - b\n")
    joined = {m.text: m.tier for m in mutants("def f(a, b):\n    return a + b + 1\n")}
    assert joined["def f(a, b):\n    return b + a + 1\n"] == 2  # text or sequences joined: one tier later
    assert not any(t.endswith("1 + (a + b)\n") for t in joined)  # a number added stays where it is
    assert "def f(a, b):\n    return b and a\n" in texts("def f(a, b):\n    return a and b\n")
    assert texts("def f(x):\n    return x % 'got %s'\n")[0] == "def f(x):\n    return 'got %s' % x\n"
    assert "def f(a, b, c):\n    return c - (a + b)\n" in texts("def f(a, b, c):\n    return (a + b) - c\n")
    assert "def f(a, b):\n    return g(b, a)\n" in texts("def f(a, b):\n    return g(a, b)\n")
    unescape = "def unescape(s):\n    return s.replace('~0', '~').replace('~1', '/')\n"
    assert "def unescape(s):\n    return s.replace('~1', '/').replace('~0', '~')\n" in texts(unescape)
    source = "def f(x):\n    y = x + 1\n    x = 2\n    return x + y\n"
    assert "def f(x):\n    x = 2\n    y = x + 1\n    return x + y\n" in texts(source)


def test_two_variables_trade_places_on_a_line_and_a_slice_step_reverses() -> None:
    clamp = "def clamp(x, lo, hi):\n    return max(hi, min(lo, x))\n"
    swapped = {m.text: m for m in mutants(clamp)}["def clamp(x, lo, hi):\n    return max(lo, min(hi, x))\n"]
    assert swapped.tier == 2 and swapped.what == "line 2: `hi` and `lo` swapped"
    assert "def r(s):\n    return s[::-1]\n" in texts("def r(s):\n    return s[::1]\n")
    assert "def r(s):\n    return s[1::2]\n" in texts("def r(s):\n    return s[1::-2]\n")
    assert "def r(s, n):\n    return s[::-(n - 1)]\n" in texts("def r(s, n):\n    return s[::n - 1]\n")


def test_type_annotations_are_never_mutated() -> None:
    source = "def f(x: int | None, n: int = 2) -> list[int] | None:\n    y: int | str = n\n    return [x, y]\n"
    for text in texts(source):
        assert "x: int | None, n: int" in text and "-> list[int] | None" in text
        assert "y: int | str" in text or "y:" not in text  # the statement deleted whole, or kept as it was


def test_shuffled_statements_are_put_back_in_data_order() -> None:
    shuffled = ("def total(xs, start):\n    for x in xs:\n        acc += x  # add\n    return acc\n"
                '    """Sum."""\n    # start here\n    acc = start\n')
    ordered = ('def total(xs, start):\n    """Sum."""\n    # start here\n    acc = start\n    for x in xs:\n'
               "        acc += x  # add\n    return acc\n")
    found = {m.text: m for m in mutants(shuffled)}
    assert found[ordered].tier == 1 and found[ordered].what == "line 2: statements put in data order"
    assert not any("data order" in m.what for m in mutants(ordered))  # an order the data allows is kept


def test_a_local_read_before_its_assignment_gets_a_first_value() -> None:
    source = 'def f(xs):\n    """Doc."""\n    for x in xs:\n        total += x\n        seen.append(x)\n    return total\n'
    firsts = {m.what: m for m in mutants(source) if m.what.endswith(" first")}
    assert set(firsts) == {'line 3: `total = 0` first', 'line 3: `total = []` first', 'line 3: `total = ""` first',
                           'line 3: `total = None` first'}  # ``seen`` is no local: a NameError, not unbound
    assert firsts['line 3: `total = 0` first'].text.split("\n")[1:4] == ['    """Doc."""', "    total = 0",
                                                                          "    for x in xs:"]
    assert all(m.tier == 1 for m in firsts.values())
    listed = "def g(xs):\n    for x in xs:\n        out.append(x)\n    out = sorted(out)\n    return out\n"
    assert [m.what for m in mutants(listed) if m.what.endswith(" first")] == ["line 2: `out = []` first"]


def test_a_lost_name_the_function_never_binds_gets_a_first_value() -> None:
    source = "def f(xs):\n    for x in xs:\n        seen.append(x)\n    return seen\n"
    assert not [m for m in mutants(source) if m.what.endswith(" first")]  # a module's name, maybe
    lost = [m.what for m in mutants(source, lost=("seen",)) if m.what.endswith(" first")]
    assert lost == ["line 2: `seen = []` first"]  # the sandbox found no binding of it in its reach


def test_a_lost_assignment_is_borrowed_from_a_neighbour_or_a_sibling_attribute() -> None:
    method = ("    def unlink(self):\n        next = self.next\n\n        prev.next = next\n"
              "        next.prev = prev\n")
    borrowed = {m.what: m for m in mutants(method, lost=("prev",)) if m.what.endswith("borrowed")}
    assert list(borrowed) == ["line 4: `prev = self.prev` borrowed"] and borrowed[
        "line 4: `prev = self.prev` borrowed"].tier == 1
    assert borrowed["line 4: `prev = self.prev` borrowed"].text.split("\n")[3:5] == [
        "        prev = self.prev", "        prev.next = next"]
    encode = "def encode_method(obj, out):\n    if markerid in seen:\n        raise ValueError(obj)\n    out(obj)\n"
    sibling = "def encode_list(lst, out):\n    markerid = id(lst)\n    seen[markerid] = lst\n    out(lst)\n"
    got = [m.what for m in mutants(encode, (sibling,), lost=("markerid",)) if m.what.endswith("borrowed")]
    assert got == ["line 2: `markerid = id(obj)` borrowed"]  # the sibling's parameter read as ours
    helper = "def expand(value):\n    tuples, items = split_pairs(value)\n    return tuples or items\n"
    broken = "def label(value):\n    if tuples:\n        return items\n    return value\n"
    got = [m.what for m in mutants(broken, (helper,), lost=("tuples", "items")) if m.what.endswith("borrowed")]
    assert got == ["line 2: `tuples, items = split_pairs(value)` borrowed",  # the neighbour's module name
                   "line 3: `tuples, items = split_pairs(value)` borrowed"]  # before each lost name's first read
    assert not [m for m in mutants(broken, (helper,)) if m.what.endswith("borrowed")]  # nothing lost: none


def test_a_lost_name_borrows_its_siblings_assignment_with_the_differing_word_swapped() -> None:
    source = ("def partition(pred, iterable):\n    true_queue, false_queue = [], []\n"
              "    append_false = false_queue.append\n    for x in iterable:\n"
              "        (append_true if pred(x) else append_false)(x)\n    return true_queue, false_queue\n")
    got = [m.what for m in mutants(source, lost=("append_true",)) if m.what.endswith("borrowed")]
    assert got == ["line 5: `append_true = true_queue.append` borrowed"]


def test_a_constructor_keeps_the_argument_nothing_reads() -> None:
    init = ('    def __init__(self, msg, doc):\n        """Doc."""\n        self.doc = doc\n'
            "        self.lines = doc.count('x')\n")
    kept = [m for m in mutants(init) if m.what.endswith("kept")]
    assert {m.what for m in kept} == {"line 3: `self.msg = msg` kept", "line 4: `self.msg = msg` kept"}
    assert all(m.tier == 1 for m in kept) and len(kept) == 3  # before each statement and after the last
    assert not [m for m in mutants("def f(msg, doc):\n    return doc\n") if m.what.endswith("kept")]  # no method
    other = init.replace("__init__", "update")
    assert not [m for m in mutants(other) if m.what.endswith("kept")]  # a method's unused argument is common


def test_text_that_does_not_parse_gives_no_mutants_and_a_module_file_gives_some() -> None:
    assert mutants("def f(:\n    pass") == []
    assert mutants("") == []
    assert "LIMIT = 11\n" in texts("LIMIT = 10\n")


def test_a_non_ascii_line_is_spliced_at_character_positions() -> None:
    source = "def f(s):\n    return 'é' + s[1:] if len(s) > 1 else s\n"
    assert "def f(s):\n    return 'é' + s[1:] if len(s) >= 1 else s\n" in texts(source)


def test_the_plan_goes_tier_by_tier_then_suspect_by_suspect_within_its_limit() -> None:
    first = Suspect("m.py", "f", 1, 2, "def f(a, b):\n    return a < b")
    second = Suspect("m.py", "g", 4, 6, "def g(x):\n    y = x\n    return x == 1")
    plan = planned([first, second], 1000)
    tiers = [m.tier for _, m in plan]
    assert tiers == sorted(tiers)
    tier_one = [s.name for s, m in plan if m.tier == 1]
    assert tier_one == sorted(tier_one) and {"f", "g"} <= set(tier_one)
    assert len(planned([first, second], 3)) == 3 and planned([], 10) == []


def test_suspects_past_the_leading_ones_count_one_tier_later() -> None:
    first = Suspect("m.py", "f", 1, 4, "def f(a, b):\n    log(a)\n    c = a\n    return a < b")
    extra = Suspect("n.py", "g", 1, 2, "def g(x):\n    return x == 1")
    plan = planned([first, extra], 1000, leading=1)
    order = [(s.name, m.tier) for s, m in plan]
    last_leader_tier_two = max(i for i, (name, tier) in enumerate(order) if name == "f" and tier == 2)
    first_extra = min(i for i, (name, _) in enumerate(order) if name == "g")
    assert first_extra > last_leader_tier_two
    assert order.index(("f", 3)) > first_extra
