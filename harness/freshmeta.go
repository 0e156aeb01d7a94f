package harness

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// nodeMetadataTimeout bounds one node's answer to freshMetadata: a paused
// node never answers, and the others must not wait for it.
const nodeMetadataTimeout = 2 * time.Second

// freshMetadata asks every node for metadata at once and merges the
// answers (mergeMetadata). One node's answer may be stale by whole leader
// epochs: a node cut off from the controller, or just healed, answers from
// its own image. In one run a node back from a cut still named itself the
// leader of a partition it had lost, with its old ISR, and the nemesis
// took it for a replica back in that ISR. Killed and paused nodes do not
// answer; it fails only when none does.
func (r *run) freshMetadata(ctx context.Context, withTopics bool) (*kmsg.MetadataResponse, error) {
	var mu sync.Mutex
	var answers []nodeMetadata
	var errs []error
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		if !n.Broker {
			continue // a controller-only node serves no Metadata
		}
		wg.Go(func() {
			req := kmsg.NewPtrMetadataRequest()
			if !withTopics {
				req.Topics = []kmsg.MetadataRequestTopic{}
			}
			nctx, cancel := context.WithTimeout(ctx, nodeMetadataTimeout)
			defer cancel()
			id := r.brokerID(n)
			resp, err := req.RequestWith(nctx, r.adm.Broker(int(id)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			answers = append(answers, nodeMetadata{id, resp})
		})
	}
	wg.Wait()
	if len(answers) == 0 {
		if len(errs) == 0 {
			return nil, errors.New("no node to ask for metadata")
		}
		return nil, errors.Join(errs...)
	}
	return mergeMetadata(answers), nil
}

// nodeMetadata is one node's metadata answer.
type nodeMetadata struct {
	node int32
	resp *kmsg.MetadataResponse
}

// mergeMetadata merges the metadata answers of several nodes into the
// freshest view: the active controller most of them name (the first
// answer's on a tie; an answer naming none does not vote), and per partition the entry with the highest leader
// epoch, the controller's own node's when several have it (its image is
// the first to change). A topic one node errs on and another knows keeps
// the known entry.
func mergeMetadata(answers []nodeMetadata) *kmsg.MetadataResponse {
	out := *answers[0].resp
	votes := map[int32]int{}
	for _, a := range answers {
		if a.resp.ControllerID >= 0 {
			votes[a.resp.ControllerID]++
		}
	}
	for _, a := range answers {
		if votes[a.resp.ControllerID] > votes[out.ControllerID] {
			out.ControllerID = a.resp.ControllerID
		}
	}
	ordered := slices.Clone(answers)
	slices.SortStableFunc(ordered, func(a, b nodeMetadata) int {
		return cmp.Compare(b2i(a.node != out.ControllerID), b2i(b.node != out.ControllerID))
	})
	type slot struct{ topic, part int }
	var topics []kmsg.MetadataResponseTopic
	byName := map[string]int{}
	best := map[string]map[int32]slot{}
	for _, a := range ordered {
		for _, t := range a.resp.Topics {
			if t.Topic == nil {
				continue
			}
			ti, ok := byName[*t.Topic]
			if !ok {
				ti = len(topics)
				byName[*t.Topic] = ti
				best[*t.Topic] = map[int32]slot{}
				nt := t
				nt.Partitions = nil
				topics = append(topics, nt)
			}
			if topics[ti].ErrorCode != 0 && t.ErrorCode == 0 {
				topics[ti].ErrorCode = 0
				topics[ti].TopicID = t.TopicID
			}
			if t.ErrorCode != 0 {
				continue
			}
			for _, p := range t.Partitions {
				s, seen := best[*t.Topic][p.Partition]
				if !seen {
					best[*t.Topic][p.Partition] = slot{ti, len(topics[ti].Partitions)}
					topics[ti].Partitions = append(topics[ti].Partitions, p)
					continue
				}
				cur := &topics[s.topic].Partitions[s.part]
				if p.LeaderEpoch > cur.LeaderEpoch || (cur.ErrorCode != 0 && p.ErrorCode == 0 && p.LeaderEpoch == cur.LeaderEpoch) {
					*cur = p
				}
			}
		}
	}
	out.Topics = topics
	return &out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
