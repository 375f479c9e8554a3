// Java driver smoke check through a flashdoc router, or against a replica set
// (scripts/driver-smoke.sh [--replset]).
package smoke;

import com.mongodb.ReadPreference;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.Updates;
import java.util.ArrayList;
import java.util.List;
import org.bson.Document;

public class Smoke {
    static void expect(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    public static void main(String[] args) throws InterruptedException {
        try (MongoClient client = MongoClients.create(args[0])) {
            Document hello = client.getDatabase("admin").runCommand(new Document("hello", 1));
            boolean isSet = hello.containsKey("setName");
            if (isSet) {
                expect("rs0".equals(hello.getString("setName")), "hello names set rs0");
                expect(Boolean.TRUE.equals(hello.getBoolean("isWritablePrimary")), "the driver talks to the primary");
            } else {
                expect("isdbgrid".equals(hello.getString("msg")), "hello says isdbgrid");
                client.getDatabase("admin").runCommand(new Document("enableSharding", "java"));
                client.getDatabase("admin").runCommand(new Document("shardCollection", "java.c").append("key", new Document("k", 1)));
            }
            MongoCollection<Document> c = client.getDatabase("java").getCollection("c");
            List<Document> docs = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                docs.add(new Document("k", i).append("v", i * 2));
            }
            c.insertMany(docs);
            if (!isSet) {
                client.getDatabase("admin").runCommand(new Document("split", "java.c").append("middle", new Document("k", 50)));
            }
            expect(c.countDocuments() == 100, "count 100");
            expect(c.find(Filters.eq("k", 7)).first().getInteger("v") == 14, "find k=7");
            expect(c.updateOne(Filters.eq("k", 7), Updates.inc("v", 1)).getModifiedCount() == 1, "update one");
            expect(c.deleteMany(Filters.gte("k", 90)).getDeletedCount() == 10, "delete many");
            List<Integer> top = new ArrayList<>();
            for (Document d : c.find().sort(Sorts.descending("k")).limit(3)) {
                top.add(d.getInteger("k"));
            }
            expect(top.equals(List.of(89, 88, 87)), "sorted merge " + top);
            if (isSet) {
                // The majority writes reach a secondary, which the driver reads from when asked.
                MongoCollection<Document> onSecondary = c.withReadPreference(ReadPreference.secondary());
                long deadline = System.currentTimeMillis() + 20000;
                while (onSecondary.countDocuments() != 90) {
                    expect(System.currentTimeMillis() < deadline, "a secondary holds the 90 documents");
                    Thread.sleep(200);
                }
            }
        }
        System.out.println("java driver: ok");
    }
}
