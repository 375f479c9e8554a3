"""Initiates set rs0 of the `flashdoc serve --replSet rs0` members on the ports given, and
waits until it has a primary and two secondaries (scripts/pymongo-suite.sh, REPLSET=1)."""
import sys
import time

import pymongo

ports = sys.argv[1:]
members = [{"_id": i, "host": f"127.0.0.1:{p}"} for i, p in enumerate(ports)]
with pymongo.MongoClient(f"127.0.0.1:{ports[0]}", directConnection=True) as first:
    first.admin.command("replSetInitiate", {
        "_id": "rs0", "members": members,
        # mongod's default election timeout (10 s): the suite tests the drivers' view of a
        # set, not failover, and its bulk tests (100 100 inserts, 8 MB documents) on a debug
        # build stall a member's storage for seconds, which a 2 s timeout turns into
        # elections mid-test. Heartbeats stay frequent, so secondaries learn the commit point
        # soon.
        "settings": {"electionTimeoutMillis": 10000, "heartbeatIntervalMillis": 400}})
deadline = time.time() + 60
while True:
    hellos = []
    for m in members:
        with pymongo.MongoClient(m["host"], directConnection=True) as c:
            hellos.append(c.admin.command("hello"))
    roles = sorted("primary" if h.get("isWritablePrimary") else
                   "secondary" if h.get("secondary") else "other" for h in hellos)
    if roles == ["primary", "secondary", "secondary"]:
        break
    if time.time() > deadline:
        sys.exit(f"set rs0 did not come up: {roles}")
    time.sleep(0.2)
print("replica set rs0:", ",".join(m["host"] for m in members))
