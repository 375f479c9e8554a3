"""A real program: mongoengine's published models run unchanged against `flashdoc serve`.

The models are verbatim from mongoengine's documentation:
- the tutorial's tumblelog (docs/tutorial.rst, its code in docs/code/tumblelog.py:
  https://docs.mongoengine.org/tutorial.html) — User, Comment, Post with inheritance;
- the text search guide's News model (docs/guide/text-indexes.rst:
  https://docs.mongoengine.org/guide/text-indexes.html) — a text index with weights.
Their documented behaviour is the expected result; pagination is the "page plus total" $facet
(https://www.mongodb.com/docs/manual/reference/operator/aggregation/facet/).
"""
import pytest

mongoengine = pytest.importorskip("mongoengine")
from mongoengine import (  # noqa: E402  (the tutorial's `from mongoengine import *`)
    BooleanField,
    Document,
    EmbeddedDocument,
    EmbeddedDocumentField,
    ListField,
    ReferenceField,
    StringField,
    connect,
    disconnect,
)

from conftest import Server  # noqa: E402


# --- docs/code/tumblelog.py, verbatim ---

class Comment(EmbeddedDocument):
    content = StringField()
    name = StringField(max_length=120)


class User(Document):
    email = StringField(required=True)
    first_name = StringField(max_length=50)
    last_name = StringField(max_length=50)


class Post(Document):
    title = StringField(max_length=120, required=True)
    author = ReferenceField(User)
    tags = ListField(StringField(max_length=30))
    comments = ListField(EmbeddedDocumentField(Comment))

    # bugfix
    meta = {"allow_inheritance": True}


class TextPost(Post):
    content = StringField()


class ImagePost(Post):
    image_path = StringField()


class LinkPost(Post):
    link_url = StringField()


# --- docs/guide/text-indexes.rst, verbatim ---

class News(Document):
    title = StringField()
    content = StringField()
    is_active = BooleanField()

    meta = {'indexes': [
        {'fields': ['$title', "$content"],
         'default_language': 'english',
         'weights': {'title': 10, 'content': 2}
        }
    ]}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("mongoengine"))).start()
    connect("tumblelog", host="127.0.0.1", port=s.port)
    yield s
    disconnect()
    s.stop()


def test_tumblelog_tutorial(engine):
    # The tutorial's script, its printed results as assertions.
    Post.drop_collection()
    john = User(email="jdoe@example.com", first_name="John", last_name="Doe")
    john.save()
    post1 = TextPost(title="Fun with MongoEngine", author=john)
    post1.content = "Took a look at MongoEngine today, looks pretty cool."
    post1.tags = ["mongodb", "mongoengine"]
    post1.save()
    post2 = LinkPost(title="MongoEngine Documentation", author=john)
    post2.link_url = "http://tractiondigital.com/labs/mongoengine/docs"
    post2.tags = ["mongoengine"]
    post2.save()
    # Without a sort the order is unspecified (mongod, too, answers from the _cls index).
    posts = sorted(Post.objects, key=lambda p: p.title)
    assert [p.title for p in posts] == ["Fun with MongoEngine", "MongoEngine Documentation"]
    assert isinstance(posts[0], TextPost) and posts[0].content.startswith("Took a look")
    assert isinstance(posts[1], LinkPost) and posts[1].link_url.endswith("/docs")
    assert posts[0].author.first_name == "John"
    assert [p.title for p in Post.objects(tags="mongodb")] == ["Fun with MongoEngine"]
    assert Post.objects(tags="mongodb").count() == 1
    # Pagination: page 2 of size 1 plus the total, in one $facet.
    page = list(Post.objects.aggregate([
        {"$sort": {"title": 1}},
        {"$facet": {"items": [{"$skip": 1}, {"$limit": 1}, {"$project": {"title": 1, "_id": 0}}],
                    "total": [{"$count": "n"}]}},
    ]))
    assert page == [{"items": [{"title": "MongoEngine Documentation"}], "total": [{"n": 2}]}]


def test_news_text_search(engine):
    News.drop_collection()
    # "Saving a document" from the guide.
    News(title="Using mongodb text search",
         content="Testing text search").save()
    News(title="MongoEngine 0.9 released",
         content="Various improvements").save()
    # "start a text search using QuerySet.search_text"
    document = News.objects.search_text('testing').first()
    assert document.title == "Using mongodb text search"
    document = News.objects.search_text('released').first()
    assert document.title == "MongoEngine 0.9 released"
    # "Ordering by text score": the title weighs 10, the content 2.
    objects = News.objects.search_text('mongo').order_by('$text_score')
    assert list(objects) == []  # "mongo" is no word of either: stems match whole words only
    ranked = list(News.objects.search_text('search mongodb').order_by('$text_score'))
    assert [n.title for n in ranked] == ["Using mongodb text search"]
    # title: "use", "mongodb", "text", "search", one each of 4 tokens → 10 × 0.625 for each of
    # the two terms; content "Testing text search": "search" is 1 of 3 tokens → 2 × (1/6 + 1/2).
    assert ranked[0].get_text_score() == pytest.approx(2 * 10 * 0.625 + 2 * (0.5 / 3 + 0.5))
    # The index mongoengine created is the guide's.
    info = News._get_collection().index_information()
    text = [v for v in info.values() if v["key"] == [("_fts", "text"), ("_ftsx", 1)]]
    assert text and text[0]["weights"] == {"content": 2, "title": 10}
    # Search results paginated through $facet (mongoengine puts the $text $match first).
    for i in range(5):
        News(title=f"flash note {i}", content="flash storage").save()
    page = list(News.objects.search_text('flash').aggregate([
        {"$sort": {"title": 1}},
        {"$facet": {"items": [{"$skip": 2}, {"$limit": 2}, {"$project": {"title": 1, "_id": 0}}],
                    "total": [{"$count": "n"}]}},
    ]))
    assert page == [{"items": [{"title": "flash note 2"}, {"title": "flash note 3"}],
                     "total": [{"n": 5}]}]
