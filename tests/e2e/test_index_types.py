"""Index types of issue 14 against a real server: partial, text ($text, textScore) and wildcard
indexes. Expected results and error codes follow the MongoDB manual's pages, cited per test."""
import pytest
from pymongo import ASCENDING, TEXT
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import Server


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    # One server for the module: each test uses its own collections.
    s = Server(str(tmp_path_factory.mktemp("index-types"))).start()
    c = s.client()
    yield c["ixtypes"]
    c.close()
    s.stop()


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def winning_ixscan(plan):
    """The IXSCAN (or other leaf) under the winning plan."""
    stage = plan["queryPlanner"]["winningPlan"]
    while "inputStage" in stage:
        stage = stage["inputStage"]
    return stage


# --- partial indexes ---------------------------------------------------------------------


def test_partial_unique_email_where_not_deleted(db):
    # https://www.mongodb.com/docs/manual/core/index-partial/#partial-index-with-unique-constraint
    users = db["users"]
    users.create_index("email", unique=True, name="email_live",
                       partialFilterExpression={"deleted": False})
    users.insert_one({"_id": 1, "email": "ann@example.com", "deleted": False})
    users.insert_many([{"_id": 2, "email": "ann@example.com", "deleted": True},
                       {"_id": 3, "email": "ann@example.com", "deleted": True},
                       {"_id": 4, "email": "ann@example.com"}])
    with pytest.raises(DuplicateKeyError) as e:
        users.insert_one({"_id": 5, "email": "ann@example.com", "deleted": False})
    assert e.value.code == 11000
    with pytest.raises(DuplicateKeyError):
        users.update_one({"_id": 2}, {"$set": {"deleted": False}})
    users.update_one({"_id": 1}, {"$set": {"deleted": True}})
    users.update_one({"_id": 2}, {"$set": {"deleted": False}})
    live = users.find({"email": "ann@example.com", "deleted": False})
    assert [d["_id"] for d in live] == [2]
    spec = users.index_information()["email_live"]
    assert spec["partialFilterExpression"] == {"deleted": False}
    assert spec["unique"] is True


def test_partial_index_is_used_only_when_the_query_implies_the_filter(db):
    # https://www.mongodb.com/docs/manual/core/index-partial/#query-coverage : the index
    # {cuisine: 1} with {rating: {$gt: 5}} serves {cuisine: "Italian", rating: {$gte: 8}},
    # not {cuisine: "Italian", rating: {$lt: 8}} nor {cuisine: "Italian"}.
    r = db["restaurants"]
    r.insert_many([{"cuisine": "Italian" if i % 2 else "Thai", "rating": i} for i in range(20)])
    r.create_index("cuisine", partialFilterExpression={"rating": {"$gt": 5}})
    used = r.find({"cuisine": "Italian", "rating": {"$gte": 8}}).explain()
    leaf = winning_ixscan(used)
    assert leaf["stage"] == "IXSCAN" and leaf["isPartial"] is True
    for q in ({"cuisine": "Italian", "rating": {"$lt": 8}}, {"cuisine": "Italian"}):
        assert winning_ixscan(r.find(q).explain())["stage"] == "COLLSCAN"
    assert sorted(d["rating"] for d in r.find({"cuisine": "Italian", "rating": {"$gte": 8}})) == \
        [9, 11, 13, 15, 17, 19]
    # Documents outside the filter still answer every query (by collection scan).
    assert r.count_documents({"cuisine": "Italian"}) == 10


def test_partial_index_spec_errors(db):
    # https://www.mongodb.com/docs/manual/core/index-partial/#restrictions : sparse and
    # partialFilterExpression cannot be combined; unsupported operators are CannotCreateIndex.
    c = db["partial_errors"]
    assert code_of(lambda: c.create_index("x", sparse=True, partialFilterExpression={"x": 1})) == 67
    assert code_of(lambda: c.create_index("x", partialFilterExpression={"x": {"$ne": 1}})) == 67
    assert code_of(lambda: c.create_index("x", partialFilterExpression={"x": {"$exists": False}})) == 67
    assert code_of(lambda: c.create_index("x", partialFilterExpression=5)) == 14
    c.create_index("x", partialFilterExpression={"$or": [{"x": {"$in": [1, 2]}}, {"y": {"$type": "string"}}]})
