"""lines_with: the substring pre-filter shared by tally matching and head-tail rendering."""

from evalkit.common.textscan import lines_with


def test_lines_with_finds_each_holding_line_once_in_order():
    text = "ok\n3 FAILED, 2 passed\nnothing\nError: x fail\nlast passed"
    spans = lines_with(text, ("pass", "fail", "error"))
    assert [text[a:b] for a, b in spans] == ["3 FAILED, 2 passed", "Error: x fail", "last passed"]


def test_a_length_changing_lowercase_keeps_offsets_on_the_original_text():
    text = "İİİ\nfail here\n"  # "İ".lower() is two code points
    assert [text[a:b] for a, b in lines_with(text, ("fail",))] == ["fail here"]
