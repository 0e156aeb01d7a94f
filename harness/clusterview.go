package harness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitServing waits until every broker node is listed by the cluster's
// metadata and a controller is known.
func (r *run) waitServing(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	want := 0
	for _, n := range r.nodes {
		if n.Broker {
			want++
		}
	}
	var last error
	for {
		mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
		md, err := r.metadata(mctx, false)
		mcancel()
		switch {
		case err != nil:
			last = err
		case len(md.Brokers) < want:
			last = fmt.Errorf("%d of %d brokers registered", len(md.Brokers), want)
		case md.ControllerID < 0:
			last = errors.New("no active controller")
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// metadata asks the cluster directly, bypassing the client's metadata
// cache (kadm's BrokerMetadata and Metadata answer from a cache that can
// stay stale while a cluster starts or fails over); withTopics asks for
// every topic.
func (r *run) metadata(ctx context.Context, withTopics bool) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if !withTopics {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	return req.RequestWith(ctx, r.adm)
}

// clusterView answers the nemesis's questions from live metadata.
type clusterView struct{ r *run }

func (c *clusterView) Nodes() []string {
	names := make([]string, len(c.r.nodes))
	for i, n := range c.r.nodes {
		names[i] = n.Name
	}
	return names
}

func (c *clusterView) name(id int32) string {
	for _, n := range c.r.nodes {
		if n.ID == id {
			return n.Name
		}
	}
	return ""
}

func (c *clusterView) Leaders(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.metadata(ctx, true)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, td := range md.Topics {
		if td.Topic == nil || c.r.workload == nil || !c.r.workload.OwnsTopic(*td.Topic) {
			continue
		}
		for _, p := range td.Partitions {
			if n := c.name(p.Leader); n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func (c *clusterView) Controller(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.metadata(ctx, false)
	if err != nil {
		return "", err
	}
	if n := c.name(md.ControllerID); n != "" {
		return n, nil
	}
	return "", fmt.Errorf("controller %d is not a known node", md.ControllerID)
}
