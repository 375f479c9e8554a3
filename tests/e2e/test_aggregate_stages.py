"""The aggregation stages of issue 14 against a real server: $facet, $lookup with let,
$unionWith, $bucket, $bucketAuto, $sample. Expected results follow the MongoDB manual's pages
(cited per test); error codes are mongod's."""
import pytest
from pymongo.errors import OperationFailure

from conftest import Server


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    # One server for the module: these tests only read what each one writes to its own
    # collections, and a server start per test costs more than the tests themselves.
    s = Server(str(tmp_path_factory.mktemp("agg-stages"))).start()
    c = s.client()
    yield c["stages"]
    c.close()
    s.stop()


def code_of(coll, pipeline):
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate(pipeline))
    return e.value.code


def test_facet_page_plus_total(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/facet/ : sub-pipelines
    # over the same input, each an array of the single output document.
    items = db["facet_items"]
    items.insert_many([{"_id": i, "kind": "odd" if i % 2 else "even", "price": i * 10} for i in range(1, 26)])
    out = list(items.aggregate([
        {"$match": {"price": {"$gte": 50}}},
        {"$facet": {
            "data": [{"$sort": {"_id": 1}}, {"$skip": 10}, {"$limit": 10}, {"$project": {"_id": 1}}],
            "total": [{"$count": "count"}],
            "byKind": [{"$sortByCount": "$kind"}],
        }},
    ]))
    assert out == [{
        "data": [{"_id": i} for i in range(15, 25)],
        "total": [{"count": 21}],
        "byKind": [{"_id": "odd", "count": 11}, {"_id": "even", "count": 10}],
    }]
    # Over no input: one document of empty arrays.
    assert list(items.aggregate([{"$match": {"price": -1}}, {"$facet": {"d": [], "t": [{"$count": "n"}]}}])) == [{"d": [], "t": []}]
    assert code_of(items, [{"$facet": {}}]) == 40169
    assert code_of(items, [{"$facet": {"a": 1}}]) == 40170
    assert code_of(items, [{"$facet": {"a": [1]}}]) == 40171
    assert code_of(items, [{"$facet": {"a": [{"$facet": {"b": []}}]}}]) == 40600
    assert code_of(items, [{"$facet": {"a": [{"$out": "x"}]}}]) == 40600
    assert code_of(items, [{"$facet": {"$a": []}}]) == 16410


def test_lookup_let_pipeline(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/lookup/ , "Perform
    # Multiple Joins and a Correlated Subquery with $lookup" (orders and warehouses).
    db["orders"].insert_many([
        {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
        {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
        {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
    ])
    db["warehouses"].insert_many([
        {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
        {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
        {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
        {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
        {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
    ])
    out = list(db["orders"].aggregate([
        {"$lookup": {
            "from": "warehouses",
            "let": {"order_item": "$item", "order_qty": "$ordered"},
            "pipeline": [
                {"$match": {"$expr": {"$and": [
                    {"$eq": ["$stock_item", "$$order_item"]},
                    {"$gte": ["$instock", "$$order_qty"]},
                ]}}},
                {"$project": {"stock_item": 0, "_id": 0}},
            ],
            "as": "stockdata",
        }},
        {"$sort": {"_id": 1}},
    ]))
    assert out == [
        {"_id": 1, "item": "almonds", "price": 12, "ordered": 2,
         "stockdata": [{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}]},
        {"_id": 2, "item": "pecans", "price": 20, "ordered": 1, "stockdata": [{"warehouse": "A", "instock": 80}]},
        {"_id": 3, "item": "cookies", "price": 10, "ordered": 60, "stockdata": [{"warehouse": "A", "instock": 80}]},
    ]
    bad = {"from": "warehouses", "pipeline": [], "as": "x"}
    assert code_of(db["orders"], [{"$lookup": {**bad, "let": {"Item": "$item"}}}]) == 16867
    assert code_of(db["orders"], [{"$lookup": {**bad, "let": 1}}]) == 9
    # The variables exist only inside the sub-pipeline.
    assert code_of(db["orders"], [{"$lookup": {**bad, "let": {"v": 1}}}, {"$project": {"v": "$$v"}}]) == 17276


def test_union_with(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/unionWith/ , "Report 2:
    # Aggregated Sales by Items" over two of its yearly collections.
    db["sales_2017"].insert_many([
        {"store": "General Store", "item": "Chocolates", "quantity": 150},
        {"store": "ShopMart", "item": "Chocolates", "quantity": 50},
        {"store": "General Store", "item": "Cookies", "quantity": 100},
        {"store": "ShopMart", "item": "Pie", "quantity": 10},
        {"store": "Specialty Shop", "item": "Pie", "quantity": 5},
    ])
    db["sales_2018"].insert_many([
        {"store": "General Store", "item": "Cheese", "quantity": 30},
        {"store": "ShopMart", "item": "Cheese", "quantity": 50},
        {"store": "General Store", "item": "Chocolates", "quantity": 125},
        {"store": "ShopMart", "item": "Chocolates", "quantity": 150},
        {"store": "General Store", "item": "Cookies", "quantity": 200},
        {"store": "ShopMart", "item": "Cookies", "quantity": 100},
        {"store": "Specialty Shop", "item": "Pie", "quantity": 30},
    ])
    out = list(db["sales_2017"].aggregate([
        {"$unionWith": "sales_2018"},
        {"$group": {"_id": "$item", "total": {"$sum": "$quantity"}}},
        {"$sort": {"total": -1}},
    ]))
    assert out == [{"_id": "Chocolates", "total": 475}, {"_id": "Cookies", "total": 400},
                   {"_id": "Cheese", "total": 80}, {"_id": "Pie", "total": 45}]
    out = list(db["sales_2017"].aggregate([
        {"$project": {"_id": 0, "item": 1, "year": {"$literal": 2017}}},
        {"$unionWith": {"coll": "sales_2018", "pipeline": [
            {"$match": {"item": "Cheese"}}, {"$project": {"_id": 0, "item": 1, "year": {"$literal": 2018}}}]}},
        {"$match": {"item": {"$in": ["Cheese", "Pie"]}}},
    ]))
    assert out == [{"item": "Pie", "year": 2017}, {"item": "Pie", "year": 2017},
                   {"item": "Cheese", "year": 2018}, {"item": "Cheese", "year": 2018}]
    assert code_of(db["sales_2017"], [{"$unionWith": 1}]) == 9
    assert code_of(db["sales_2017"], [{"$unionWith": {"pipeline": []}}]) == 40414
    assert code_of(db["sales_2017"], [{"$unionWith": {"coll": "sales_2018", "bogus": 1}}]) == 40415


def test_bucket(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/bucket/ , "Bucket by
    # Year and Filter by Bucket Results".
    artists = db["artists"]
    artists.insert_many([
        {"_id": 1, "last_name": "Bernard", "first_name": "Emil", "year_born": 1868, "year_died": 1941, "nationality": "France"},
        {"_id": 2, "last_name": "Rippl-Ronai", "first_name": "Joszef", "year_born": 1861, "year_died": 1927, "nationality": "Hungary"},
        {"_id": 3, "last_name": "Ostroumova", "first_name": "Anna", "year_born": 1871, "year_died": 1955, "nationality": "Russia"},
        {"_id": 4, "last_name": "Van Gogh", "first_name": "Vincent", "year_born": 1853, "year_died": 1890, "nationality": "Holland"},
        {"_id": 5, "last_name": "Maurer", "first_name": "Alfred", "year_born": 1868, "year_died": 1932, "nationality": "USA"},
        {"_id": 6, "last_name": "Munch", "first_name": "Edvard", "year_born": 1863, "year_died": 1944, "nationality": "Norway"},
        {"_id": 7, "last_name": "Redon", "first_name": "Odilon", "year_born": 1840, "year_died": 1916, "nationality": "France"},
        {"_id": 8, "last_name": "Diriks", "first_name": "Edvard", "year_born": 1855, "year_died": 1930, "nationality": "Norway"},
    ])
    out = list(artists.aggregate([
        {"$bucket": {
            "groupBy": "$year_born",
            "boundaries": [1840, 1850, 1860, 1870, 1880],
            "default": "Other",
            "output": {
                "count": {"$sum": 1},
                "artists": {"$push": {"name": {"$concat": ["$first_name", " ", "$last_name"]}, "year_born": "$year_born"}},
            },
        }},
        {"$match": {"count": {"$gt": 3}}},
    ]))
    assert out == [{"_id": 1860, "count": 4, "artists": [
        {"name": "Emil Bernard", "year_born": 1868},
        {"name": "Joszef Rippl-Ronai", "year_born": 1861},
        {"name": "Alfred Maurer", "year_born": 1868},
        {"name": "Edvard Munch", "year_born": 1863},
    ]}]
    counts = list(artists.aggregate([{"$bucket": {"groupBy": "$year_born", "boundaries": [1840, 1850, 1860, 1870, 1880]}}]))
    assert counts == [{"_id": 1840, "count": 1}, {"_id": 1850, "count": 2}, {"_id": 1860, "count": 4}, {"_id": 1870, "count": 1}]
    # A value outside every bucket and no default; unsorted and mixed boundaries.
    assert code_of(artists, [{"$bucket": {"groupBy": "$year_born", "boundaries": [1850, 1860]}}]) == 40066
    assert code_of(artists, [{"$bucket": {"groupBy": "$year_born", "boundaries": [1860, 1850]}}]) == 40194
    assert code_of(artists, [{"$bucket": {"groupBy": "$year_born", "boundaries": [1850, "x"]}}]) == 40193
    assert code_of(artists, [{"$bucket": {"groupBy": "$year_born", "boundaries": [1850]}}]) == 40192
    assert code_of(artists, [{"$bucket": {"groupBy": "$year_born", "boundaries": [1840, 1880], "default": 1850}}]) == 40199
    assert code_of(artists, [{"$bucket": {"groupBy": "$year_born"}}]) == 40198


def test_bucket_auto(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/bucketAuto/ : the
    # artwork collection's prices into four buckets.
    from bson.decimal128 import Decimal128 as D

    art = db["artwork"]
    art.insert_many([
        {"_id": 1, "title": "The Pillars of Society", "artist": "Grosz", "year": 1926, "price": D("199.99")},
        {"_id": 2, "title": "Melancholy III", "artist": "Munch", "year": 1902, "price": D("280.00")},
        {"_id": 3, "title": "Dancer", "artist": "Miro", "year": 1925, "price": D("76.04")},
        {"_id": 4, "title": "The Great Wave off Kanagawa", "artist": "Hokusai", "price": D("167.30")},
        {"_id": 5, "title": "The Persistence of Memory", "artist": "Dali", "year": 1931, "price": D("483.00")},
        {"_id": 6, "title": "Composition VII", "artist": "Kandinsky", "year": 1913, "price": D("385.00")},
        {"_id": 7, "title": "The Scream", "artist": "Munch", "price": D("159.00")},
        {"_id": 8, "title": "Blue Flower", "artist": "O'Keefe", "year": 1918, "price": D("118.42")},
    ])
    out = list(art.aggregate([{"$bucketAuto": {"groupBy": "$price", "buckets": 4}}]))
    assert out == [
        {"_id": {"min": D("76.04"), "max": D("159.00")}, "count": 2},
        {"_id": {"min": D("159.00"), "max": D("199.99")}, "count": 2},
        {"_id": {"min": D("199.99"), "max": D("385.00")}, "count": 2},
        {"_id": {"min": D("385.00"), "max": D("483.00")}, "count": 2},
    ]
    # Granularity: _id 0..99 into 5 buckets on R5 and on powers of two, boundaries as mongod's
    # BucketAutoStage rounds them (the bucket grows to its rounded-up maximum).
    things = db["things"]
    things.insert_many([{"_id": i} for i in range(100)])
    r5 = list(things.aggregate([{"$bucketAuto": {"groupBy": "$_id", "buckets": 5, "granularity": "R5"}}]))
    assert r5 == [{"_id": {"min": 0, "max": 25}, "count": 25}, {"_id": {"min": 25, "max": 63}, "count": 38},
                  {"_id": {"min": 63, "max": 100}, "count": 37}]
    p2 = list(things.aggregate([{"$bucketAuto": {"groupBy": "$_id", "buckets": 5, "granularity": "POWERSOF2"}}]))
    assert p2 == [{"_id": {"min": 0, "max": 32}, "count": 32}, {"_id": {"min": 32, "max": 64}, "count": 32},
                  {"_id": {"min": 64, "max": 128}, "count": 36}]
    assert code_of(things, [{"$bucketAuto": {"groupBy": "$_id", "buckets": 0}}]) == 40243
    assert code_of(things, [{"$bucketAuto": {"groupBy": "$_id", "buckets": 2, "granularity": "R3"}}]) == 40257
    assert code_of(art, [{"$bucketAuto": {"groupBy": "$title", "buckets": 2, "granularity": "E12"}}]) == 40258


def test_sample(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/sample/ : N documents
    # drawn at random, each at most once.
    users = db["users"]
    users.insert_many([{"_id": i, "name": f"u{i}"} for i in range(30)])
    for size in (0, 3, 30, 100):
        got = [d["_id"] for d in users.aggregate([{"$sample": {"size": size}}])]
        assert len(got) == min(size, 30)
        assert len(set(got)) == len(got) and set(got) <= set(range(30))
    assert code_of(users, [{"$sample": {"size": -1}}]) == 28747
    assert code_of(users, [{"$sample": {}}]) == 28749
    assert code_of(users, [{"$sample": 5}]) == 28745
