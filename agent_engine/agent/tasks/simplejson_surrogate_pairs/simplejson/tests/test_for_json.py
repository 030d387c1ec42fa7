import unittest
import simplejson as json


class ForJson(object):
    def for_json(self):
        return {'for_json': 1}


class NestedForJson(object):
    def for_json(self):
        return {'nested': ForJson()}


class ForJsonList(object):
    def for_json(self):
        return ['list']


class DictForJson(dict):
    def for_json(self):
        return {'alpha': 1}


class ListForJson(list):
    def for_json(self):
        return ['list']


class TestForJson(unittest.TestCase):
    def assertRoundTrip(self, obj, other, for_json=True):
        if for_json is None:
            # None will use the default
            s = json.dumps(obj)
        else:
            s = json.dumps(obj, for_json=for_json)
        self.assertEqual(
            json.loads(s),
            other)

    def test_for_json_encodes_stand_alone_object(self):
        self.assertRoundTrip(
            ForJson(),
            ForJson().for_json())

    def test_for_json_encodes_object_nested_in_dict(self):
        self.assertRoundTrip(
            {'hooray': ForJson()},
            {'hooray': ForJson().for_json()})

    def test_for_json_encodes_object_nested_in_list_within_dict(self):
        self.assertRoundTrip(
            {'list': [0, ForJson(), 2, 3]},
            {'list': [0, ForJson().for_json(), 2, 3]})

    def test_for_json_encodes_object_nested_within_object(self):
        self.assertRoundTrip(
            NestedForJson(),
            {'nested': {'for_json': 1}})

    def test_for_json_encodes_list(self):
        self.assertRoundTrip(
            ForJsonList(),
            ForJsonList().for_json())

    def test_for_json_encodes_list_within_object(self):
        self.assertRoundTrip(
            {'nested': ForJsonList()},
            {'nested': ForJsonList().for_json()})

    def test_for_json_encodes_dict_subclass(self):
        self.assertRoundTrip(
            DictForJson(a=1),
            DictForJson(a=1).for_json())

    def test_for_json_encodes_list_subclass(self):
        self.assertRoundTrip(
            ListForJson(['l']),
            ListForJson(['l']).for_json())

    def test_for_json_ignored_if_not_true_with_dict_subclass(self):
        for for_json in (None, False):
            self.assertRoundTrip(
                DictForJson(a=1),
                {'a': 1},
                for_json=for_json)

    def test_for_json_ignored_if_not_true_with_list_subclass(self):
        for for_json in (None, False):
            self.assertRoundTrip(
                ListForJson(['l']),
                ['l'],
                for_json=for_json)

    def test_raises_typeerror_if_for_json_not_true_with_object(self):
        self.assertRaises(TypeError, json.dumps, ForJson())
        self.assertRaises(TypeError, json.dumps, ForJson(), for_json=False)

    def test_getattr_exception_propagates(self):
        # Regression: _call_json_method used to PyErr_Clear() unconditionally
        # after PyObject_GetAttr() failed, swallowing MemoryError,
        # KeyboardInterrupt, and any other non-AttributeError raised by a
        # user __getattr__. Same bug class as commit d3ecab5 (iterable_as_array).
        class BadAttr(object):
            def __init__(self, attr, exc):
                self.attr = attr
                self.exc = exc
            def __getattr__(self, name):
                if name == self.attr:
                    raise self.exc('from __getattr__: ' + name)
                raise AttributeError(name)

        for exc_type in (MemoryError, RuntimeError):
            self.assertRaises(
                exc_type,
                json.dumps, BadAttr('for_json', exc_type), for_json=True)
            self.assertRaises(
                exc_type,
                json.dumps, BadAttr('_asdict', exc_type),
                namedtuple_as_object=True)

        # AttributeError from __getattr__ must still be treated as
        # "method not present" and fall through silently.
        class NoJsonMethods(object):
            def __getattr__(self, name):
                raise AttributeError(name)
        self.assertRaises(
            TypeError, json.dumps, NoJsonMethods(), for_json=True)

    def test_methods_raising_type_error_are_called_once(self):
        # A TypeError from for_json() or _asdict() means "not supported",
        # and the encoder moves on to default() without retrying them.
        calls = []
        class Raises(object):
            def for_json(self):
                calls.append('for_json')
                raise TypeError('nope')
            def _asdict(self):
                calls.append('_asdict')
                raise TypeError('nope')
        for value, expected in ((Raises(), '"d"'),
                                ([Raises()], '["d"]'),
                                ({'k': Raises()}, '{"k": "d"}')):
            del calls[:]
            self.assertEqual(
                json.dumps(value, for_json=True, default=lambda o: 'd'),
                expected)
            self.assertEqual(calls, ['for_json', '_asdict'])
