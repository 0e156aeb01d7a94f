package checker

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Nemesis ops that begin and end a fault carry these prefixes (see doc.go).
const (
	FaultStartPrefix = "start-"
	FaultStopPrefix  = "stop-"
)

// throughputBucketsMax bounds the length of each throughput series: a long
// run gets wider buckets rather than a huge results.json.
const throughputBucketsMax = 2000

// infoErrorsMax bounds the distinct error texts Stats.InfoErrors keeps.
const infoErrorsMax = 32

// computeStats counts client operations. Nemesis ops are left out.
func computeStats(h History, p *pairing) Stats {
	s := Stats{ByF: map[string]map[OpType]int{}}
	keys := map[int]struct{}{}
	type kv struct {
		k int
		v int64
	}
	read := map[kv]struct{}{}
	procs := map[int]struct{}{}
	var sentOK, sentInfo []kv
	for pos := range h {
		op := &h[pos]
		s.DurationNs = max(s.DurationNs, op.Time)
		if !op.IsClient() {
			continue
		}
		procs[op.Process] = struct{}{}
		if op.Type == Invoke {
			if p.partner[pos] < 0 {
				for _, m := range op.Mops {
					if m.F == FSend {
						sentInfo = append(sentInfo, kv{m.Key, m.Value})
					}
				}
			}
			continue
		}
		s.Count++
		byType := s.ByF[op.F]
		if byType == nil {
			byType = map[OpType]int{}
			s.ByF[op.F] = byType
		}
		byType[op.Type]++
		if op.Type == Info && op.Error != "" {
			if s.InfoErrors == nil {
				s.InfoErrors = map[string]int{}
			}
			if _, seen := s.InfoErrors[op.Error]; seen || len(s.InfoErrors) < infoErrorsMax {
				s.InfoErrors[op.Error]++
			}
		}
		mops := op.Mops
		if mops == nil && p.partner[pos] >= 0 {
			mops = h[p.partner[pos]].Mops
		}
		for _, m := range mops {
			switch m.F {
			case FSend:
				keys[m.Key] = struct{}{}
				s.Sends++
				switch op.Type {
				case OK:
					s.SendsOK++
					sentOK = append(sentOK, kv{m.Key, m.Value})
				case Info:
					sentInfo = append(sentInfo, kv{m.Key, m.Value})
				}
			case FPoll:
				s.Polls++
				for k, pairs := range m.Polls {
					keys[k] = struct{}{}
					if op.Type == OK {
						for _, pr := range pairs {
							read[kv{k, pr.Value}] = struct{}{}
						}
					}
				}
			}
		}
	}
	s.Keys = len(keys)
	s.ValuesRead = len(read)
	for _, w := range sentOK {
		if _, ok := read[w]; ok {
			s.SendsOKRead++
		}
	}
	s.SendsInfo = len(sentInfo)
	for _, w := range sentInfo {
		if _, ok := read[w]; ok {
			s.SendsInfoRead++
		}
	}
	s.Processes = len(procs)
	return s
}

// computePerf derives latency quantiles, throughput, unavailability windows,
// fault intervals and the worst realtime lag from the history.
func computePerf(h History, p *pairing, opts Options) Perf {
	perf := Perf{
		LatencyQuantilesMs: map[string]map[string]float64{},
		Throughput:         map[string][]float64{},
		Unavailable:        []Window{},
		Faults:             faultWindows(h, p),
	}
	var end int64
	for i := range h {
		end = max(end, h[i].Time)
	}
	bucket := max(int64(opts.ThroughputBucket), 1)
	for end/bucket+1 > throughputBucketsMax {
		bucket *= 2
	}
	perf.ThroughputBucketNs = bucket
	buckets := int(end/bucket) + 1

	latencies := map[string][]float64{}
	counts := map[string][]float64{}
	var okSends []int64
	sendStart, sendEnd := int64(-1), int64(-1)
	for pos := range h {
		op := &h[pos]
		if !op.IsClient() {
			continue
		}
		sends := op.F == FSend || op.F == FTxn && containsSend(op.Mops)
		if op.Type == Invoke {
			if sends && sendStart < 0 {
				sendStart = op.Time
			}
			continue
		}
		name := op.F + ":" + string(op.Type)
		if j := p.partner[pos]; j >= 0 {
			latencies[name] = append(latencies[name], float64(op.Time-h[j].Time)/1e6)
		}
		c := counts[name]
		if c == nil {
			c = make([]float64, buckets)
			counts[name] = c
		}
		if op.Time >= 0 {
			c[op.Time/bucket]++
		}
		if sends {
			sendEnd = max(sendEnd, op.Time)
			if op.Type == OK {
				okSends = append(okSends, op.Time)
			}
		}
	}
	for name, ls := range latencies {
		slices.Sort(ls)
		perf.LatencyQuantilesMs[name] = map[string]float64{
			"p50": quantile(ls, 0.50), "p90": quantile(ls, 0.90), "p99": quantile(ls, 0.99), "max": ls[len(ls)-1],
		}
	}
	secs := float64(bucket) / 1e9
	for name, c := range counts {
		for i := range c {
			c[i] /= secs
		}
		perf.Throughput[name] = c
	}
	if sendStart >= 0 {
		perf.Unavailable = unavailable(okSends, sendStart, sendEnd, int64(opts.UnavailableMin), perf.Faults)
	}
	perf.Unseen = unseenSeries(h, bucket, buckets)
	perf.WorstRealtimeLag = worstRealtimeLag(h, p)
	return perf
}

// unseenSeries counts, at the end of each bucket, the values acknowledged
// so far that no ok poll had returned yet.
func unseenSeries(h History, bucket int64, buckets int) []int {
	type kv struct {
		k int
		v int64
	}
	acked := map[kv]int64{} // ack time
	read := map[kv]int64{}  // first ok read time
	for i := range h {
		op := &h[i]
		if op.Type != OK || !op.IsClient() || op.Time < 0 {
			continue
		}
		for _, m := range op.Mops {
			if m.F == FSend && m.Completed {
				if _, ok := acked[kv{m.Key, m.Value}]; !ok {
					acked[kv{m.Key, m.Value}] = op.Time
				}
			}
			for k, pairs := range m.Polls {
				for _, p := range pairs {
					if _, ok := read[kv{k, p.Value}]; !ok {
						read[kv{k, p.Value}] = op.Time
					}
				}
			}
		}
	}
	delta := make([]int, buckets+1)
	for x, t := range acked {
		delta[t/bucket]++
		if r, ok := read[x]; ok {
			// Seen in the same bucket or later; a read before the ack
			// counts from the ack's bucket.
			delta[max(r, t)/bucket]--
		}
	}
	series := make([]int, buckets)
	n := 0
	for i := range series {
		n += delta[i]
		series[i] = n
	}
	return series
}

func containsSend(mops []MicroOp) bool {
	return slices.ContainsFunc(mops, func(m MicroOp) bool { return m.F == FSend })
}

// quantile is the nearest-rank quantile of sorted xs.
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// unavailable returns the windows of at least minNs, between the first send
// invoked and the last send completed, in which no send succeeded; each is
// labelled with the faults in force during it.
func unavailable(okSends []int64, start, end, minNs int64, faults []Window) []Window {
	slices.Sort(okSends)
	out := []Window{}
	prev := start
	consider := func(from, to int64) {
		if to-from < minNs || to <= from {
			return
		}
		var labels []string
		for _, f := range faults {
			if f.Start < to && f.End > from && !slices.Contains(labels, f.Label) {
				labels = append(labels, f.Label)
			}
		}
		out = append(out, Window{Start: from, End: to, Label: strings.Join(labels, ", ")})
	}
	for _, t := range okSends {
		consider(prev, t)
		prev = max(prev, t)
	}
	consider(prev, end)
	return out
}

// faultWindows pairs nemesis start-X and stop-X ops into intervals. A fault
// runs from the start op's completion (its invoke when it has none) to the
// stop op's completion; a fault never stopped runs to the end of the
// history. Any other nemesis op is an instant (Start == End).
func faultWindows(h History, p *pairing) []Window {
	out := []Window{}
	open := map[string]int{} // fault -> index in out
	var end int64
	for i := range h {
		end = max(end, h[i].Time)
	}
	for pos := range h {
		op := &h[pos]
		if op.Process != NemesisProcess {
			continue
		}
		completed := op.Type != Invoke
		if !completed && p.partner[pos] >= 0 {
			continue // its completion carries the time
		}
		switch {
		case strings.HasPrefix(op.F, FaultStartPrefix):
			fault := strings.TrimPrefix(op.F, FaultStartPrefix)
			if _, ok := open[fault]; ok {
				continue
			}
			open[fault] = len(out)
			out = append(out, Window{Start: op.Time, End: -1, Label: faultLabel(fault, h, pos, p)})
		case strings.HasPrefix(op.F, FaultStopPrefix):
			fault := strings.TrimPrefix(op.F, FaultStopPrefix)
			if i, ok := open[fault]; ok {
				out[i].End = op.Time
				delete(open, fault)
			}
		default:
			out = append(out, Window{Start: op.Time, End: op.Time, Label: faultLabel(op.F, h, pos, p)})
		}
	}
	for _, i := range open {
		out[i].End = end
	}
	return out
}

// faultLabel is the fault's name and the value its op carried (the
// completion's, else the invoke's), e.g. `kill ["n1"]`.
func faultLabel(fault string, h History, pos int, p *pairing) string {
	raw := h[pos].Raw
	if raw == nil && p.partner[pos] >= 0 {
		raw = h[p.partner[pos]].Raw
	}
	if len(raw) == 0 || string(raw) == "null" {
		return fault
	}
	v := string(raw)
	if len(v) > 80 {
		v = v[:77] + "..."
	}
	return fmt.Sprintf("%s %s", fault, v)
}
