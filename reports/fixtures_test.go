package reports

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
)

// historyBuilder writes hand-made histories: times are in milliseconds.
type historyBuilder struct{ h checker.History }

func (b *historyBuilder) add(op checker.Op) int64 {
	op.Index = int64(len(b.h))
	b.h = append(b.h, op)
	return op.Index
}

func ms(v float64) int64 { return int64(v * 1e6) }

// send records an invoke and its completion; typ is the completion type and
// offset < 0 means unknown.
func (b *historyBuilder) send(proc, key int, value, offset int64, atMs, latencyMs float64, typ checker.OpType) int64 {
	b.add(checker.Op{Time: ms(atMs), Process: proc, Type: checker.Invoke, F: "send",
		Mops: []checker.MicroOp{{F: "send", Key: key, Value: value}}})
	done := checker.MicroOp{F: "send", Key: key, Value: value, Completed: true}
	if offset >= 0 {
		done.Offset = &offset
	}
	op := checker.Op{Time: ms(atMs + latencyMs), Process: proc, Type: typ, F: "send", Mops: []checker.MicroOp{done}}
	if typ != checker.OK {
		op.Error = "NOT_LEADER_OR_FOLLOWER"
	}
	return b.add(op)
}

// poll records a poll that returned the given pairs of one key.
func (b *historyBuilder) poll(proc, key int, atMs, latencyMs float64, pairs ...checker.Pair) int64 {
	b.add(checker.Op{Time: ms(atMs), Process: proc, Type: checker.Invoke, F: "poll",
		Mops: []checker.MicroOp{{F: "poll"}}})
	return b.add(checker.Op{Time: ms(atMs + latencyMs), Process: proc, Type: checker.OK, F: "poll",
		Mops: []checker.MicroOp{{F: "poll", Polls: map[int][]checker.Pair{key: pairs}}}})
}

func (b *historyBuilder) nemesis(f string, value any, atMs float64) {
	raw, _ := json.Marshal(value)
	b.add(checker.Op{Time: ms(atMs), Process: checker.NemesisProcess, Type: checker.Invoke, F: f, Raw: raw})
	b.add(checker.Op{Time: ms(atMs + 5), Process: checker.NemesisProcess, Type: checker.Info, F: f, Raw: raw})
}

func testSpec(name string) Spec {
	return Spec{
		Name: name, Workload: "queue", Nemesis: nemesis.Spec{{Kind: nemesis.KindKill}},
		Nodes: []string{"n1", "n2", "n3"}, Seed: 42, TimeLimit: 60 * time.Second,
		BrokerConfig:       map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false"},
		PartitionsPerTopic: 3,
		Raw:                map[string]any{"name": name, "seed": 42},
	}
}

// validInput: key 2 written at offsets 0..4, a kill and restart, every
// offset read back.
func validInput() Input {
	var b historyBuilder
	for i := range 5 {
		b.send(0, 2, int64(100+i), int64(i), 1000*float64(i+1), 3+float64(i), checker.OK)
	}
	b.nemesis("kill", []string{"n1"}, 10000)
	b.send(1, 2, 200, -1, 11000, 900, checker.Fail)
	b.nemesis("start", []string{"n1"}, 20000)
	pairs := make([]checker.Pair, 5)
	for i := range pairs {
		pairs[i] = checker.Pair{Offset: int64(i), Value: int64(100 + i)}
	}
	b.poll(2, 2, 25000, 12, pairs...)
	return Input{
		Spec:    testSpec("queue-kill-valid"),
		History: b.h,
		Result: checker.Result{
			Valid:     checker.Valid,
			Anomalies: map[string]checker.AnomalyReport{},
			Checkers: []checker.CheckerResult{
				{Name: "queue", Valid: checker.Valid},
				{Name: "linearizable", Valid: checker.Valid},
			},
			Stats: checker.Stats{Count: len(b.h), Sends: 6, Polls: 1, Keys: 1},
		},
		Links: Links{Spec: "test.json", NodeLogs: []Link{{Name: "n1 broker.log", Href: "nodes/n1/broker.log"}}},
	}
}

// invalidInput: key 2 written at offsets 0..5 before n1 is killed at
// 41.2 s; afterwards a poll reads 0, 1 and 5: offsets 2, 3 and 4 were lost.
// Offset 5 also shows up at offset 6 (a duplicate).
func invalidInput() Input {
	var b historyBuilder
	var writers []int64
	for i := range 6 {
		idx := b.send(i%2, 2, int64(100+i), int64(i), 40000+160*float64(i), 4, checker.OK)
		if i >= 2 && i <= 4 {
			writers = append(writers, idx)
		}
	}
	b.nemesis("kill", []string{"n1"}, 41200)
	reader := b.poll(2, 2, 50000, 20,
		checker.Pair{Offset: 0, Value: 100}, checker.Pair{Offset: 1, Value: 101},
		checker.Pair{Offset: 5, Value: 105}, checker.Pair{Offset: 6, Value: 105})
	var lostExamples []checker.Example
	for i, w := range writers {
		lostExamples = append(lostExamples, checker.Example{
			Key: 2, Value: ptr(int64(102 + i)), Offset: ptr(int64(2 + i)), Writer: ptr(w),
			Text: fmt.Sprintf("value %d acknowledged at offset %d of key 2 was never read", 102+i, 2+i),
		})
	}
	dup := checker.Example{Key: 2, Value: ptr(int64(105)), Offsets: []int64{5, 6}, Ops: []int64{reader}, Text: "value 105 at offsets 5 and 6"}
	anomalies := map[string]checker.AnomalyReport{
		"lost-write": {Count: 3, ByKey: map[int]int{2: 3}, Examples: lostExamples},
		"duplicate":  {Count: 1, ByKey: map[int]int{2: 1}, Examples: []checker.Example{dup}},
	}
	return Input{
		Spec:    testSpec("queue-kill-acks1"),
		History: b.h,
		Result: checker.Result{
			Valid:     checker.Invalid,
			Anomalies: anomalies,
			Checkers: []checker.CheckerResult{
				{Name: "queue", Valid: checker.Invalid, Anomalies: anomalies},
				{Name: "linearizable", Valid: checker.Valid},
			},
			Stats: checker.Stats{Count: len(b.h), Sends: 6, Polls: 1, Keys: 1},
			Perf: checker.Perf{
				Faults:      []checker.Window{{Start: ms(41200), End: ms(48000), Label: "kill n1"}},
				Unavailable: []checker.Window{{Start: ms(41200), End: ms(44000)}},
			},
		},
		Links: Links{Porcupine: []Link{{Name: "key 2", Href: "porcupine/key-2.html"}}},
	}
}

// unknownInput: the queue checker is valid, porcupine timed out.
func unknownInput() Input {
	in := validInput()
	in.Spec.Name = "queue-partition-unknown"
	in.Result.Valid = checker.Unknown
	in.Result.Checkers = []checker.CheckerResult{
		{Name: "queue", Valid: checker.Valid},
		{Name: "linearizable", Valid: checker.Unknown, Error: "porcupine timed out after 30s on key 2"},
	}
	return in
}

// syntheticHistory builds n operations (invoke+completion pairs) over keys
// with 8 processes, a poll every fourth op, some failures and infos, and a
// kill/restart every 15 s, spread over 120 s.
func syntheticHistory(n, keys int) checker.History {
	var b historyBuilder
	b.h = make(checker.History, 0, n+64)
	pairs := n / 2
	stepMs := 120000 / float64(pairs)
	next := make([]int64, keys)
	lastNemesis := -15000.0
	for i := range pairs {
		at := float64(i) * stepMs
		if at-lastNemesis >= 15000 {
			f := "kill"
			if int(at/15000)%2 == 1 {
				f = "start"
			}
			b.nemesis(f, []string{fmt.Sprintf("n%d", 1+int(at/15000)%3)}, at)
			lastNemesis = at
		}
		k := (i / 4) % keys
		lat := 2 + float64((i*7919)%50)
		proc := i % 8
		switch {
		case i%4 == 3:
			lo := max(next[k]-4, 0)
			var ps []checker.Pair
			for o := lo; o < next[k]; o++ {
				ps = append(ps, checker.Pair{Offset: o, Value: int64(k*1_000_000) + o})
			}
			b.poll(proc, k, at, lat, ps...)
		case i%97 == 0:
			b.send(proc, k, int64(k*1_000_000)+next[k], -1, at, 500, checker.Info)
		case i%89 == 0:
			b.send(proc, k, int64(k*1_000_000)+next[k], -1, at, 30, checker.Fail)
		default:
			b.send(proc, k, int64(k*1_000_000)+next[k], next[k], at, lat, checker.OK)
			next[k]++
		}
	}
	return b.h
}

func ptr[T any](v T) *T { return &v }
