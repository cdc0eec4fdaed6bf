"""The workload of traces/python-threads.ltr.gz (docs/traces.md says how it was recorded).

A small threaded "message server" in plain Python, so that every object is a malloc when
Python runs with PYTHONMALLOC=malloc: four worker threads decode batches of JSON requests,
build reply objects and drop each batch (peaks), keep a bounded per-thread session cache
(a plateau), and append a summary of every batch to a shared log that is never trimmed (a
ramp). The random generator is seeded, so the calls are the same on every run; only the
interleaving of the threads differs.
"""
import json
import random
import sys
import threading
from collections import OrderedDict

WORKERS = 4
BATCHES = int(sys.argv[1]) if len(sys.argv) > 1 else 4   # more batches: a longer run (overhead timing)
BATCH = 30
CACHE = 300

log = []
log_lock = threading.Lock()


def make_requests(rng, n):
    out = []
    for i in range(n):
        req = {"id": i, "user": "user%d" % rng.randrange(2000),
               "items": [{"sku": rng.randrange(10**6), "qty": rng.randrange(1, 9),
                          "note": "x" * rng.randrange(0, 8000)} for _ in range(rng.randrange(1, 12))],
               "text": " ".join("w%d" % rng.randrange(5000) for _ in range(rng.randrange(2, 60)))}
        out.append(json.dumps(req))
    return out


def worker(k):
    rng = random.Random(1000 + k)
    cache = OrderedDict()
    for b in range(BATCHES):
        batch = [json.loads(m) for m in make_requests(rng, BATCH)]
        replies = []
        for req in batch:
            total = sum(it["qty"] * (it["sku"] % 97) for it in req["items"])
            words = req["text"].split()
            session = cache.pop(req["user"], None) or {"seen": 0, "words": set()}
            session["seen"] += 1
            session["words"].update(words[:10])
            cache[req["user"]] = session
            if len(cache) > CACHE:
                cache.popitem(last=False)
            replies.append(json.dumps({"id": req["id"], "total": total, "n": len(words)}))
        summary = {"worker": k, "batch": b, "bytes": sum(len(r) for r in replies), "users": len(cache)}
        with log_lock:
            log.append(summary)
            log.append("".join(replies[:20]))
        del batch, replies


threads = [threading.Thread(target=worker, args=(k,)) for k in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("log entries", len(log), "bytes", sum(len(str(e)) for e in log))
