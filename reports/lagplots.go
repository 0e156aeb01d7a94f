package reports

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"

	"github.com/faultline/faultline/checker"
)

// lagKeysMax bounds how many keys with anomalies get a realtime-lag line of
// their own, beside the maximum over all keys.
const lagKeysMax = 4

// unseenPlot draws Jepsen's unseen plot from the checker's Perf.Unseen: at
// the end of each bucket, how many acknowledged values no poll had returned
// yet. A healthy run's line falls to zero in the final reads; loss leaves
// it up.
func unseenPlot(in Input, a *analysis, faults []checker.Window, endS float64) template.HTML {
	perf := in.Result.Perf
	if len(perf.Unseen) == 0 || perf.ThroughputBucketNs <= 0 {
		return ""
	}
	peak := 1.0
	xs := make([]float64, len(perf.Unseen))
	ys := make([]float64, len(perf.Unseen))
	for i, n := range perf.Unseen {
		xs[i] = math.Min(float64(int64(i+1)*perf.ThroughputBucketNs)/1e9, endS)
		ys[i] = float64(n)
		peak = math.Max(peak, ys[i])
	}
	p := newPlot("unseen: acknowledged values no poll had returned yet", 220, endS, axis{min: 0, max: peak * 1.05})
	p.faultBands(faults, finalReadsNs(a))
	p.axes(fmt.Sprintf("time since test start (s), %s buckets", seconds(perf.ThroughputBucketNs)), "values unseen")
	last := perf.Unseen[len(perf.Unseen)-1]
	p.polyline("unseen", colorInfo, xs, ys, fmt.Sprintf("unseen values; %d at the end", last))
	p.legendEntry("unseen", fmt.Sprintf("unseen (%d at the end)", last), colorInfo, "line")
	return p.html()
}

// lagPoint is the realtime lag of one poll on one key.
type lagPoint struct {
	t     int64
	lagNs int64
}

// realtimeLags computes Jepsen's realtime lag from the history: for each ok
// poll returning key k up to offset o at time t, how long before t the
// first value acknowledged on k above o was acknowledged (0 when every
// value acknowledged by then was at or below o). The checker does not
// compute it, so the report does, from the same history.
func realtimeLags(a *analysis) map[int][]lagPoint {
	type ack struct{ offset, t int64 }
	acks := map[int][]ack{}
	for i := range a.h {
		op := &a.h[i]
		if op.Type != checker.OK || !op.IsClient() {
			continue
		}
		for _, m := range op.Mops {
			if m.F == checker.FSend && m.Completed && m.Offset != nil {
				acks[m.Key] = append(acks[m.Key], ack{*m.Offset, op.Time})
			}
		}
	}
	// suffixMin[k][i] is the earliest ack among acks[k][i:] by offset.
	suffixMin := make(map[int][]int64, len(acks))
	for k, as := range acks {
		sort.Slice(as, func(i, j int) bool { return as[i].offset < as[j].offset })
		sm := make([]int64, len(as)+1)
		sm[len(as)] = math.MaxInt64
		for i := len(as) - 1; i >= 0; i-- {
			sm[i] = min(sm[i+1], as[i].t)
		}
		suffixMin[k] = sm
	}
	out := map[int][]lagPoint{}
	for i := range a.h {
		op := &a.h[i]
		if op.Type != checker.OK || !op.IsClient() {
			continue
		}
		for _, m := range op.Mops {
			if m.F != checker.FPoll {
				continue
			}
			for k, pairs := range m.Polls {
				if len(pairs) == 0 {
					continue
				}
				hi := pairs[0].Offset
				for _, p := range pairs {
					hi = max(hi, p.Offset)
				}
				// A key no ok send acknowledged (its values read all came
				// from info sends) has nothing a poll can lag behind.
				lag := int64(0)
				if sm, ok := suffixMin[k]; ok {
					as := acks[k]
					j := sort.Search(len(as), func(i int) bool { return as[i].offset > hi })
					if first := sm[j]; first < op.Time {
						lag = op.Time - first
					}
				}
				out[k] = append(out[k], lagPoint{op.Time, lag})
			}
		}
	}
	return out
}

// lagPlot draws the realtime lag over time: the largest lag of any key per
// time bucket, and one line per key with anomalies (at most lagKeysMax).
func lagPlot(in Input, a *analysis, faults []checker.Window, endS float64) template.HTML {
	lags := realtimeLags(a)
	if len(lags) == 0 {
		return ""
	}
	endNs := int64(endS * 1e9)
	bucketNs := throughputBucket(endNs)
	n := int(endNs/bucketNs) + 1
	bucketMax := func(pts []lagPoint) ([]float64, []float64) {
		best := make([]float64, n)
		seen := make([]bool, n)
		for _, p := range pts {
			b := min(max(int(p.t/bucketNs), 0), n-1)
			best[b] = math.Max(best[b], float64(p.lagNs)/1e9)
			seen[b] = true
		}
		var xs, ys []float64
		for b := range best {
			if seen[b] {
				xs = append(xs, math.Min((float64(b)+0.5)*float64(bucketNs)/1e9, endS))
				ys = append(ys, best[b])
			}
		}
		return xs, ys
	}
	var all []lagPoint
	keys := make([]int, 0, len(lags))
	for k, pts := range lags {
		all = append(all, pts...)
		keys = append(keys, k)
	}
	sort.Ints(keys)
	type line struct {
		series, label, color string
		xs, ys               []float64
	}
	xs, ys := bucketMax(all)
	lines := []line{{"lag-max", "all keys", colorChecker, xs, ys}}
	for i, k := range anomalousKeys(in.Result) {
		if i == lagKeysMax || len(lags[k]) == 0 {
			break
		}
		xs, ys := bucketMax(lags[k])
		lines = append(lines, line{"lag-k" + strconv.Itoa(k), in.Spec.keyLabel(k), seriesPalette[i%len(seriesPalette)], xs, ys})
	}
	peak := 0.001
	for _, l := range lines {
		for _, y := range l.ys {
			peak = math.Max(peak, y)
		}
	}
	p := newPlot("realtime lag: age of the oldest acknowledged value each poll had not reached", 220, endS, axis{min: 0, max: peak * 1.05})
	p.faultBands(faults, finalReadsNs(a))
	p.axes(fmt.Sprintf("time since test start (s), largest per %s bucket", seconds(bucketNs)), "lag (s)")
	for _, l := range lines {
		top := 0.0
		for _, y := range l.ys {
			top = math.Max(top, y)
		}
		p.polyline(l.series, l.color, l.xs, l.ys, fmt.Sprintf("realtime lag: %s, at most %s", l.label, seconds(int64(top*1e9))))
		p.legendEntry(l.series, fmt.Sprintf("%s (max %s)", l.label, seconds(int64(top*1e9))), l.color, "line")
	}
	return p.html()
}
