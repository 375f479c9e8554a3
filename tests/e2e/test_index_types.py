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


# --- text indexes ------------------------------------------------------------------------

ARTICLES = [
    {"_id": 1, "subject": "coffee", "author": "xyz", "views": 50},
    {"_id": 2, "subject": "Coffee Shopping", "author": "efg", "views": 5},
    {"_id": 3, "subject": "Baking a cake", "author": "abc", "views": 90},
    {"_id": 4, "subject": "baking", "author": "xyz", "views": 100},
    {"_id": 5, "subject": "Café Con Leche", "author": "abc", "views": 200},
    {"_id": 6, "subject": "Сырники", "author": "jkl", "views": 80},
    {"_id": 7, "subject": "coffee and cream", "author": "efg", "views": 10},
    {"_id": 8, "subject": "Cafe con Leche", "author": "xyz", "views": 10},
]


@pytest.fixture(scope="module")
def articles(db):
    # The collection of https://www.mongodb.com/docs/manual/reference/operator/query/text/#examples
    c = db["articles"]
    c.insert_many(ARTICLES)
    c.create_index([("subject", TEXT)])
    return c


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def test_text_search_examples_from_the_manual(articles):
    # https://www.mongodb.com/docs/manual/reference/operator/query/text/#examples
    assert ids(articles.find({"$text": {"$search": "coffee"}})) == [1, 2, 7]
    assert ids(articles.find({"$text": {"$search": "bake coffee cake"}})) == [1, 2, 3, 4, 7]
    assert ids(articles.find({"$text": {"$search": "\"coffee shop\""}})) == [2]
    assert ids(articles.find({"$text": {"$search": "coffee -shop"}})) == [1, 7]
    assert ids(articles.find({"$text": {"$search": "leche", "$language": "es"}})) == [5, 8]
    assert ids(articles.find({"$text": {"$search": "Coffee", "$caseSensitive": True}})) == [2]
    assert ids(articles.find({"$text": {"$search": "CAFÉ"}})) == [5, 8]
    assert ids(articles.find({"$text": {"$search": "CAFÉ", "$diacriticSensitive": True}})) == [5]
    assert ids(articles.find({"$text": {"$search": "coffee"}, "views": {"$gt": 5}})) == [1, 7]


def test_text_score_projection_and_sort(articles):
    # https://www.mongodb.com/docs/manual/reference/operator/query/text/#return-the-text-search-score
    got = list(articles.find({"$text": {"$search": "coffee"}},
                             {"score": {"$meta": "textScore"}, "_id": 1})
               .sort([("score", {"$meta": "textScore"})]))
    assert [d["_id"] for d in got][0] == 1
    assert [d["score"] for d in got] == [1.0, 0.75, 0.75]
    assert all(set(d) == {"_id", "score"} for d in got)
    # A projection of textScore without $text: 40218.
    assert code_of(lambda: list(articles.find({}, {"s": {"$meta": "textScore"}}))) == 40218
    plan = articles.find({"$text": {"$search": "coffee -shop"}}).explain()
    wp = plan["queryPlanner"]["winningPlan"]
    assert wp["stage"] == "TEXT_MATCH"
    assert wp["parsedTextQuery"] == {"terms": ["coffe"], "negatedTerms": ["shop"],
                                     "phrases": [], "negatedPhrases": []}


def test_text_in_aggregation(articles):
    # https://www.mongodb.com/docs/manual/tutorial/text-search-in-aggregation/
    out = list(articles.aggregate([
        {"$match": {"$text": {"$search": "cake tea"}}},
        {"$project": {"title": "$subject", "score": {"$meta": "textScore"}}},
        {"$sort": {"score": {"$meta": "textScore"}}},
    ]))
    assert [(d["_id"], d["title"]) for d in out] == [(3, "Baking a cake")]
    assert out[0]["score"] == pytest.approx(0.75)
    # $text anywhere but the first stage: 17313.
    assert code_of(lambda: list(articles.aggregate([{"$match": {}}, {"$match": {"$text": {"$search": "x"}}}]))) == 17313
    # A text score without $text: 40218.
    assert code_of(lambda: list(articles.aggregate([{"$project": {"s": {"$meta": "textScore"}}}]))) == 40218


def test_text_errors(db, articles):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/ : one text index
    # per collection; $text needs one (IndexNotFound 27); $text only at the top level.
    assert code_of(lambda: articles.create_index([("author", TEXT)])) == 85
    plain = db["no_text_index"]
    plain.insert_one({"a": "coffee"})
    assert code_of(lambda: list(plain.find({"$text": {"$search": "coffee"}}))) == 27
    assert code_of(lambda: list(articles.find({"$nor": [{"$text": {"$search": "x"}}]}))) == 2
    assert code_of(lambda: list(articles.find({"a": {"$elemMatch": {"$text": {"$search": "x"}}}}))) == 2
    assert code_of(lambda: list(articles.find({"$text": {"$search": "x", "$language": "klingon"}}))) == 2
    assert code_of(lambda: list(articles.find({"$text": {}}))) == 9
    info = articles.index_information()["subject_text"]
    assert info["key"] == [("_fts", "text"), ("_ftsx", 1)]
    assert info["weights"] == {"subject": 1}
    assert info["default_language"] == "english" and info["textIndexVersion"] == 3


def test_text_weights_language_override_and_wildcard(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-text/specify-text-index-language/
    quotes = db["quotes"]
    quotes.insert_many([
        {"_id": 1, "language": "portuguese", "original": "A sorte protege os audazes.",
         "translation": [{"language": "english", "quote": "Fortune favors the bold."},
                         {"language": "spanish", "quote": "La suerte protege a los audaces."}]},
        {"_id": 2, "language": "spanish", "original": "Nada hay más surrealista que la realidad.",
         "translation": [{"language": "english", "quote": "There is nothing more surreal than reality."}]},
        {"_id": 3, "original": "is this a dagger which I see before me.",
         "translation": {"language": "spanish", "quote": "Es este un puñal que veo delante de mí."}},
    ])
    quotes.create_index([("original", TEXT), ("translation.quote", TEXT)], weights={"original": 5})
    assert ids(quotes.find({"$text": {"$search": "dagger"}})) == [3]
    assert ids(quotes.find({"$text": {"$search": "protege", "$language": "portuguese"}})) == [1]
    # A language nobody supports in a new document is refused (17262).
    assert code_of(lambda: quotes.insert_one({"language": "klingon", "original": "x"})) == 17262
    blog = db["blog"]
    blog.create_index([("$**", TEXT)], name="TextIndex")
    blog.insert_many([{"_id": 1, "a": {"b": "flash storage"}}, {"_id": 2, "c": ["ssd", "flash"]}])
    assert ids(blog.find({"$text": {"$search": "flash"}})) == [1, 2]
    assert blog.index_information()["TextIndex"]["weights"] == {"$**": 1}


# --- wildcard indexes --------------------------------------------------------------------


def test_wildcard_index_on_all_fields(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-wildcard/
    products = db["products"]
    products.insert_many([
        {"_id": 1, "product_name": "Spy Coat", "attributes": {"material": ["Tweed", "Wool", "Leather"], "size": {"length": 72, "units": "inches"}}},
        {"_id": 2, "product_name": "Spy Pen", "attributes": {"colors": ["Blue", "Black"], "secret_feature": {"name": "laser", "power": "1000", "units": "watts"}}},
        {"_id": 3, "product_name": "Spy Book"},
    ])
    products.create_index({"$**": 1})
    leaf = winning_ixscan(products.find({"attributes.size.length": {"$gt": 60}}).explain())
    assert leaf["stage"] == "IXSCAN" and leaf["indexName"] == "$**_1"
    assert ids(products.find({"attributes.size.length": {"$gt": 60}})) == [1]
    assert ids(products.find({"attributes.material": "Wool"})) == [1]
    assert ids(products.find({"attributes.secret_feature.name": "laser"})) == [2]
    # Wildcard restrictions: no null equality, no $exists: false, no document equality.
    for q in ({"product_name": None}, {"attributes": {"$exists": False}},
              {"attributes.size": {"length": 72, "units": "inches"}}):
        assert winning_ixscan(products.find(q).explain())["stage"] == "COLLSCAN", q
    assert ids(products.find({"attributes": {"$exists": False}})) == [3]
    assert code_of(lambda: products.create_index({"$**": 1}, name="other", unique=True)) == 67


def test_wildcard_subtree_and_projection(db):
    # https://www.mongodb.com/docs/manual/core/indexes/index-types/index-wildcard/create-wildcard-index-single-field/
    # and .../create-wildcard-index-multiple-fields/ (wildcardProjection).
    c = db["wild_proj"]
    c.insert_many([{"_id": i, "a": {"x": i}, "b": {"x": i}, "c": i} for i in range(6)])
    c.create_index({"a.$**": 1})
    assert winning_ixscan(c.find({"a.x": 3}).explain())["indexName"] == "a.$**_1"
    assert winning_ixscan(c.find({"b.x": 3}).explain())["stage"] == "COLLSCAN"
    c.create_index({"$**": 1}, wildcardProjection={"b": 1})
    assert winning_ixscan(c.find({"b.x": {"$lt": 2}}).explain())["indexName"] == "$**_1"
    assert ids(c.find({"b.x": {"$lt": 2}})) == [0, 1]
    assert winning_ixscan(c.find({"c": 3}).explain())["stage"] == "COLLSCAN"
    assert c.index_information()["$**_1"]["wildcardProjection"] == {"b": 1}
    assert code_of(lambda: c.create_index({"a.$**": 1}, name="p", wildcardProjection={"a": 1})) == 9


def test_index_kinds_survive_a_restart(tmp_path):
    # The catalog keeps each kind's full spec; a restarted server plans with it again.
    s = Server(str(tmp_path)).start()
    try:
        c = s.client()["restart"]["c"]
        c.insert_many([{"_id": i, "t": f"flash note {i}", "k": {"v": i}, "live": i % 2 == 0} for i in range(6)])
        c.create_index([("t", TEXT)], default_language="spanish", name="t_text")
        c.create_index("k.v", partialFilterExpression={"live": True}, name="live_k")
        c.create_index({"k.$**": 1})
        before = c.index_information()
        s.stop()
        s.start()
        c = s.client()["restart"]["c"]
        assert c.index_information() == before
        assert ids(c.find({"$text": {"$search": "notas"}})) == list(range(6))  # Spanish stems
        assert winning_ixscan(c.find({"k.v": 2, "live": True}).explain())["indexName"] == "live_k"
        assert winning_ixscan(c.find({"k.v": {"$gt": 3}}).explain())["indexName"] == "k.$**_1"
        assert ids(c.find({"k.v": {"$gt": 3}})) == [4, 5]
    finally:
        s.stop()


def test_to_hashed_index_key(db):
    # https://www.mongodb.com/docs/manual/reference/operator/aggregation/toHashedIndexKey/ :
    # "string to hash" hashes to 763543691661428748, the key a hashed index stores.
    c = db["hash_example"]
    c.insert_one({"_id": 1, "val": "string to hash"})
    out = list(c.aggregate([{"$addFields": {"hashedVal": {"$toHashedIndexKey": "$val"}}}]))
    assert out == [{"_id": 1, "val": "string to hash", "hashedVal": 763543691661428748}]
