"""Regular expressions with PCRE's syntax (issue 35): the patterns mongod accepts through
PCRE2 and a Rust-syntax engine refused — lookaround, backreferences, possessive quantifiers,
atomic groups, \\Q..\\E, named groups, inline options — in $regex, $in, $regexMatch,
$regexFind and $regexFindAll; mongod's 51091 for a bad pattern; and a pathological pattern
that stops at PCRE's match limit instead of holding a server thread."""
import re

import pytest
from bson.regex import Regex
from pymongo.errors import OperationFailure

WORDS = ["foobar", "foobaz", "hey hey", "hey you", "a.b*c", "HeLLo", "aaaa", "price $42", "2024-05"]


@pytest.fixture
def words(coll):
    coll.insert_many([{"_id": i, "w": w} for i, w in enumerate(WORDS)])
    return coll


def matching(coll, pattern, options=""):
    return sorted(d["w"] for d in coll.find({"w": {"$regex": pattern, "$options": options}}))


def test_pcre_syntax_in_find(words):
    assert matching(words, "foo(?=bar)") == ["foobar"]
    assert matching(words, "foo(?!bar)") == ["foobaz"]
    assert matching(words, r"(?<=\$)\d+") == ["price $42"]
    assert matching(words, r"^(\w+) \1$") == ["hey hey"]
    assert matching(words, r"^(?P<w>\w+) (?P=w)$") == ["hey hey"]
    assert matching(words, r"^a++a") == []
    assert matching(words, r"^(?>a+)$") == ["aaaa"]
    assert matching(words, r"^\Qa.b*c\E$") == ["a.b*c"]
    assert matching(words, "(?i)hello") == ["HeLLo"]
    assert matching(words, "hello", "i") == ["HeLLo"]
    # A BSON regex and $in with regexes go through the same engine.
    assert sorted(d["w"] for d in words.find({"w": Regex(r"^(?<y>\d{4})-\d\d$")})) == ["2024-05"]
    got = sorted(d["w"] for d in words.find({"w": {"$in": [Regex("foo(?=baz)"), "aaaa"]}}))
    assert got == ["aaaa", "foobaz"]


def test_expression_operators(words):
    out = list(words.aggregate([
        {"$match": {"_id": 8}},
        {"$project": {
            "m": {"$regexMatch": {"input": "$w", "regex": r"(?<=-)\d+"}},
            "f": {"$regexFind": {"input": "$w", "regex": r"(?<y>\d{4})-(?P<m>\d\d)"}},
            "all": {"$regexFindAll": {"input": "$w", "regex": r"\d(?=\d)"}},
        }},
    ]))[0]
    assert out["m"] is True
    assert out["f"] == {"match": "2024-05", "idx": 0, "captures": ["2024", "05"]}
    assert [m["match"] for m in out["all"]] == ["2", "0", "2", "0"]


def test_bad_pattern_is_51091(words):
    with pytest.raises(OperationFailure) as e:
        list(words.find({"w": {"$regex": "(abc"}}))
    assert e.value.code == 51091
    assert "Regular expression is invalid: missing closing parenthesis" in str(e.value)
    with pytest.raises(OperationFailure) as e:
        list(words.find({"w": {"$regex": "a", "$options": "q"}}))
    assert e.value.code == 51108


def test_pathological_pattern_stops_at_the_match_limit(coll):
    # (a+)+$ on a run of a's that does not end the string backtracks 2^n ways: without PCRE's
    # match limit this query would hold a server thread for longer than anyone waits.
    coll.insert_one({"_id": 1, "s": "a" * 64 + "!"})
    # In a query the stopped match is no match (mongod's RegexMatchExpression).
    assert list(coll.find({"s": {"$regex": "(a+)+$"}})) == []
    # In an expression it is mongod's 51156.
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$project": {"m": {"$regexMatch": {"input": "$s", "regex": "(a+)+$"}}}}]))
    assert e.value.code == 51156
    assert "match limit exceeded" in str(e.value)
    # The server still answers.
    assert coll.count_documents({}) == 1
