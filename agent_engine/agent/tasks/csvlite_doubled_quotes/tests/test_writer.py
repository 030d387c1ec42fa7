import unittest

from csvlite import TSV, write_dicts, write_rows


class WriterTest(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(write_rows([["a", "b"], [1, 2]]), "a,b\r\n1,2\r\n")

    def test_quotes_only_when_needed(self):
        self.assertEqual(write_rows([["a,b", "c", 'd"e', "f\ng"]]), '"a,b",c,"d""e","f\ng"\r\n')

    def test_blanks_at_the_ends_are_quoted(self):
        self.assertEqual(write_rows([[" a", "b ", "c d"]]), '" a","b ",c d\r\n')

    def test_none_is_empty(self):
        self.assertEqual(write_rows([[None, "x"]]), ",x\r\n")

    def test_row_of_one_empty_field(self):
        self.assertEqual(write_rows([[""]]), '""\r\n')

    def test_row_without_fields(self):
        self.assertEqual(write_rows([[]]), "\r\n")

    def test_tabs(self):
        self.assertEqual(write_rows([["a\tb", "c,d"]], TSV), '"a\tb"\tc,d\r\n')

    def test_dicts(self):
        text = write_dicts([{"a": 1, "b": "x,y"}, {"a": 2}], ["a", "b"])
        self.assertEqual(text, 'a,b\r\n1,"x,y"\r\n2,\r\n')


if __name__ == "__main__":
    unittest.main()
