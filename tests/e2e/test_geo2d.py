"""2d indexes (issue 35) against a real server: createIndex with min/max/bits, points as
arrays or embedded documents, out-of-range points refused, flat $near/$maxDistance, $geoWithin
$box/$center/$polygon (and $within), $centerSphere and $nearSphere, the $geoNear stage with
spherical: false, a compound 2d index, and explain naming the index. Expected results follow
the MongoDB manual's 2d pages and mongod's error codes."""
import math
import random

import pytest
from pymongo import GEO2D
from pymongo.errors import OperationFailure, WriteError

from conftest import Server


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("geo2d"))).start()
    c = s.client()
    yield c["geo2d"]
    c.close()
    s.stop()


def leaf_stage(plan):
    stage = plan["queryPlanner"]["winningPlan"]
    while "inputStage" in stage:
        stage = stage["inputStage"]
    return stage


@pytest.fixture(scope="module")
def places(db):
    coll = db["places"]
    # https://www.mongodb.com/docs/manual/tutorial/build-a-2d-index/ (legacy pairs, embedded).
    coll.insert_many([
        {"_id": 1, "loc": [0, 0], "cat": "a"},
        {"_id": 2, "loc": {"x": 3, "y": 4}, "cat": "b"},
        {"_id": 3, "loc": [10, 10], "cat": "a"},
        {"_id": 4, "loc": [[-5, -5], [50, 50]], "cat": "b"},
        {"_id": 5, "name": "no location"},
    ])
    assert coll.create_index([("loc", GEO2D), ("cat", 1)], min=-100, max=100, bits=20) == "loc_2d_cat_1"
    return coll


def test_create_index_and_list(places):
    spec = [i for i in places.list_indexes() if i["name"] == "loc_2d_cat_1"][0]
    assert spec["key"] == {"loc": "2d", "cat": 1}
    assert (spec["min"], spec["max"], spec["bits"]) == (-100, 100, 20)
    # The suite's own check (pymongo test_collection.test_index_geo2d).
    coll = places.database["plain"]
    assert coll.create_index([("loc", GEO2D)]) == "loc_2d"
    assert coll.index_information()["loc_2d"]["key"] == [("loc", "2d")]


def test_out_of_range_and_bad_specs(places, db):
    # mongod: "point not in interval of [ min, max )" (13027).
    with pytest.raises(WriteError) as e:
        places.insert_one({"loc": [101, 0]})
    assert e.value.code == 13027
    with pytest.raises(WriteError) as e:
        places.insert_one({"loc": [1, "x"]})
    assert e.value.code == 13026
    coll = db["bad"]
    for keys, opts, code in [
        ([("a", 1), ("loc", GEO2D)], {}, 16801),
        ([("loc", GEO2D)], {"bits": 33}, 72),
        ([("loc", GEO2D)], {"min": 5, "max": 5}, 72),
        ([("loc", GEO2D), ("b", "2dsphere")], {}, 67),
    ]:
        with pytest.raises(OperationFailure) as e:
            coll.create_index(keys, **opts)
        assert e.value.code == code, (keys, opts)


def test_near_is_flat_and_ordered(places):
    # https://www.mongodb.com/docs/manual/reference/operator/query/near/#query-on-legacy-coordinates
    got = [d["_id"] for d in places.find({"loc": {"$near": [0, 0]}})]
    assert got == [1, 2, 4, 3]
    got = [d["_id"] for d in places.find({"loc": {"$near": [0, 0], "$maxDistance": 5}})]
    assert got == [1, 2]
    plan = places.find({"loc": {"$near": [0, 0]}}).explain()
    stage = leaf_stage(plan)
    assert stage["stage"] == "GEO_NEAR_2D"
    assert stage["indexName"] == "loc_2d_cat_1"
    # Compound: the other field filters the near scan.
    got = [d["_id"] for d in places.find({"loc": {"$near": [0, 0]}, "cat": "a"})]
    assert got == [1, 3]


def test_within_shapes_use_the_index(places):
    cases = [
        ({"$box": [[-1, -1], [5, 5]]}, [1, 2]),
        ({"$center": [[0, 0], 5]}, [1, 2]),
        ({"$polygon": [[-6, -6], [11, -6], [11, 11], [-6, 1]]}, [1, 2, 3, 4]),
        ({"$polygon": [[-1, -1], [4, -1], [4, 3], [-1, 3]]}, [1]),
    ]
    for shape, want in cases:
        for op in ("$geoWithin", "$within"):
            q = {"loc": {op: shape}}
            assert sorted(d["_id"] for d in places.find(q)) == want, q
            leaf = leaf_stage(places.find(q).explain())
            assert leaf["stage"] == "IXSCAN" and leaf["indexName"] == "loc_2d_cat_1", leaf
            scan = sorted(d["_id"] for d in places.find(q).hint([("$natural", 1)]))
            assert scan == want


def test_sphere_queries_on_a_2d_index(db):
    coll = db["cities"]
    coll.create_index([("loc", GEO2D)])
    coll.insert_many([
        {"_id": "paris", "loc": [2.35, 48.86]},
        {"_id": "london", "loc": [-0.13, 51.51]},
        {"_id": "nyc", "loc": [-74.0, 40.71]},
    ])
    got = [d["_id"] for d in coll.find({"loc": {"$nearSphere": [2.35, 48.86]}})]
    assert got == ["paris", "london", "nyc"]
    # $centerSphere: radians; London is ~0.054 rad from Paris.
    q = {"loc": {"$geoWithin": {"$centerSphere": [[2.35, 48.86], 0.06]}}}
    assert sorted(d["_id"] for d in coll.find(q)) == ["london", "paris"]
    out = list(coll.aggregate([{"$geoNear": {"near": [2.35, 48.86], "distanceField": "d",
                                             "spherical": True}}]))
    assert [d["_id"] for d in out] == ["paris", "london", "nyc"]
    assert out[1]["d"] == pytest.approx(0.0538, abs=0.001)  # radians


def test_geo_near_stage_is_flat(places):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/geoNear/ (2d index,
    # spherical false: planar distances in the coordinates' units).
    out = list(places.aggregate([
        {"$geoNear": {"near": [0, 0], "distanceField": "dist", "maxDistance": 20,
                      "spherical": False}},
    ]))
    assert [d["_id"] for d in out] == [1, 2, 4, 3]
    assert [d["dist"] for d in out] == pytest.approx([0.0, 5.0, 50 ** 0.5, 200 ** 0.5])


def test_random_points_match_brute_force(db):
    rng = random.Random(35)
    coll = db["random"]
    coll.create_index([("p", GEO2D)], min=0, max=1000, bits=rng.randint(8, 26))
    pts = [(rng.uniform(0, 1000), rng.uniform(0, 1000)) for _ in range(300)]
    coll.insert_many([{"_id": i, "p": list(p)} for i, p in enumerate(pts)])
    for _ in range(10):
        cx, cy, r = rng.uniform(0, 1000), rng.uniform(0, 1000), rng.uniform(1, 300)
        want = sorted(i for i, (x, y) in enumerate(pts) if math.hypot(x - cx, y - cy) <= r)
        got = [d["_id"] for d in coll.find({"p": {"$near": [cx, cy], "$maxDistance": r}})]
        assert sorted(got) == want
        dists = [math.hypot(pts[i][0] - cx, pts[i][1] - cy) for i in got]
        assert dists == sorted(dists)
        within = sorted(d["_id"] for d in coll.find({"p": {"$geoWithin": {"$center": [[cx, cy], r]}}}))
        assert within == want
