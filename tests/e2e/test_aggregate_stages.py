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
