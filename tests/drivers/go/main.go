// Go driver smoke check through a flashdoc router, or against a replica set
// (scripts/driver-smoke.sh [--replset]).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/readpref"
)

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func expect(ok bool, what string) {
	if !ok {
		fmt.Fprintln(os.Stderr, "failed:", what)
		os.Exit(1)
	}
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := mongo.Connect(ctx, options.Client().ApplyURI(os.Args[1]))
	check(err)
	var hello bson.M
	check(client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello))
	_, isSet := hello["setName"]
	if isSet {
		expect(hello["setName"] == "rs0", "hello names set rs0")
		expect(hello["isWritablePrimary"] == true, "the driver talks to the primary")
	} else {
		expect(hello["msg"] == "isdbgrid", "hello says isdbgrid")
		check(client.Database("admin").RunCommand(ctx, bson.D{{Key: "enableSharding", Value: "gosmoke"}}).Err())
		check(client.Database("admin").RunCommand(ctx, bson.D{{Key: "shardCollection", Value: "gosmoke.c"}, {Key: "key", Value: bson.D{{Key: "k", Value: "hashed"}}}}).Err())
	}
	c := client.Database("gosmoke").Collection("c")
	docs := []interface{}{}
	for i := 0; i < 100; i++ {
		docs = append(docs, bson.D{{Key: "k", Value: i}, {Key: "v", Value: i * 2}})
	}
	_, err = c.InsertMany(ctx, docs)
	check(err)
	n, err := c.CountDocuments(ctx, bson.D{})
	check(err)
	expect(n == 100, "count 100")
	var one bson.M
	check(c.FindOne(ctx, bson.D{{Key: "k", Value: 7}}).Decode(&one))
	expect(one["v"] == int32(14), "find k=7")
	u, err := c.UpdateOne(ctx, bson.D{{Key: "k", Value: 7}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: 1}}}})
	check(err)
	expect(u.ModifiedCount == 1, "update one")
	d, err := c.DeleteMany(ctx, bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 90}}}})
	check(err)
	expect(d.DeletedCount == 10, "delete many")
	if isSet {
		// The majority writes reach a secondary, which the driver reads from when asked.
		onSecondary := client.Database("gosmoke", options.Database().SetReadPreference(readpref.Secondary())).Collection("c")
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, err := onSecondary.CountDocuments(ctx, bson.D{})
			check(err)
			if n == 90 {
				break
			}
			expect(time.Now().Before(deadline), "a secondary holds the 90 documents")
			time.Sleep(200 * time.Millisecond)
		}
	}
	check(client.Disconnect(ctx))
	fmt.Println("go driver: ok")
}
