import unittest

from csvlite import TSV, CSVError, Dialect, read_dicts, read_rows


class ReaderTest(unittest.TestCase):
    def test_plain_rows(self):
        self.assertEqual(read_rows("a,b,c\r\n1,2,3\r\n"), [["a", "b", "c"], ["1", "2", "3"]])

    def test_no_final_line_break(self):
        self.assertEqual(read_rows("a,b\n1,2"), [["a", "b"], ["1", "2"]])

    def test_line_endings(self):
        self.assertEqual(read_rows("a\rb\nc\r\nd"), [["a"], ["b"], ["c"], ["d"]])

    def test_empty_fields(self):
        self.assertEqual(read_rows(",a,,\n"), [["", "a", "", ""]])

    def test_empty_line_is_a_row_without_fields(self):
        self.assertEqual(read_rows("a\n\nb\n"), [["a"], [], ["b"]])

    def test_quoted_delimiter(self):
        self.assertEqual(read_rows('"a,b",c\n'), [["a,b", "c"]])

    def test_quoted_line_break(self):
        self.assertEqual(read_rows('"one\ntwo",x\n'), [["one\ntwo", "x"]])

    def test_doubled_quote_is_one_quote(self):
        self.assertEqual(read_rows('"say ""hi""",x\n'), [['say "hi"', "x"]])

    def test_field_of_one_quote(self):
        self.assertEqual(read_rows('""""\n'), [['"']])

    def test_empty_quoted_field(self):
        self.assertEqual(read_rows('"",a\n'), [["", "a"]])

    def test_quote_inside_an_unquoted_field_is_kept(self):
        self.assertEqual(read_rows('5"6,x\n'), [['5"6', "x"]])

    def test_text_after_a_closing_quote_is_kept_when_lenient(self):
        self.assertEqual(read_rows('"a"b,c\n'), [["ab", "c"]])

    def test_text_after_a_closing_quote_is_an_error_when_strict(self):
        with self.assertRaises(CSVError):
            read_rows('"a"b,c\n', Dialect(strict=True))

    def test_doubled_quotes_are_fine_when_strict(self):
        self.assertEqual(read_rows('"a""b",c\n', Dialect(strict=True)), [['a"b', "c"]])

    def test_unterminated_quote(self):
        with self.assertRaises(CSVError):
            read_rows('"abc,d\n')

    def test_tabs(self):
        self.assertEqual(read_rows("a\tb,c\n", TSV), [["a", "b,c"]])

    def test_other_quote_character(self):
        self.assertEqual(read_rows("'a,''b''',c\n", Dialect(quote="'")), [["a,'b'", "c"]])

    def test_read_dicts(self):
        text = 'name,note\nada,"likes ""math"""\nbob,\n'
        self.assertEqual(read_dicts(text), [{"name": "ada", "note": 'likes "math"'}, {"name": "bob", "note": ""}])

    def test_read_dicts_refuses_short_rows(self):
        with self.assertRaises(CSVError):
            read_dicts("a,b\n1\n")

    def test_bad_dialects(self):
        with self.assertRaises(ValueError):
            Dialect(delimiter=",,")
        with self.assertRaises(ValueError):
            Dialect(delimiter='"')


if __name__ == "__main__":
    unittest.main()
