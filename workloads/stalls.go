package workloads

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/faultline/faultline/checker"
)

// FillStalls reads, for each stall (Key, Topic and Partition set), its
// partition's high watermark, last stable offset (ListOffsets
// read_committed) and, with txn, the transactions open there
// (DescribeProducers, with each producer's last write time), in place,
// and when they were listed (ListedAt); what could not be read is -1 and
// the Stall's Error says why. Each of the three requests gets its own timeout,
// so that a slow one leaves the others their chance.
func FillStalls(ctx context.Context, adm *kadm.Client, timeout time.Duration, txn bool, stalls []checker.Stall) {
	if len(stalls) == 0 {
		return
	}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, timeout) }
	var names []string
	set := kadm.TopicsSet{}
	for _, s := range stalls {
		if _, ok := set[s.Topic]; !ok {
			names = append(names, s.Topic)
		}
		set.Add(s.Topic, s.Partition)
	}
	cctx, cancel := call()
	hw, hwErr := adm.ListEndOffsets(cctx, names...)
	cancel()
	cctx, cancel = call()
	lso, lsoErr := adm.ListCommittedOffsets(cctx, names...)
	cancel()
	var producers kadm.DescribedProducersTopics
	var prodErr error
	if txn {
		cctx, cancel = call()
		producers, prodErr = adm.DescribeProducers(cctx, set)
		cancel()
	}
	listedAt := time.Now().UnixMilli()
	for i := range stalls {
		s := &stalls[i]
		s.HighWatermark, s.LastStable, s.OpenTxns, s.ListedAt = -1, -1, nil, listedAt
		var errs []error
		lookup := func(what string, listed kadm.ListedOffsets, err error, into *int64) {
			o, ok := listed.Lookup(s.Topic, s.Partition)
			switch {
			case ok && o.Err == nil:
				*into = o.Offset
			case ok:
				errs = append(errs, fmt.Errorf("%s: %w", what, o.Err))
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			default:
				errs = append(errs, fmt.Errorf("%s: not listed", what))
			}
		}
		lookup("high watermark", hw, hwErr, &s.HighWatermark)
		lookup("last stable offset", lso, lsoErr, &s.LastStable)
		if txn {
			open, err := OpenTxns(producers, prodErr, s.Topic, s.Partition)
			s.OpenTxns = open
			if err != nil {
				errs = append(errs, err)
			}
		}
		s.Error = ""
		if err := errors.Join(errs...); err != nil {
			s.Error = err.Error()
		}
	}
}

// OpenTxns lists the transactions open on one partition from a
// DescribeProducers answer (err its request's error), or says why it
// cannot.
func OpenTxns(producers kadm.DescribedProducersTopics, err error, topic string, part int32) ([]checker.OpenTxn, error) {
	dp, ok := producers[topic].Partitions[part]
	switch {
	case ok && dp.Err != nil:
		return nil, fmt.Errorf("producers: %w", dp.Err)
	case !ok && err != nil:
		return nil, fmt.Errorf("producers: %w", err)
	case !ok:
		return nil, errors.New("producers: not listed")
	}
	var out []checker.OpenTxn
	for _, p := range dp.ActiveProducers.Sorted() {
		if p.CurrentTxnStartOffset >= 0 {
			out = append(out, checker.OpenTxn{ProducerID: p.ProducerID, Epoch: p.ProducerEpoch, FirstOffset: p.CurrentTxnStartOffset,
				LastTimestamp: max(p.LastTimestamp, 0)})
		}
	}
	return out, nil
}
