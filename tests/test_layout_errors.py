"""Bad inputs raise the right exception type with a message that says what is wrong."""

import pytest

from cute_gemm import layout as cl
from cute_gemm.layout import (
    Layout, Swizzle, _, complement, composition, crd2idx, idx2crd, logical_divide, make_layout,
    mode, size, tile_to_shape, to_latex, to_svg, to_svg_tv, zipped_divide)


@pytest.mark.parametrize("text, words", [
    ("(8,(2,2):(2", ["expected ',' or ')'", "position 8", "'(8,(2,2):(2'", "got ':'"]),
    ("abc", ["expected an integer, '_' or '('", "position 0", "got 'a'"]),
    ("", ["position 0", "end of input"]),
    ("(1,2):(3)", ["not congruent"]),
    ("((1,2)", ["expected ',' or ')'", "position 6", "end of input"]),
    ("(1,2)):(3,4)", ["expected ':' or end of input", "position 5"]),
    ("(1,2):(3,4) x", ["expected end of input", "position 12", "got 'x'"]),
    ("(1,,2)", ["position 3", "got ','"]),
    ("(1,2):", ["position 6", "end of input"]),
    ("(2,-)", ["expected a digit", "position 4"]),
    ("99999999999999999999", ["does not fit in 64 bits"]),
    ("(2,_):(1,2)", ["`_` is not allowed"]),
])
def test_parse_errors(text, words):
    with pytest.raises(ValueError) as e:
        Layout(text)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_parse_int_tuple_errors():
    assert cl.parse_int_tuple(" ( 8 , ( -2 , _ ) ) ") == (8, (-2, _))
    with pytest.raises(ValueError, match="expected end of input at position 1"):
        cl.parse_int_tuple("8:1")


def test_non_congruent_shape_stride():
    with pytest.raises(ValueError, match="not congruent"):
        Layout((2, 3), (1,))
    with pytest.raises(ValueError, match="not congruent"):
        Layout((2, 3), (1, (2, 3)))
    with pytest.raises(ValueError, match="not congruent"):
        Layout(4, (1, 4))


@pytest.mark.parametrize("shape", [(0, 3), (2, -3), 0])
def test_non_positive_shape(shape):
    with pytest.raises(ValueError, match="shape entries must be positive"):
        Layout(shape)


@pytest.mark.parametrize("bad, name", [
    ((2.0, 3), "float"), ((2, None), "NoneType"), ((2, True), "bool"), ({2: 3}, "dict"),
    ((2, _), "Underscore"),
])
def test_bad_shape_types(bad, name):
    with pytest.raises(TypeError) as e:
        Layout(bad)
    msg = str(e.value)
    assert "Layout: shape must be an int or a nested tuple of ints" in msg and name in msg


def test_bad_stride_and_mixed_string():
    with pytest.raises(TypeError, match="Layout: stride must be"):
        Layout((2, 3), (1, 2.5))
    with pytest.raises(TypeError, match="stride must be None when the layout is given as a string"):
        Layout("(2,3)", (1, 2))


def test_values_beyond_int64():
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        Layout(2 ** 70)
    with pytest.raises(ValueError, match="too large"):
        Layout((2 ** 40, 2 ** 40))


def test_index_out_of_range():
    L = Layout((2, 3))
    with pytest.raises(IndexError, match="index 6 out of range for a layout of size 6"):
        L(6)
    with pytest.raises(IndexError, match="out of range"):
        L(-1)
    with pytest.raises(IndexError, match="index 10 out of range"):
        idx2crd(10, (2, 3))


def test_coordinate_out_of_range():
    L = Layout((2, (3, 2)))
    with pytest.raises(IndexError, match="coordinate 2 out of range for a mode of size 2"):
        L(2, 0)
    with pytest.raises(IndexError, match="coordinate 6 out of range for a mode of size 6"):
        L(0, 6)
    with pytest.raises(IndexError, match="coordinate 3 out of range"):
        L(0, (3, 0))
    with pytest.raises(IndexError):
        L(5, _)


def test_wrong_coordinate_rank():
    L = Layout((2, (3, 2)))
    for crd in [(0, 0, 0), (0, (1, 1, 1)), ((0, 1), 0)]:
        with pytest.raises(ValueError, match="does not match the shape"):
            L(crd)
    with pytest.raises(ValueError, match="does not match the shape"):
        L(0, 0, 0)
    with pytest.raises(ValueError, match="does not match the shape"):
        Layout(8)((3,))
    with pytest.raises(ValueError, match="does not match the shape"):
        crd2idx((1, 2, 3), (2, 3))
    with pytest.raises(ValueError, match="does not match the shape"):
        cl.slice(L, (_, _, _))


def test_bad_call_and_mode_arguments():
    L = Layout((2, 3))
    with pytest.raises(TypeError, match="expected an index or a coordinate"):
        L()
    with pytest.raises(TypeError, match="coordinate must be an int, `_`"):
        L(1.5)
    with pytest.raises(IndexError, match="mode index 2 out of range for a layout of rank 2"):
        L[2]
    with pytest.raises(IndexError, match="mode index"):
        mode(L, -3)
    with pytest.raises(TypeError, match="mode index must be an int"):
        L["0"]


def test_divisibility_violations():
    with pytest.raises(ValueError, match="divisibility"):
        logical_divide(Layout((4, 6), (1, 10)), Layout(3, 1))
    with pytest.raises(ValueError, match="stride divisibility"):
        composition(Layout((6, 2), (8, 2)), Layout(4, 5))
    with pytest.raises(ValueError, match="divisibility"):
        zipped_divide(Layout(((2, 3, 2), 4), ((1, 4, 20), 40)), (4, 2))
    with pytest.raises(ValueError, match="not a multiple"):
        tile_to_shape(Layout((3, 3)), (8, 8))


def test_complement_of_non_injective_layout():
    with pytest.raises(ValueError, match="not injective"):
        complement(Layout((2, 2), (1, 1)))
    with pytest.raises(ValueError, match="not injective"):
        complement(Layout((3, 2), (2, 3)), 64)
    # Injective (offsets 0,1,3,4,6,7,9,10) but with no complement layout.
    with pytest.raises(ValueError, match="has no complement"):
        complement(Layout((4, 2), (3, 1)))
    with pytest.raises(ValueError, match="cotarget must be positive"):
        complement(Layout(4, 1), 0)


def test_capacity_overflow():
    with pytest.raises(ValueError, match="more than 64 nodes"):
        Layout(tuple([1] * 100))
    with pytest.raises(ValueError, match="more than 64 nodes"):
        Layout("(" + ",".join(["1"] * 100) + ")")
    deep = []
    deep.append(deep)  # self-referential: must hit the capacity, not recurse forever
    with pytest.raises(ValueError, match="more than 64 nodes"):
        Layout(deep)
    big = Layout(tuple([2] * 40))
    with pytest.raises(ValueError, match="64"):
        make_layout(big, big)


def test_swizzle_errors():
    with pytest.raises(ValueError, match=r"\|shift\| \(2\) must be at least bits \(3\)"):
        Swizzle(3, 3, 2)
    with pytest.raises(ValueError, match="must be non-negative"):
        Swizzle(-1, 3, 3)
    with pytest.raises(TypeError, match="Swizzle: bits must be an int"):
        Swizzle(1.0, 3, 3)
    with pytest.raises(TypeError, match="Swizzle: offset must be an int"):
        Swizzle(3, 3, 3)("8")


def test_pictures_errors():
    with pytest.raises(ValueError,
                       match="to_svg: a picture needs a layout of rank 1 or 2, got rank 3"):
        to_svg(Layout((2, 2, 2)))
    with pytest.raises(ValueError, match="to_latex: a picture needs a layout of rank 1 or 2"):
        to_latex(Layout((2, 2, 2)))
    with pytest.raises(ValueError, match="outside the 2x2 tile"):
        to_svg_tv(Layout((4, 2)), (2, 2))
    with pytest.raises(ValueError, match="needs rank 2"):
        to_svg_tv(Layout(4), (2, 2))
    with pytest.raises(TypeError, match="tile must be a pair of ints"):
        to_svg_tv(Layout((4, 2)), (8,))
    with pytest.raises(ValueError, match="picture too large"):
        to_svg(Layout(1 << 20))
    with pytest.raises(ValueError, match="tile must be at least 1x1"):
        to_svg_tv(Layout((1, 1)), (0, 4))


def test_bad_algebra_argument_types():
    with pytest.raises(TypeError, match="composition: B must be a Layout, an int, or a tuple"):
        composition(Layout((4, 2)), 2.5)
    with pytest.raises(TypeError, match="by-mode tiler"):
        composition(Layout((4, 2)), (Layout(2), "x"))
    with pytest.raises(TypeError, match="composition: A must be a Layout"):
        composition("x", Layout(2))
    with pytest.raises(TypeError, match="make_layout: expected Layouts"):
        make_layout(Layout(2), 3)
    with pytest.raises(TypeError, match="size: the argument must be"):
        size("abc")
    with pytest.raises(TypeError, match="complement: cotarget must be"):
        complement(Layout(4, 2), 2.0)


def test_algebra_errors_name_the_function_and_operands():
    # Any refusal of the core inside an algebra call names the call and its operands, also when
    # it comes from a step inside (here the complement inside logical_divide).
    with pytest.raises(ValueError) as e:
        logical_divide(Layout((4, 6), (1, 10)), Layout(3, 1))
    msg = str(e.value)
    assert msg.startswith("logical_divide: ") and msg.endswith(" for A=(4,6):(1,10) and B=3:1")
    with pytest.raises(ValueError) as e:
        complement(Layout((2, 2), (1, 1)))
    assert str(e.value).startswith("complement: the layout is not injective")
    assert str(e.value).endswith("for layout=(2,2):(1,1)")
    with pytest.raises(ValueError, match=r"^Layout \(2,2\):\(4611686018427387904,"
                                         r"4611686018427387904\) is too large: its cosize "
                                         r"exceeds 2\^63 - 1$"):
        Layout((2, 2), (2 ** 62, 2 ** 62))
