"""kafka-python against a faultline broker: one step per command line
argument, each printing one JSON object; internal/compat checks them.

Usage: python3 kafka_python.py BOOTSTRAP STEP [STEP...]
"""
import json
import sys
import threading
import time
import traceback

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import KafkaError

BOOTSTRAP = sys.argv[1]
COMMON = dict(bootstrap_servers=BOOTSTRAP, request_timeout_ms=15000)
# Timestamps of the records of the "times" step: one second apart.
BASE_TS = 1_700_000_000_000


def emit(step, **result):
    print(json.dumps(dict(step=step, **result), default=str), flush=True)


def err_name(e):
    return type(e).__name__


def admin():
    a = KafkaAdminClient(**COMMON)
    out = {}
    r = a.create_topics([NewTopic("py-admin", 3, 1), NewTopic("py-doomed", 1, 1), NewTopic("py-data", 3, 1)])
    out["create"] = [[t, code] for t, code, *_ in r.topic_errors]
    try:
        a.create_topics([NewTopic("py-admin", 3, 1)])
        out["create_again"] = "no error"
    except KafkaError as e:
        out["create_again"] = err_name(e)
    out["listed"] = sorted(t for t in a.list_topics() if t.startswith("py-") and t != "py-data")
    cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "py-admin")])
    entries = {e[0]: e[1] for e in cfg[0].resources[0][4]}
    out["retention_ms"] = entries.get("retention.ms")
    r = a.create_partitions({"py-admin": NewPartitions(5)})
    out["create_partitions"] = [[t, code] for t, code, *_ in r.topic_errors]
    r = a.delete_topics(["py-doomed"])
    out["delete"] = [[t, code] for t, code in r.topic_error_codes]
    out["listed_after"] = sorted(t for t in a.list_topics() if t.startswith("py-") and t != "py-data")
    a.close()
    emit("admin", **out)


def produce():
    p = KafkaProducer(acks="all", **COMMON)
    sent = []
    for i in range(30):
        md = p.send("py-data", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3).get(timeout=15)
        sent.append([md.partition, md.offset])
    p.close()
    emit("produce", sent=sent)


def compress():
    out = {}
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        p = KafkaProducer(acks="all", compression_type=codec, linger_ms=20, **COMMON)
        futs = [p.send("py-z-" + codec, value=("%s-%03d-" % (codec, i)).encode() + b"abc" * 40, partition=0)
                for i in range(100)]
        p.flush()
        out[codec] = [f.get(timeout=15).offset for f in futs][-1]
        p.close()
    emit("compress", last_offsets=out)


def group_read(n):
    c = KafkaConsumer("py-data", group_id="py-group", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=10000, **COMMON)
    got = []
    for m in c:
        got.append([m.partition, m.offset, m.key.decode(), m.value.decode()])
        if len(got) == n:
            break
    c.commit()
    committed = {str(p): c.committed(TopicPartition("py-data", p)) for p in range(3)}
    c.close()
    return got, committed


def group():
    first, committed1 = group_read(12)
    second, committed2 = group_read(18)
    emit("group", first=first, committed1=committed1, second=second, committed2=committed2)


def offsets():
    p = KafkaProducer(acks="all", **COMMON)
    for i in range(10):
        p.send("py-times", value=b"t%d" % i, partition=0, timestamp_ms=BASE_TS + i * 1000).get(timeout=15)
    p.close()
    c = KafkaConsumer(consumer_timeout_ms=5000, **COMMON)
    tp = TopicPartition("py-times", 0)
    c.assign([tp])
    c.seek(tp, 4)
    seeked = [[m.offset, m.value.decode()] for m in c.poll(timeout_ms=5000, max_records=3).get(tp, [])]
    by_time = c.offsets_for_times({tp: BASE_TS + 5500})[tp]
    exact = c.offsets_for_times({tp: BASE_TS + 3000})[tp]
    future = c.offsets_for_times({tp: BASE_TS + 60_000})[tp]
    emit("offsets",
         seeked=seeked,
         by_time=[by_time.offset, by_time.timestamp],
         exact=[exact.offset, exact.timestamp],
         future=future,
         end=c.end_offsets([tp])[tp],
         beginning=c.beginning_offsets([tp])[tp])
    c.close()


def rebalance():
    a = KafkaAdminClient(**COMMON)
    a.create_topics([NewTopic("py-rebalance", 4, 1)])
    a.close()
    p = KafkaProducer(acks="all", **COMMON)
    for i in range(40):
        p.send("py-rebalance", b"v%d" % i, partition=i % 4)
    p.flush()
    p.close()
    # kafka-python blocks in poll() while its member rejoins, so each
    # member polls on its own thread, as an application would.
    got, lock, stop, assignment = set(), threading.Lock(), threading.Event(), {}

    def member(name):
        c = KafkaConsumer("py-rebalance", group_id="py-rebalance", auto_offset_reset="earliest",
                          session_timeout_ms=6000, heartbeat_interval_ms=200,
                          auto_commit_interval_ms=100, **COMMON)
        while not stop.is_set():
            for tp, msgs in c.poll(100).items():
                with lock:
                    got.update((tp.partition, m.offset) for m in msgs)
            assignment[name] = sorted(tp.partition for tp in c.assignment())
        c.close()  # commits (auto commit) and leaves the group

    deadline = time.time() + 20
    t1 = threading.Thread(target=member, args=("m1",))
    t1.start()
    while not assignment.get("m1") and time.time() < deadline:
        time.sleep(0.05)
    t2 = threading.Thread(target=member, args=("m2",))
    t2.start()
    while time.time() < deadline:
        with lock:
            n = len(got)
        if n >= 40 and assignment.get("m1") and assignment.get("m2"):
            break
        time.sleep(0.05)
    stop.set()
    t1.join()
    t2.join()
    a = KafkaAdminClient(**COMMON)
    offs = a.list_consumer_group_offsets("py-rebalance")
    a.close()
    emit("rebalance", read=len(got), assignment=assignment,
         committed={str(tp.partition): om.offset for tp, om in offs.items()})


def timestamps():
    a = KafkaAdminClient(**COMMON)
    a.create_topics([NewTopic("py-ts", 1, 1),
                     NewTopic("py-ts-recent", 1, 1, topic_configs={"message.timestamp.before.max.ms": "60000"})])
    a.close()
    p = KafkaProducer(acks="all", retries=0, **COMMON)
    now = int(time.time() * 1000)
    out = {}
    for name, topic, ts in (("now", "py-ts", now),
                            ("two_hours_ahead", "py-ts", now + 2 * 3600_000),
                            ("year_1970", "py-ts", 1),
                            ("recent_topic_old", "py-ts-recent", now - 3600_000)):
        try:
            out[name] = "offset %d" % p.send(topic, b"x", partition=0, timestamp_ms=ts).get(timeout=15).offset
        except KafkaError as e:
            out[name] = err_name(e)
    p.close()
    emit("timestamps", **out)


def empty():
    a = KafkaAdminClient(**COMMON)
    a.create_topics([NewTopic("py-empty", 1, 1)])
    a.close()
    c = KafkaConsumer(**COMMON)
    tp = TopicPartition("py-empty", 0)
    c.assign([tp])
    polled = [sum(len(v) for v in c.poll(timeout_ms=500).values()) for _ in range(3)]
    c.close()
    emit("empty", polled=polled)


def groups_admin():
    a = KafkaAdminClient(**COMMON)
    groups = sorted(g[0] for g in a.list_consumer_groups())
    offs = a.list_consumer_group_offsets("py-group")
    desc = a.describe_consumer_groups(["py-group"])[0]
    a.close()
    emit("groups_admin", groups=groups,
         offsets={"%s-%d" % (tp.topic, tp.partition): om.offset for tp, om in offs.items()},
         state=desc.state)


STEPS = dict(admin=admin, produce=produce, compress=compress, group=group,
             offsets=offsets, groups_admin=groups_admin, empty=empty, rebalance=rebalance, timestamps=timestamps)

for step in sys.argv[2:]:
    try:
        STEPS[step]()
    except Exception as e:  # reported, so the Go test shows which step failed and how
        emit(step, exception="%s: %s" % (err_name(e), e))
        traceback.print_exc()
