"""Geospatial queries of issue 14 against a real server: the 2dsphere index, $geoWithin,
$geoIntersects, $near/$nearSphere and the $geoNear stage, with mongod's spherical semantics
(great-circle edges, metres on a 6378.1 km sphere) and error codes. Expected results follow
the MongoDB manual's pages, cited per test."""
import math

import pytest
from pymongo import GEOSPHERE
from pymongo.errors import OperationFailure, WriteError

from conftest import Server

# https://www.mongodb.com/docs/manual/reference/operator/query/near/#query-on-geojson-data
# (the same three documents open the $geoNear page's examples).
PLACES = [
    {"_id": 1, "name": "Central Park",
     "location": {"type": "Point", "coordinates": [-73.97, 40.77]}, "category": "Parks"},
    {"_id": 2, "name": "Sara D. Roosevelt Park",
     "location": {"type": "Point", "coordinates": [-73.9928, 40.7193]}, "category": "Parks"},
    {"_id": 3, "name": "Polo Grounds",
     "location": {"type": "Point", "coordinates": [-73.9375, 40.8303]}, "category": "Stadiums"},
]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("geo"))).start()
    c = s.client()
    yield c["geo"]
    c.close()
    s.stop()


@pytest.fixture
def places(db, request):
    coll = db["places_" + request.node.name[:40]]
    coll.insert_many([dict(p) for p in PLACES])
    coll.create_index([("location", GEOSPHERE)])
    return coll


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


def leaf_stage(plan):
    stage = plan["queryPlanner"]["winningPlan"]
    while "inputStage" in stage:
        stage = stage["inputStage"]
    return stage


def test_near_finds_the_nearest_places_manual_example(places):
    # The real program: verbatim from
    # https://www.mongodb.com/docs/manual/reference/operator/query/near/#query-on-geojson-data
    # "returns documents that are at least 1000 meters from and at most 5000 meters from the
    # specified point, ordered from nearest to farthest" — documented output: Central Park.
    got = list(places.find({
        "location": {
            "$near": {
                "$geometry": {"type": "Point", "coordinates": [-73.9667, 40.78]},
                "$minDistance": 1000,
                "$maxDistance": 5000,
            }
        }
    }))
    assert got == [PLACES[0]]


def test_near_orders_by_distance_and_limits(places):
    # Without bounds every document comes back, nearest first (Sara D. Roosevelt Park is at
    # the point; Central Park ~5.8 km north; Polo Grounds ~13 km).
    got = places.find({"location": {"$nearSphere": {
        "$geometry": {"type": "Point", "coordinates": [-73.99279, 40.719296]}}}})
    assert [d["_id"] for d in got] == [2, 1, 3]
    got = places.find({"location": {"$near": {
        "$geometry": {"type": "Point", "coordinates": [-73.9375, 40.8303]}}}}).limit(2)
    assert [d["_id"] for d in got] == [3, 1]
    # Legacy pair with $nearSphere: $maxDistance in radians (0.001 rad = 6.4 km).
    got = places.find({"location": {"$nearSphere": [-73.99279, 40.719296], "$maxDistance": 0.001}})
    assert [d["_id"] for d in got] == [2, 1]


def test_geo_near_stage_manual_example(places):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/geoNear/#maximum-distance
    # documented output: Sara D. Roosevelt Park, dist.calculated 0.9539931676365992 (metres),
    # dist.location its point.
    got = list(places.aggregate([{"$geoNear": {
        "near": {"type": "Point", "coordinates": [-73.99279, 40.719296]},
        "distanceField": "dist.calculated",
        "maxDistance": 2,
        "query": {"category": "Parks"},
        "includeLocs": "dist.location",
        "spherical": True,
    }}]))
    assert len(got) == 1
    assert got[0]["name"] == "Sara D. Roosevelt Park"
    assert math.isclose(got[0]["dist"]["calculated"], 0.9539931676365992, rel_tol=1e-6)
    assert got[0]["dist"]["location"] == {"type": "Point", "coordinates": [-73.9928, 40.7193]}


def test_geo_near_stage_options(places):
    # distanceMultiplier scales the distance; later stages see it; key picks the index.
    got = list(places.aggregate([
        {"$geoNear": {"near": {"type": "Point", "coordinates": [-73.9375, 40.8303]},
                      "distanceField": "km", "distanceMultiplier": 0.001, "key": "location",
                      "minDistance": 1}},
        {"$project": {"_id": 1, "km": {"$round": ["$km", 1]}}},
    ]))
    assert [d["_id"] for d in got] == [1, 2]
    assert 6 < got[0]["km"] < 8 and 12 < got[1]["km"] < 14
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/geoNear/#behavior
    # "$geoNear must be the first stage of a pipeline" (40602).
    assert code_of(lambda: list(places.aggregate([
        {"$match": {}},
        {"$geoNear": {"near": [0, 0], "distanceField": "d", "spherical": True}}]))) == 40602


def test_geo_near_without_an_index(db):
    coll = db["no_geo_index"]
    coll.insert_one({"loc": [0, 0]})
    # mongod: IndexNotFound (27) "$geoNear requires a 2d or 2dsphere index".
    assert code_of(lambda: list(coll.aggregate([{"$geoNear": {
        "near": [0, 0], "distanceField": "d", "spherical": True}}]))) == 27
    # https://www.mongodb.com/docs/manual/reference/operator/query/near/ "$near requires a
    # geospatial index": without one, NoQueryExecutionPlans (291).
    assert code_of(lambda: list(coll.find({"loc": {"$nearSphere": [0, 0]}}))) == 291


def test_near_is_refused_where_mongod_refuses_it(places):
    near = {"location": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}}
    # https://www.mongodb.com/docs/manual/reference/method/db.collection.countDocuments/
    # "$near is not allowed; use $geoWithin with $center" — mongod's 5626500 (count too).
    assert code_of(lambda: places.count_documents(near)) == 5626500
    assert code_of(lambda: places.database.command("count", places.name, query=near)) == 5626500
    # $near under $or: BadValue.
    assert code_of(lambda: list(places.find({"$or": [near, {"name": "x"}]}))) == 2
    # A legacy $near is flat: only a 2d index answers it, and this field has a 2dsphere one.
    assert code_of(lambda: list(places.find({"location": {"$near": [-73.97, 40.77]}}))) == 291


def test_geo_within_polygon_and_center_sphere(places):
    # https://www.mongodb.com/docs/manual/reference/operator/query/geoWithin/
    box = {"type": "Polygon", "coordinates": [[
        [-74.0, 40.7], [-73.95, 40.7], [-73.95, 40.8], [-74.0, 40.8], [-74.0, 40.7]]]}
    q = {"location": {"$geoWithin": {"$geometry": box}}}
    assert sorted(d["_id"] for d in places.find(q)) == [1, 2]
    leaf = leaf_stage(places.find(q).explain())
    assert leaf["stage"] == "IXSCAN" and leaf["indexName"] == "location_2dsphere"
    # $centerSphere radius in radians: 3 km around Central Park holds only it.
    q = {"location": {"$geoWithin": {"$centerSphere": [[-73.97, 40.77], 3000 / 6378100]}}}
    assert [d["_id"] for d in places.find(q)] == [1]
    # $geoWithin $geometry must be a Polygon or MultiPolygon.
    assert code_of(lambda: list(places.find({"location": {"$geoWithin": {
        "$geometry": {"type": "Point", "coordinates": [0, 0]}}}}))) == 2


def test_geo_intersects(places):
    # https://www.mongodb.com/docs/manual/reference/operator/query/geoIntersects/
    line = {"type": "LineString", "coordinates": [[-73.98, 40.76], [-73.96, 40.78]]}
    zone = {"type": "Polygon", "coordinates": [[
        [-73.98, 40.76], [-73.96, 40.76], [-73.96, 40.78], [-73.98, 40.78], [-73.98, 40.76]]]}
    assert [d["_id"] for d in places.find(
        {"location": {"$geoIntersects": {"$geometry": zone}}})] == [1]
    roads = places.database["roads"]
    roads.insert_many([{"_id": "broadway", "path": line},
                       {"_id": "far", "path": {"type": "LineString",
                                               "coordinates": [[10, 10], [11, 11]]}}])
    roads.create_index([("path", GEOSPHERE)])
    assert [d["_id"] for d in roads.find(
        {"path": {"$geoIntersects": {"$geometry": zone}}})] == ["broadway"]


def test_spherical_not_planar(db):
    # "2dsphere ... calculates geometry on an earth-like sphere": a polygon's edges are great
    # circles (https://www.mongodb.com/docs/manual/core/indexes/index-types/geospatial/2dsphere/).
    coll = db["sphere"]
    coll.insert_many([
        {"_id": "bulge", "loc": {"type": "Point", "coordinates": [0, 70]}},
        {"_id": "north", "loc": {"type": "Point", "coordinates": [0, 75]}},
        {"_id": "dateline", "loc": {"type": "Point", "coordinates": [179.5, 1]}},
        {"_id": "greenwich", "loc": {"type": "Point", "coordinates": [0, 1]}},
    ])
    coll.create_index([("loc", GEOSPHERE)])
    # The edge from (-60, 60) to (60, 60) bulges to 73.9 N: (0, 70) is inside.
    big = {"type": "Polygon", "coordinates": [[[-60, 0], [60, 0], [60, 60], [-60, 60], [-60, 0]]]}
    got = sorted(d["_id"] for d in coll.find({"loc": {"$geoWithin": {"$geometry": big}}}))
    assert got == ["bulge", "greenwich"]
    # A box across the antimeridian holds the dateline point, not Greenwich.
    across = {"type": "Polygon", "coordinates": [[
        [170, -10], [-170, -10], [-170, 10], [170, 10], [170, -10]]]}
    assert [d["_id"] for d in coll.find({"loc": {"$geoWithin": {"$geometry": across}}})] == \
        ["dateline"]
    # Index and scan agree.
    hinted = coll.find({"loc": {"$geoWithin": {"$geometry": across}}}).hint([("$natural", 1)])
    assert [d["_id"] for d in hinted] == ["dateline"]


def test_legacy_flat_shapes(db):
    # $box, $polygon and $center are flat (2d) shapes on legacy pairs
    # (https://www.mongodb.com/docs/manual/reference/operator/query/box/).
    coll = db["legacy"]
    coll.insert_many([{"_id": 1, "p": [1, 1]}, {"_id": 2, "p": [5, 5]}, {"_id": 3, "p": [9, 1]}])
    assert [d["_id"] for d in coll.find({"p": {"$geoWithin": {"$box": [[0, 0], [6, 6]]}}})] == [1, 2]
    assert [d["_id"] for d in coll.find(
        {"p": {"$geoWithin": {"$polygon": [[0, 0], [10, 0], [10, 3], [0, 3]]}}})] == [1, 3]
    assert [d["_id"] for d in coll.find({"p": {"$geoWithin": {"$center": [[0, 0], 2]}}})] == [1]


def test_2dsphere_index_rules(db):
    coll = db["rules"]
    coll.create_index([("loc", GEOSPHERE)])
    spec = [i for i in coll.list_indexes() if i["name"] == "loc_2dsphere"][0]
    assert spec["2dsphereIndexVersion"] == 3
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/geospatial/2dsphere/
    # invalid GeoJSON in an indexed field: "Can't extract geo keys" (16755).
    with pytest.raises(WriteError) as e:
        coll.insert_one({"loc": {"type": "Point", "coordinates": [200, 0]}})
    assert e.value.code == 16755
    with pytest.raises(WriteError) as e:
        coll.insert_one({"loc": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1]]]}})
    assert e.value.code == 16755
    # Documents without the field are not indexed (2dsphere v2+ is sparse) and still stored.
    coll.insert_one({"_id": "none", "name": "no location"})
    assert coll.count_documents({"_id": "none"}) == 1
    # A 2d field must lead its index (mongod's 16801); 2d indexes are in test_geo2d.py.
    assert code_of(lambda: coll.create_index([("q", 1), ("p", "2d")])) == 16801
    # Hinting the 2dsphere index for a non-geo query: it cannot answer it.
    assert code_of(lambda: list(coll.find({"name": "x"}).hint("loc_2dsphere"))) == 2


def test_explain_near(places):
    plan = places.find({"location": {"$near": {
        "$geometry": {"type": "Point", "coordinates": [-73.97, 40.77]}}}}).explain()
    assert leaf_stage(plan)["stage"] == "GEO_NEAR_2DSPHERE"
    assert leaf_stage(plan)["indexName"] == "location_2dsphere"
