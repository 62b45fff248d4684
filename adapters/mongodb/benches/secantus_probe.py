#!/usr/bin/env python3
"""Which query shapes a MongoDB-compatible server runs fast, for tern's pushdown.

Each variant runs on a freshly loaded collection of --docs documents
{_id: int, title, text, author} and applies tern's benchmark change (add likes = 0,
rename text to content, version 1) or reads ids the way a batch would. Prints the
seconds and the ratio to the single update_many (the floor). Used for the MongoDB
section of docs/benchmarks.md:

    python3 -m venv venv && venv/bin/pip install pymongo
    venv/bin/python adapters/mongodb/benches/secantus_probe.py --url mongodb://127.0.0.1:27042 --docs 200000
"""
import argparse
import time

from pymongo import MongoClient

UPDATE = {"$set": {"likes": 0, "_v": 1}, "$rename": {"text": "content"}}
AT_0 = {"_v": {"$in": [None, 0]}}
# tern's tests of "this step changes the entity", as an $expr (before) and as
# plain query operators (the fast path now).
EXPR = {"$expr": {"$and": [
    {"$not": [{"$and": [{"$in": [{"$type": "$likes"}, ["int", "long"]]},
                        {"$eq": ["$likes", {"$literal": 0}]}]}]},
    {"$ne": [{"$type": "$text"}, "missing"]}]}}
PLAIN = [{"$nor": [{"$and": [{"likes": {"$eq": 0}}, {"likes": {"$type": ["int", "long"]}},
                             {"likes": {"$not": {"$type": "array"}}}]}]},
         {"text": {"$exists": True}}]


def ranges(col, n, size, extra):
    """update_many per _id range of `size`, bounds known (no id cursor)."""
    for s in range(0, n, size):
        col.update_many({"$and": [{"_id": {"$gte": s, "$lte": min(n, s + size) - 1}}] + extra}, UPDATE)


def batches(col, size, extra, use_in=False):
    """Ids from a cursor, then update_many per batch: by _id range (sorted cursor) or $in."""
    cur = col.find(AT_0 if use_in else {}, {"_id": 1}).batch_size(size)
    if not use_in:
        cur = cur.sort("_id", 1)
    ids = []

    def flush():
        sel = {"_id": {"$in": ids}} if use_in else {"_id": {"$gte": ids[0], "$lte": ids[-1]}}
        col.update_many({"$and": [sel, AT_0] + extra}, UPDATE)

    for d in cur:
        ids.append(d["_id"])
        if len(ids) == size:
            flush()
            ids = []
    if ids:
        flush()


def variants(n):
    return {
        "floor: one update_many": lambda c: c.update_many({}, UPDATE),
        "ranges of 10k": lambda c: ranges(c, n, 10000, []),
        "ranges of 10k + version": lambda c: ranges(c, n, 10000, [AT_0]),
        "ranges of 10k + version + plain test": lambda c: ranges(c, n, 10000, [AT_0] + PLAIN),
        "ranges of 10k + version + $expr test": lambda c: ranges(c, n, 10000, [AT_0, EXPR]),
        "ranges of 50k + version + $expr test": lambda c: ranges(c, n, 50000, [AT_0, EXPR]),
        "sorted id cursor + ranges + version": lambda c: batches(c, 10000, []),
        "sorted id cursor + ranges + plain test": lambda c: batches(c, 10000, PLAIN),
        "sorted id cursor + ranges + $expr test": lambda c: batches(c, 10000, [EXPR]),
        "natural id cursor + $in + version": lambda c: batches(c, 10000, [], use_in=True),
        "read all ids, sorted by _id": lambda c: sum(1 for _ in c.find({}, {"_id": 1}).sort("_id", 1).batch_size(10000)),
        "read all ids, natural order": lambda c: sum(1 for _ in c.find({}, {"_id": 1}).batch_size(10000)),
        "10k ids after the middle, sorted": lambda c: list(c.find({"_id": {"$gt": n // 2}}, {"_id": 1}).sort("_id", 1).limit(10000)),
        "10k ids after the middle, hinted": lambda c: list(c.find({"_id": {"$gt": n // 2}}, {"_id": 1}).sort("_id", 1).hint([("_id", 1)]).limit(10000)),
        "$sample of 100 ids": lambda c: list(c.aggregate([{"$sample": {"size": 100}}, {"$project": {"_id": 1}}])),
        "ranges of n/10 + version + plain test": lambda c: ranges(c, n, max(1, n // 10), [AT_0] + PLAIN),
        "ranges of n/4 + version + plain test": lambda c: ranges(c, n, max(1, n // 4), [AT_0] + PLAIN),
        "one update_many over _id >= 0 (the _id index)": lambda c: c.update_many({"_id": {"$gte": 0}}, UPDATE),
        "one update_many + version": lambda c: ranges(c, n, n, [AT_0]),
        "one update_many + version + plain test": lambda c: ranges(c, n, n, [AT_0] + PLAIN),
        "$bucketAuto of _id into 10": lambda c: list(c.aggregate([{"$bucketAuto": {"groupBy": "$_id", "buckets": 10}}])),
        "$group min and max _id": lambda c: list(c.aggregate([{"$group": {"_id": None, "lo": {"$min": "$_id"}, "hi": {"$max": "$_id"}}}])),
        "count_documents({})": lambda c: c.count_documents({}),
        "estimated_document_count": lambda c: c.estimated_document_count(),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="mongodb://127.0.0.1:27017")
    p.add_argument("--docs", type=int, default=200000)
    p.add_argument("--only", default="", help="run the floor and the variants whose name contains this")
    a = p.parse_args()
    col = MongoClient(a.url)["tern_probe"]["c"]
    floor = None
    for name, run in variants(a.docs).items():
        if floor is not None and a.only not in name:
            continue
        col.drop()
        for s in range(0, a.docs, 10000):
            col.insert_many([{"_id": i, "title": f"t{i}", "text": f"some text {i}", "author": f"a{i % 100}"}
                             for i in range(s, min(a.docs, s + 10000))], ordered=False)
        t = time.time()
        run(col)
        dt = time.time() - t
        floor = floor or dt
        print(f"{name:42s} {dt:7.2f}s {dt / floor:6.2f}x", flush=True)
    col.drop()


if __name__ == "__main__":
    main()
