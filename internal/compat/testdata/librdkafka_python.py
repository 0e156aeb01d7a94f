"""confluent-kafka-python (librdkafka) against a faultline broker: one step
per command line argument, each printing one JSON object that
internal/compat checks.

Usage: python3 confluent_kafka.py BOOTSTRAP STEP [STEP...]
"""
import json
import sys
import time
import traceback

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

BOOTSTRAP = sys.argv[1]


def emit(step, **result):
    print(json.dumps(dict(step=step, **result), default=str), flush=True)


def results(futures):
    out = {}
    for name, f in futures.items():
        try:
            f.result(15)
            out[str(name)] = "ok"
        except Exception as e:  # the error librdkafka reports, by name
            out[str(name)] = e.args[0].name() if e.args and hasattr(e.args[0], "name") else str(e)
    return out


def admin():
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    out = {}
    out["create"] = results(a.create_topics([
        NewTopic("ck-admin", 2, 1, config={"retention.ms": "3600000"}),
        NewTopic("ck-doomed", 1, 1),
        NewTopic("bad topic!", 1, 1),
    ], operation_timeout=10))
    out["create_again"] = results(a.create_topics([NewTopic("ck-admin", 2, 1)]))
    out["validate_only"] = results(a.create_topics([NewTopic("ck-never", 1, 1)], validate_only=True))
    md = a.list_topics(timeout=10)
    out["topics"] = sorted(t for t in md.topics if t.startswith("ck-"))
    out["controller"] = md.controller_id
    cfg = list(a.describe_configs([ConfigResource("topic", "ck-admin")]).values())[0].result(15)
    out["retention_ms"] = cfg["retention.ms"].value
    out["partitions"] = results(a.create_partitions([NewPartitions("ck-admin", 4)]))
    out["delete"] = results(a.delete_topics(["ck-doomed"], operation_timeout=10))
    out["delete_missing"] = results(a.delete_topics(["ck-missing"], operation_timeout=10))
    md = a.list_topics(timeout=10)
    out["topics_after"] = sorted(t for t in md.topics if t.startswith("ck-"))
    out["partitions_after"] = len(md.topics["ck-admin"].partitions)
    emit("admin", **out)


def group(strategy="range,roundrobin", topic="ck-group", step="group"):
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for f in a.create_topics([NewTopic(topic, 4, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True})
    acked = []
    for i in range(40):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 4,
                  on_delivery=lambda err, m: acked.append([m.partition(), m.offset()] if err is None else str(err)))
    p.flush(15)

    def member():
        return Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": topic,
                         "partition.assignment.strategy": strategy,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 200})

    a1, a2 = member(), member()
    got = {}

    def poll(name, c):
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got.setdefault(name, []).append([m.partition(), m.offset()])

    # The first member joins alone and starts reading; then the second
    # joins, the group rebalances, and both poll until every record was
    # read and both hold partitions.
    a1.subscribe([topic])
    deadline = time.time() + 20
    while time.time() < deadline and not a1.assignment():
        poll("a1", a1)
    a2.subscribe([topic])
    while time.time() < deadline:
        poll("a1", a1)
        poll("a2", a2)
        distinct = {tuple(r) for v in got.values() for r in v}
        if len(distinct) >= 40 and a1.assignment() and a2.assignment():
            break
    assignment = {n: sorted(tp.partition for tp in c.assignment()) for n, c in (("a1", a1), ("a2", a2))}
    for c in (a1, a2):
        if c.assignment():
            c.commit(asynchronous=False)
    committed = {}
    for c in (a1, a2):
        for tp in c.committed(c.assignment(), timeout=10):
            committed[str(tp.partition)] = tp.offset
    a1.close()
    a2.close()
    emit(step, acked=sorted(acked), got=got, assignment=assignment, committed=committed)


def group_cooperative():
    group("cooperative-sticky", "ck-coop", "group_cooperative")


def txn():
    """A transactional producer: one committed transaction over 3
    partitions with a group's offsets sent to it, one aborted; a
    read_committed consumer must see exactly the committed records. Then
    a second producer with the same transactional.id fences the first."""
    topic = "ck-txn"
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    results(a.create_topics([NewTopic(topic, 3, 1)], operation_timeout=10))
    conf = {"bootstrap.servers": BOOTSTRAP, "transactional.id": "ck-txn-1"}
    p = Producer(conf)
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(9):
        p.produce(topic, value=b"c%d" % i, partition=i % 3)
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "ck-txn-group"})
    from confluent_kafka import TopicPartition
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], c.consumer_group_metadata(), 15)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"a%d" % i, partition=i % 3)
    p.flush(15)
    p.abort_transaction(15)
    p.begin_transaction()
    p.produce(topic, value=b"c-last", partition=1)
    p.commit_transaction(15)
    committed = c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    c.close()

    r = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "ck-txn-reader", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    r.subscribe([topic])
    seen = []
    deadline = time.time() + 20
    while time.time() < deadline and len(seen) < 10:
        m = r.poll(0.5)
        if m is None or m.error():
            continue
        seen.append(m.value().decode())
    # Poll a little more: nothing aborted may follow.
    end = time.time() + 1
    while time.time() < end:
        m = r.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value().decode())
    r.close()

    p2 = Producer(conf)
    p.begin_transaction()
    p.produce(topic, value=b"zombie", partition=0)
    p2.init_transactions(15)
    fenced = ""
    try:
        p.commit_transaction(15)
    except Exception as e:
        err = e.args[0] if e.args else None
        fenced = err.name() if hasattr(err, "name") else str(e)
    emit("txn", seen=sorted(seen), committed_offset=committed, fenced=fenced)


def txn_stream():
    """Transactions for TXN_SECONDS (default 20) while the test kills
    nodes: each transaction sends one record to each of 3 partitions of
    ck-txn-stream, one in five is aborted on purpose. Prints every
    transaction's outcome: committed (commit returned), aborted (abort
    returned) or unknown (the producer failed fatally mid-way; the next
    producer with the same transactional.id fences and ends it)."""
    import os
    from confluent_kafka import KafkaException
    topic = "ck-txn-stream"
    a = AdminClient({"bootstrap.servers": BOOTSTRAP})
    results(a.create_topics([NewTopic(topic, 3, 3)], operation_timeout=10))
    conf = {"bootstrap.servers": BOOTSTRAP, "transactional.id": "ck-txn-stream-1",
            "transaction.timeout.ms": 10000, "message.timeout.ms": 10000}
    outcomes, errors = {}, []

    def new_producer():
        for _ in range(30):
            p = Producer(conf)
            try:
                p.init_transactions(10)
                return p
            except KafkaException as e:
                errors.append("init: %s" % e.args[0])
        raise RuntimeError("init_transactions never succeeded: %s" % errors[-3:])

    def retry(fn):
        """Calls fn until it succeeds or fails other than retriably."""
        for _ in range(20):
            try:
                fn()
                return None
            except KafkaException as e:
                err = e.args[0]
                if not err.retriable():
                    return err
                errors.append("retriable: %s" % err)
        return "gave up after 20 retriable errors"

    p = new_producer()
    deadline = time.time() + float(os.environ.get("TXN_SECONDS", "20"))
    n = 0
    while time.time() < deadline:
        n += 1
        name = "t%d" % n
        abort = n % 5 == 0
        try:
            p.begin_transaction()
            for j in range(3):
                p.produce(topic, value=("%s-%d" % (name, j)).encode(), partition=j)
            err = retry(lambda: p.abort_transaction(10) if abort else p.commit_transaction(10))
            if err is None:
                outcomes[name] = "aborted" if abort else "committed"
                continue
            if not abort and hasattr(err, "txn_requires_abort") and err.txn_requires_abort():
                err = retry(lambda: p.abort_transaction(10))
                if err is None:
                    outcomes[name] = "aborted"
                    continue
            errors.append("%s: %s" % (name, err))
        except KafkaException as e:
            errors.append("%s: %s" % (name, e.args[0]))
        outcomes[name] = "unknown"
        p = new_producer()
    emit("txn_stream", outcomes=outcomes, errors=errors[-20:])


def txn_read():
    """Reads ck-txn-stream with read_committed from the start to the end
    offsets it lists first, and prints every value in partition order."""
    from confluent_kafka import TopicPartition
    topic = "ck-txn-stream"
    r = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "ck-txn-stream-reader",
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    ends = {}
    for part in range(3):
        lo, hi = r.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        ends[part] = hi
    r.assign([TopicPartition(topic, part, 0) for part in range(3)])
    seen, pos = {0: [], 1: [], 2: []}, {0: 0, 1: 0, 2: 0}
    deadline = time.time() + 40
    while time.time() < deadline and any(pos[q] < ends[q] for q in ends):
        m = r.poll(0.5)
        if m is None:
            # read_committed skips markers and aborted records: the
            # position after the last fetch says how far the read got.
            for tp in r.position([TopicPartition(topic, q) for q in range(3)]):
                if tp.offset >= 0:
                    pos[tp.partition] = max(pos[tp.partition], tp.offset)
            continue
        if m.error():
            continue
        seen[m.partition()].append(m.value().decode())
        pos[m.partition()] = max(pos[m.partition()], m.offset() + 1)
    r.close()
    emit("txn_read", seen=seen, ends=ends, reached={q: pos[q] for q in pos})


STEPS = dict(admin=admin, group=group, group_cooperative=group_cooperative, txn=txn,
             txn_stream=txn_stream, txn_read=txn_read)

for step in sys.argv[2:]:
    try:
        STEPS[step]()
    except Exception as e:  # reported, so the Go test shows which step failed and how
        emit(step, exception="%s: %s" % (type(e).__name__, e))
        traceback.print_exc()
