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


def test_out(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/out/ : books grouped
    # by author into `authors`, in the same and in another database.
    books = db["books"]
    books.insert_many([
        {"_id": 8751, "title": "The Banquet", "author": "Dante", "copies": 2},
        {"_id": 8752, "title": "Divine Comedy", "author": "Dante", "copies": 1},
        {"_id": 8645, "title": "Eclogues", "author": "Dante", "copies": 2},
        {"_id": 7000, "title": "The Odyssey", "author": "Homer", "copies": 10},
        {"_id": 7020, "title": "Iliad", "author": "Homer", "copies": 10},
    ])
    group = {"$group": {"_id": "$author", "books": {"$push": "$title"}}}
    assert list(books.aggregate([{"$sort": {"_id": 1}}, group, {"$out": "authors"}])) == []
    assert list(db["authors"].find().sort("_id", 1)) == [
        {"_id": "Dante", "books": ["Eclogues", "The Banquet", "Divine Comedy"]},
        {"_id": "Homer", "books": ["The Odyssey", "Iliad"]},
    ]
    other = db.client["reporting"]["authors"]
    list(books.aggregate([group, {"$out": {"db": "reporting", "coll": "authors"}}]))
    assert sorted(d["_id"] for d in other.find()) == ["Dante", "Homer"]
    # The target's indexes survive a replacement, and enforce it: a duplicate in the output
    # fails the stage and leaves the target as it was (the temporary collection goes).
    db["authors"].create_index("n", unique=True, sparse=True)
    with pytest.raises(OperationFailure) as e:
        list(books.aggregate([{"$project": {"_id": "$author", "n": {"$literal": 1}}}, {"$group": {"_id": "$_id", "n": {"$first": "$n"}}}, {"$out": "authors"}]))
    assert e.value.code == 11000
    assert db["authors"].count_documents({}) == 2
    assert not [c for c in db.list_collection_names() if c.startswith("tmp.agg_out")]
    list(books.aggregate([{"$match": {"author": "Homer"}}, group, {"$out": "authors"}]))
    assert [d["_id"] for d in db["authors"].find()] == ["Homer"]
    assert "n_1" in db["authors"].index_information()
    # $out over its own source, and an empty result leaves an empty collection.
    list(books.aggregate([{"$match": {"copies": 10}}, {"$out": "books"}]))
    assert sorted(d["_id"] for d in books.find()) == [7000, 7020]
    list(books.aggregate([{"$match": {"copies": 99}}, {"$out": "nothing"}]))
    assert "nothing" in db.list_collection_names() and db["nothing"].count_documents({}) == 0
    assert code_of(books, [{"$out": "x"}, {"$match": {}}]) == 40601
    assert code_of(books, [{"$out": "system.x"}]) == 17385


def test_out_through_validator(db):
    # The temporary collection has the target's validator: what the target would refuse,
    # $out refuses (121), and the target stays.
    db.create_collection("checked", validator={"n": {"$type": "int"}})
    db["checked"].insert_one({"_id": 1, "n": 1})
    src = db["checked_src"]
    src.insert_many([{"_id": 1, "n": 2}, {"_id": 2, "n": "two"}])
    assert code_of(src, [{"$out": "checked"}]) == 121
    assert list(db["checked"].find()) == [{"_id": 1, "n": 1}]


def test_merge_modes(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/merge/ , "On-Demand
    # Materialized View: Initial Creation" (salaries into reporting.budgets).
    salaries = db.client["zoo"]["salaries"]
    salaries.insert_many([
        {"_id": 1, "employee": "Ant", "dept": "A", "salary": 100000, "fiscal_year": 2017},
        {"_id": 2, "employee": "Bee", "dept": "A", "salary": 120000, "fiscal_year": 2017},
        {"_id": 3, "employee": "Cat", "dept": "Z", "salary": 115000, "fiscal_year": 2017},
        {"_id": 4, "employee": "Ant", "dept": "A", "salary": 115000, "fiscal_year": 2018},
        {"_id": 5, "employee": "Bee", "dept": "Z", "salary": 145000, "fiscal_year": 2018},
        {"_id": 6, "employee": "Cat", "dept": "Z", "salary": 135000, "fiscal_year": 2018},
        {"_id": 7, "employee": "Gecko", "dept": "A", "salary": 100000, "fiscal_year": 2018},
        {"_id": 8, "employee": "Ant", "dept": "A", "salary": 125000, "fiscal_year": 2019},
        {"_id": 9, "employee": "Bee", "dept": "Z", "salary": 160000, "fiscal_year": 2019},
        {"_id": 10, "employee": "Cat", "dept": "Z", "salary": 150000, "fiscal_year": 2019},
    ])
    group = {"$group": {"_id": {"fiscal_year": "$fiscal_year", "dept": "$dept"}, "salaries": {"$sum": "$salary"}}}
    list(salaries.aggregate([group, {"$merge": {"into": {"db": "reporting", "coll": "budgets"}, "on": "_id",
                                                 "whenMatched": "replace", "whenNotMatched": "insert"}}]))
    budgets = db.client["reporting"]["budgets"]
    got = sorted(((d["_id"]["fiscal_year"], d["_id"]["dept"]), d["salaries"]) for d in budgets.find())
    assert got == [((2017, "A"), 220000), ((2017, "Z"), 115000), ((2018, "A"), 215000),
                   ((2018, "Z"), 280000), ((2019, "A"), 125000), ((2019, "Z"), 310000)]
    # The manual's refresh: new 2019 salaries replace the 2019 totals.
    salaries.insert_many([
        {"_id": 11, "employee": "Wren", "dept": "Z", "salary": 100000, "fiscal_year": 2019},
        {"_id": 12, "employee": "Zebra", "dept": "A", "salary": 150000, "fiscal_year": 2019},
        {"_id": 13, "employee": "headcount1", "dept": "Z", "salary": 120000, "fiscal_year": 2020},
        {"_id": 14, "employee": "headcount2", "dept": "Z", "salary": 120000, "fiscal_year": 2020},
    ])
    list(salaries.aggregate([{"$match": {"fiscal_year": {"$gte": 2019}}}, group,
                             {"$merge": {"into": {"db": "reporting", "coll": "budgets"}, "on": "_id",
                                         "whenMatched": "replace", "whenNotMatched": "insert"}}]))
    got = {(d["_id"]["fiscal_year"], d["_id"]["dept"]): d["salaries"] for d in budgets.find()}
    assert got[(2019, "A")] == 275000 and got[(2019, "Z")] == 410000 and got[(2020, "Z")] == 240000
    assert len(got) == 7

    # The other modes on a small target.
    t = db["merge_target"]
    src = db["merge_src"]
    t.insert_many([{"_id": 1, "a": 1, "keep": True}, {"_id": 2, "a": 2, "keep": True}])
    src.insert_many([{"_id": 2, "a": 20, "b": 1}, {"_id": 3, "a": 30}])

    def merge(**spec):
        list(src.aggregate([{"$merge": {"into": "merge_target", **spec}}]))
        return list(t.find().sort("_id", 1))

    # Default: merge matched documents' fields, insert the rest.
    assert merge() == [{"_id": 1, "a": 1, "keep": True}, {"_id": 2, "a": 20, "keep": True, "b": 1}, {"_id": 3, "a": 30}]
    t.delete_many({"_id": 3})
    assert merge(whenMatched="keepExisting") == [{"_id": 1, "a": 1, "keep": True}, {"_id": 2, "a": 20, "keep": True, "b": 1}, {"_id": 3, "a": 30}]
    t.delete_many({"_id": 3})
    assert merge(whenMatched="replace", whenNotMatched="discard") == [{"_id": 1, "a": 1, "keep": True}, {"_id": 2, "a": 20, "b": 1}]
    with pytest.raises(OperationFailure) as e:
        merge(whenMatched="replace", whenNotMatched="fail")
    assert e.value.code == 13113
    with pytest.raises(OperationFailure) as e:
        merge(whenMatched="fail")
    assert e.value.code == 11000
    # A pipeline with $$new and let variables, as the manual's votes example (month key
    # given literally here).
    t.replace_one({"_id": 2}, {"_id": 2, "a": 2})
    assert merge(whenMatched=[{"$set": {"a": {"$add": ["$a", "$$new.a", "$$bonus"]}}}], let={"bonus": 100, "new": "$$ROOT"},
                 whenNotMatched="discard") == [{"_id": 1, "a": 1, "keep": True}, {"_id": 2, "a": 122}]


def test_merge_on_fields_and_validation(db):
    # `on` other than _id needs a unique index on exactly those fields.
    orgs = db["orgs"]
    src = db["orgs_src"]
    src.insert_many([{"_id": 1, "name": "x", "region": "eu", "n": 1}, {"_id": 2, "name": "y", "region": "us", "n": 2}])
    assert code_of(src, [{"$merge": {"into": "orgs", "on": ["name", "region"]}}]) == 51183
    orgs.create_index([("region", 1), ("name", 1)], unique=True)
    orgs.insert_one({"_id": 9, "name": "x", "region": "eu", "n": 0})
    list(src.aggregate([{"$project": {"_id": 0}}, {"$merge": {"into": "orgs", "on": ["name", "region"], "whenMatched": "merge"}}]))
    assert sorted((d["name"], d["n"]) for d in orgs.find()) == [("x", 1), ("y", 2)]
    assert orgs.find_one({"name": "x"})["_id"] == 9
    # A document without an `on` field cannot be merged.
    assert code_of(src, [{"$project": {"region": 0}}, {"$merge": {"into": "orgs", "on": ["name", "region"]}}]) == 51132
    # The target's validator applies to what $merge writes.
    db.create_collection("valid", validator={"n": {"$type": "int"}})
    db["valid_src"].insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": "two"}])
    assert code_of(db["valid_src"], [{"$merge": {"into": "valid"}}]) == 121
    assert code_of(src, [{"$merge": {"into": "x", "whenMatched": "merge", "let": {"a": 1}}}]) == 51199


def test_graph_lookup(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/graphLookup/ : the
    # employees' reporting hierarchy, and the airports with maxDepth and depthField.
    emp = db["employees"]
    emp.insert_many([
        {"_id": 1, "name": "Dev"},
        {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
        {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
        {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
        {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
        {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
    ])
    out = list(emp.aggregate([
        {"$graphLookup": {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo",
                          "connectToField": "name", "as": "reportingHierarchy"}},
        {"$sort": {"_id": 1}},
    ]))
    chains = {d["name"]: sorted(h["name"] for h in d["reportingHierarchy"]) for d in out}
    assert chains == {"Dev": [], "Eliot": ["Dev"], "Ron": ["Dev", "Eliot"], "Andrew": ["Dev", "Eliot"],
                      "Asya": ["Dev", "Eliot", "Ron"], "Dan": ["Andrew", "Dev", "Eliot"]}
    db["airports"].insert_many([
        {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]},
        {"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]},
        {"_id": 2, "airport": "ORD", "connects": ["JFK"]},
        {"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]},
        {"_id": 4, "airport": "LHR", "connects": ["PWM"]},
    ])
    db["travelers"].insert_many([
        {"_id": 1, "name": "Dev", "nearestAirport": "JFK"},
        {"_id": 2, "name": "Eliot", "nearestAirport": "JFK"},
        {"_id": 3, "name": "Jeff", "nearestAirport": "BOS"},
    ])
    out = list(db["travelers"].aggregate([
        {"$graphLookup": {"from": "airports", "startWith": "$nearestAirport", "connectFromField": "connects",
                          "connectToField": "airport", "maxDepth": 2, "depthField": "numConnections", "as": "destinations"}},
        {"$sort": {"_id": 1}},
    ]))
    reach = [sorted((a["airport"], a["numConnections"]) for a in d["destinations"]) for d in out]
    assert reach[0] == reach[1] == [("BOS", 1), ("JFK", 0), ("ORD", 1), ("PWM", 2)]
    assert reach[2] == [("BOS", 0), ("JFK", 1), ("LHR", 2), ("ORD", 2), ("PWM", 1)]
    bad = {"from": "airports", "startWith": "$x", "connectFromField": "c", "connectToField": "t", "as": "d"}
    assert code_of(emp, [{"$graphLookup": {**bad, "maxDepth": -1}}]) == 40101
    assert code_of(emp, [{"$graphLookup": {"from": "airports"}}]) == 40105


def test_set_window_fields(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/setWindowFields/ : the
    # cakeSales examples (cumulative and moving quantities per state, a range window on price,
    # a range window in months on the order date, ranks).
    from datetime import datetime

    cakes = db["cakeSales"]
    cakes.insert_many([
        {"_id": 0, "type": "chocolate", "orderDate": datetime(2020, 5, 18, 14, 10, 30), "state": "CA", "price": 13, "quantity": 120},
        {"_id": 1, "type": "chocolate", "orderDate": datetime(2021, 3, 20, 11, 30, 5), "state": "WA", "price": 14, "quantity": 140},
        {"_id": 2, "type": "vanilla", "orderDate": datetime(2021, 1, 11, 6, 31, 15), "state": "CA", "price": 12, "quantity": 145},
        {"_id": 3, "type": "vanilla", "orderDate": datetime(2020, 2, 8, 13, 13, 23), "state": "WA", "price": 13, "quantity": 104},
        {"_id": 4, "type": "strawberry", "orderDate": datetime(2019, 5, 18, 16, 9, 1), "state": "CA", "price": 41, "quantity": 162},
        {"_id": 5, "type": "strawberry", "orderDate": datetime(2019, 1, 8, 6, 12, 3), "state": "WA", "price": 43, "quantity": 134},
    ])

    def swf(sort, output):
        stage = {"$setWindowFields": {"partitionBy": "$state", "sortBy": sort, "output": output}}
        return list(cakes.aggregate([stage]))

    out = swf({"orderDate": 1}, {
        "cumulativeQuantityForState": {"$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}},
        "averageQuantity": {"$avg": "$quantity", "window": {"documents": [-1, 0]}},
        "recentOrders": {"$push": "$_id", "window": {"range": ["unbounded", 10], "unit": "month"}},
    })
    assert [d["_id"] for d in out] == [4, 0, 2, 5, 3, 1]
    assert [d["cumulativeQuantityForState"] for d in out] == [162, 282, 427, 134, 238, 378]
    assert [d["averageQuantity"] for d in out] == [162, 141, 132.5, 134, 119, 122]
    assert [d["recentOrders"] for d in out] == [[4], [4, 0, 2], [4, 0, 2], [5], [5, 3], [5, 3, 1]]
    out = swf({"price": 1}, {"quantityFromSimilarOrders": {"$sum": "$quantity", "window": {"range": [-10, 10]}}})
    assert [(d["_id"], d["quantityFromSimilarOrders"]) for d in out] == [(2, 265), (0, 265), (4, 162), (3, 244), (1, 244), (5, 134)]
    out = swf({"quantity": -1}, {"rankQuantityForState": {"$rank": {}}, "n": {"$documentNumber": {}}})
    assert [(d["_id"], d["rankQuantityForState"]) for d in out] == [(4, 1), (2, 2), (0, 3), (1, 1), (5, 2), (3, 3)]
    # A report's shape: totals per state by $group, then a running total across states.
    out = list(cakes.aggregate([
        {"$group": {"_id": "$state", "qty": {"$sum": "$quantity"}}},
        {"$setWindowFields": {"sortBy": {"_id": 1}, "output": {"running": {"$sum": "$qty", "window": {"documents": ["unbounded", "current"]}}}}},
    ]))
    assert out == [{"_id": "CA", "qty": 427, "running": 427}, {"_id": "WA", "qty": 378, "running": 805}]
    # mongod's codes for misplaced functions and windows.
    assert code_of(cakes, [{"$setWindowFields": {"output": {"r": {"$rank": {}}}}}]) == 5371602
    assert code_of(cakes, [{"$setWindowFields": {"output": {"s": {"$sum": "$quantity", "window": {"documents": [-1, 0]}}}}}]) == 5339901
    assert code_of(cakes, [{"$setWindowFields": {"sortBy": {"price": 1, "_id": 1}, "output": {"s": {"$sum": "$quantity", "window": {"range": [-1, 0]}}}}}]) == 5339902
    assert code_of(cakes, [{"$setWindowFields": {"sortBy": {"orderDate": 1}, "output": {"s": {"$sum": "$quantity", "window": {"range": [-1, 0]}}}}}]) == 5429413


def test_coll_stats(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/collStats/ : count and
    # storageStats as db.collection.stats() has them.
    c = db["statted"]
    c.insert_many([{"_id": i, "pad": "x" * 100} for i in range(50)])
    c.create_index("pad")
    [out] = list(c.aggregate([{"$collStats": {"count": {}, "storageStats": {}}}]))
    assert out["ns"] == "stages.statted" and out["count"] == 50
    st = out["storageStats"]
    plain = db.command("collStats", "statted")
    assert st["count"] == 50 and st["nindexes"] == 2 and st["size"] == plain["size"]
    assert set(st["indexSizes"]) == {"_id_", "pad_1"}
    [scaled] = list(c.aggregate([{"$collStats": {"storageStats": {"scale": 1024}}}]))
    assert scaled["storageStats"]["scaleFactor"] == 1024 and "count" not in scaled
    assert scaled["storageStats"]["size"] == plain["size"] // 1024
    assert code_of(c, [{"$match": {}}, {"$collStats": {}}]) == 40602
    assert code_of(c, [{"$collStats": {"latencyStats": {}}}]) == 238
    assert code_of(db["no_such"], [{"$collStats": {"count": {}}}]) == 26
