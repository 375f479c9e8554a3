"""Compound text, compound wildcard and compound 2dsphere indexes against a real server.
Expected results and error codes follow the MongoDB manual's pages, cited per test."""
import pytest
from pymongo import ASCENDING, DESCENDING, TEXT
from pymongo.errors import OperationFailure, WriteError

from conftest import Server


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    # One server for the module: each test uses its own collections.
    s = Server(str(tmp_path_factory.mktemp("compound-indexes"))).start()
    c = s.client()
    yield c["compound"]
    c.close()
    s.stop()


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


# --- compound text indexes ---------------------------------------------------------------

INVENTORY = [
    {"_id": 1, "dept": "tech", "description": "lime green computer"},
    {"_id": 2, "dept": "tech", "description": "wireless red mouse"},
    {"_id": 3, "dept": "kitchen", "description": "green placemat"},
    {"_id": 4, "dept": "kitchen", "description": "red peeler"},
    {"_id": 5, "dept": "food", "description": "green apple"},
    {"_id": 6, "dept": "food", "description": "red potato"},
]


@pytest.fixture(scope="module")
def inventory(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/limit-number-of-items-scanned-for-text-search/
    c = db["inventory"]
    c.insert_many(INVENTORY)
    c.create_index([("dept", ASCENDING), ("description", TEXT)])
    return c


def test_compound_text_limits_the_scan_to_the_prefix(inventory):
    # The page's example: equality on dept, then $text; only the kitchen's green item.
    assert ids(inventory.find({"dept": "kitchen", "$text": {"$search": "green"}})) == [3]
    assert ids(inventory.find({"dept": "food", "$text": {"$search": "red green"}})) == [5, 6]
    assert ids(inventory.find({"dept": "tech", "$text": {"$search": "\"red mouse\""}})) == [2]
    assert ids(inventory.find({"dept": "tech", "$text": {"$search": "computer -lime"}})) == []
    info = inventory.index_information()["dept_1_description_text"]
    assert info["key"] == [("dept", 1), ("_fts", "text"), ("_ftsx", 1)]
    assert info["weights"] == {"description": 1}


def test_compound_text_without_prefix_equality_fails(inventory):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/text-index-restrictions/#compound-text-index
    # "the query predicate must include equality match conditions on the preceding keys";
    # mongod 7's planner fails the query with NoQueryExecutionPlans (291).
    for f in [{"$text": {"$search": "green"}},
              {"dept": {"$in": ["tech", "food"]}, "$text": {"$search": "green"}},
              {"dept": {"$gte": "a"}, "$text": {"$search": "green"}}]:
        assert code_of(lambda: list(inventory.find(f))) == 291
    with pytest.raises(OperationFailure) as e:
        list(inventory.find({"$text": {"$search": "green"}}))
    assert "are equality predicates given for all prefix fields?" in str(e.value)
    # {$eq: v} and an equality inside $and are equalities.
    assert ids(inventory.find({"$and": [{"dept": {"$eq": "tech"}},
                                        {"$text": {"$search": "green"}}]})) == [1]


def test_compound_text_score_sort_hint_explain_and_aggregate(inventory):
    # https://www.mongodb.com/docs/manual/reference/operator/query/text/#return-the-text-search-score
    got = list(inventory.find({"dept": "tech", "$text": {"$search": "green computer"}},
                              {"score": {"$meta": "textScore"}})
               .sort([("score", {"$meta": "textScore"})]))
    assert [d["_id"] for d in got] == [1]
    # "lime green computer": two of three terms, each 1 × (0.5 × 1/3 + 0.5).
    assert got[0]["score"] == pytest.approx(2 * (0.5 / 3 + 0.5))
    q = {"dept": "kitchen", "$text": {"$search": "green"}}
    assert ids(inventory.find(q).hint("dept_1_description_text")) == [3]
    plan = inventory.find(q).explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "TEXT_MATCH"
    assert plan["indexPrefix"] == {"dept": "kitchen"}
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/match/#perform-a-text-search
    out = list(inventory.aggregate([
        {"$match": {"dept": "food", "$text": {"$search": "apple"}}},
        {"$project": {"s": {"$meta": "textScore"}}}]))
    assert [d["_id"] for d in out] == [5]


def test_compound_text_prefix_and_suffix_fields_hold_no_arrays(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/text-index-restrictions/#compound-text-index
    # "A compound text index cannot include ... multi-key ... index fields": an array in an
    # ordered field is CannotBuildIndexKeys (201) at insert.
    c = db["ct_arrays"]
    c.create_index([("a", ASCENDING), ("body", TEXT), ("n", DESCENDING)])
    c.insert_one({"_id": 1, "a": 1, "body": "lorem ipsum", "n": 3})
    c.insert_one({"_id": 2, "a": 1, "body": "lorem"})
    for bad in [{"_id": 3, "a": [1], "body": "lorem"},
                {"_id": 4, "a": 1, "body": "lorem", "n": [1, 2]}]:
        with pytest.raises(WriteError) as e:
            c.insert_one(bad)
        assert e.value.code == 201
    with pytest.raises(WriteError) as e:
        c.update_one({"_id": 1}, {"$set": {"a": [2]}})
    assert e.value.code == 201
    # Suffix fields filter like any predicate.
    assert ids(c.find({"a": 1, "$text": {"$search": "lorem"}, "n": {"$exists": False}})) == [2]
    assert ids(c.find({"a": 1, "$text": {"$search": "lorem"}, "n": {"$gt": 1}})) == [1]
    info = c.index_information()["a_1_body_text_n_-1"]
    assert info["key"] == [("a", 1), ("_fts", "text"), ("_ftsx", 1), ("n", -1)]


def test_compound_text_spec_errors(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/text-index-restrictions/#compound-text-index
    # "all text index keys must be listed adjacently": 17389; other values than ±1: 17273.
    c = db["ct_specs"]
    assert code_of(lambda: c.create_index([("a", TEXT), ("b", 1), ("c", TEXT)])) == 17389
    assert code_of(lambda: c.create_index([("a", 2), ("b", TEXT)])) == 17273
    assert code_of(lambda: c.create_index([("a", "2dsphere"), ("b", TEXT)])) == 67
    # A wildcard text index with a prefix field, and language overrides per document.
    c.create_index([("tenant", ASCENDING), ("$**", TEXT)])
    c.insert_many([{"_id": 1, "tenant": "x", "title": "Les fleurs", "language": "french"},
                   {"_id": 2, "tenant": "x", "note": {"t": "flowers"}},
                   {"_id": 3, "tenant": "y", "title": "flowers"}])
    assert ids(c.find({"tenant": "x", "$text": {"$search": "flower"}})) == [2]
    assert ids(c.find({"tenant": "x", "$text": {"$search": "fleur", "$language": "fr"}})) == [1]


# --- compound wildcard indexes -----------------------------------------------------------


def test_compound_wildcard_example_from_the_manual(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-wildcard/index-wildcard-compound/
    c = db["cwi_tenants"]
    c.create_index([("tenantId", ASCENDING), ("customFields.$**", ASCENDING)], name="cwi")
    c.insert_many([
        {"_id": 1, "tenantId": 1, "customFields": {"addr": "Main St", "employees": 10}},
        {"_id": 2, "tenantId": 1, "customFields": {"addr": "Elm St", "employees": 20}},
        {"_id": 3, "tenantId": 2, "customFields": {"addr": "Main St", "employees": [5, 50]}},
        {"_id": 4, "customFields": {"addr": "Main St"}},
        {"_id": 5, "tenantId": 1, "name": "no custom fields"},
    ])
    q = {"tenantId": 1, "customFields.addr": "Main St"}
    assert ids(c.find(q)) == [1]
    plan = c.find(q).explain()["queryPlanner"]["winningPlan"]["inputStage"]
    assert plan["stage"] == "IXSCAN" and plan["indexName"] == "cwi"
    assert plan["indexBounds"]["tenantId"] == ["[1, 1]"]
    assert plan["indexBounds"]["$_path"] == ['["customFields.addr", "customFields.addr"]']
    assert ids(c.find({"tenantId": {"$gte": 2}, "customFields.employees": {"$gt": 30}})) == [3]
    assert ids(c.find({"tenantId": None, "customFields.addr": "Main St"})) == [4]
    assert ids(c.find({"tenantId": 1, "customFields.addr": "Main St"}).hint("cwi")) == [1]
    # The leading field alone uses the index too (mongod 7's compound_wildcard_index_prefix.js),
    # documents without custom fields included.
    q = {"tenantId": 1}
    assert ids(c.find(q)) == [1, 2, 5]
    assert c.find(q).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "cwi"


def test_compound_wildcard_all_fields_needs_a_projection(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-wildcard/reference/restrictions/
    # "You cannot include the same field in the wildcard fields and the regular fields. You can
    # use a wildcardProjection to exclude fields from the wildcard pattern."
    c = db["cwi_all"]
    c.create_index([("tenant", ASCENDING), ("$**", ASCENDING), ("score", DESCENDING)],
                   wildcardProjection={"tenant": 0, "score": 0}, name="all")
    c.insert_many([{"_id": 1, "tenant": "a", "x": {"y": 1}, "score": 3},
                   {"_id": 2, "tenant": "b", "x": {"y": 1}, "score": 4},
                   {"_id": 3, "tenant": "a", "z": 1}])
    assert ids(c.find({"tenant": "a", "x.y": 1})) == [1]
    assert ids(c.find({"tenant": "a", "x.y": 1, "score": {"$gt": 3}})) == []
    info = c.index_information()["all"]
    assert info["wildcardProjection"] == {"tenant": 0, "score": 0}
    # Regular fields are single-key: an array there is refused.
    with pytest.raises(WriteError) as e:
        c.insert_one({"_id": 4, "tenant": ["a", "b"], "x": {"y": 2}})
    assert e.value.code == 201


def test_compound_wildcard_spec_errors(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-wildcard/reference/restrictions/
    # Codes as mongod 7's validateWildcardProjection gives them.
    c = db["cwi_specs"]
    cases = [
        ([("a.$**", 1), ("b.$**", 1)], {}, 7246201),           # one wildcard term
        ([("a", 1), ("a.$**", 1)], {}, 7246204),               # regular field in the subtree
        ([("a", 1), ("$**", 1)], {}, 67),                      # $** needs a projection
        ([("a", 1), ("$**", 1)], {"wildcardProjection": {"a": 1}}, 7246208),
        ([("$**", 1), ("c", 1)], {"wildcardProjection": {"_id": 0, "a": 0, "b": 1}}, 7246211),
        ([("a", 1), ("$**", 1)], {"wildcardProjection": {"_id": 0}}, 7246210),
        ([("$**", 1), ("d", 1)], {"wildcardProjection": {"_id": 1, "e": 0}}, 7246209),
        ([("$**", 1), ("c", 1)], {"wildcardProjection": {"a.b": 1, "a.b.c": 1}}, 7246200),
        ([("a.$**", 1), ("b", 1)], {"unique": True}, 67),
        ([("a.$**", 1), ("b", "hashed")], {}, 67),
        ([("a.$**", 1), ("b", 1)], {"wildcardProjection": {"a": 1}}, 9),
    ]
    for keys, opts, want in cases:
        assert code_of(lambda: c.create_index(keys, **opts)) == want, (keys, opts)


# --- compound 2dsphere indexes -----------------------------------------------------------

PLACES = [
    {"_id": 1, "loc": {"type": "Point", "coordinates": [-73.97, 40.77]},
     "name": "Central Park", "category": "Parks"},
    {"_id": 2, "loc": {"type": "Point", "coordinates": [-73.88, 40.78]},
     "name": "La Guardia Airport", "category": "Airport"},
    {"_id": 3, "loc": {"type": "Point", "coordinates": [-73.9375, 40.8303]},
     "name": "Sara D. Roosevelt Park", "category": "Parks"},
    {"_id": 4, "name": "No location", "category": "Parks"},
]


def test_compound_2dsphere_from_the_manual(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/geospatial/2dsphere/create/
    # "a compound index where the first field is a 2dsphere index and the others ascending or
    # descending"; "Unlike the 2d compound index, a compound 2dsphere index does not require the
    # location field to be the first field indexed."
    c = db["places"]
    c.insert_many(PLACES)
    c.create_index([("loc", "2dsphere"), ("category", DESCENDING), ("name", ASCENDING)])
    c.create_index([("category", ASCENDING), ("loc", "2dsphere")], name="cat_loc")
    info = c.index_information()
    assert info["loc_2dsphere_category_-1_name_1"]["2dsphereIndexVersion"] == 3
    near = {"$near": {"$geometry": {"type": "Point", "coordinates": [-73.9667, 40.78]},
                      "$maxDistance": 10000}}
    # https://www.mongodb.com/docs/manual/reference/operator/query/near/#query-on-geojson-data
    assert [d["_id"] for d in c.find({"loc": near})] == [1, 3, 2]
    assert [d["_id"] for d in c.find({"loc": near, "category": "Parks"})] == [1, 3]
    within = {"$geoWithin": {"$centerSphere": [[-73.97, 40.77], 5 / 3963.2]}}
    q = {"category": "Parks", "loc": within}
    assert ids(c.find(q)) == [1, 3]
    plan = c.find(q).hint("cat_loc").explain()["queryPlanner"]["winningPlan"]["inputStage"]
    assert plan["indexName"] == "cat_loc"
    assert plan["indexBounds"]["category"] == ['["Parks", "Parks"]']
    # $geoNear with a query on the other field
    # (https://www.mongodb.com/docs/manual/reference/operator/aggregation/geoNear/).
    out = list(c.aggregate([{"$geoNear": {
        "near": {"type": "Point", "coordinates": [-73.9667, 40.78]}, "key": "loc",
        "distanceField": "dist", "query": {"category": "Parks"}, "spherical": True}}]))
    assert [d["_id"] for d in out] == [1, 3]
    # A document without the geo field is stored but not indexed (2dsphereIndexVersion 3).
    assert c.count_documents({}) == 4


def test_compound_2dsphere_errors(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/geospatial/2dsphere/
    c = db["places_err"]
    c.create_index([("category", ASCENDING), ("loc", "2dsphere")])
    with pytest.raises(WriteError) as e:
        c.insert_one({"_id": 1, "category": "x", "loc": {"type": "Point", "coordinates": [500, 1]}})
    assert e.value.code == 16755
    for keys in ([("loc", "2dsphere"), ("t", TEXT)], [("loc", "2dsphere"), ("h", "hashed")]):
        assert code_of(lambda: c.create_index(keys)) == 67
