package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/checker"
	"github.com/faultline/faultline/nemesis"
	"github.com/faultline/faultline/workloads"
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
			r.learnIDs(md)
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
	ids := c.r.learntIDs()
	for _, n := range c.r.nodes {
		if brokerIDIn(ids, n) == id {
			return n.Name
		}
	}
	return ""
}

// brokerID returns the id the cluster reports for node n's broker: its
// node.id unless learnIDs found that the cluster numbers it otherwise.
func (r *run) brokerID(n Node) int32 { return brokerIDIn(r.learntIDs(), n) }

// learntIDs returns what learnIDs learnt, which it replaces whole and
// never changes in place.
func (r *run) learntIDs() map[string]int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids
}

// brokerIDIn is node n's broker id given ids (learntIDs).
func brokerIDIn(ids map[string]int32, n Node) int32 {
	if id, ok := ids[n.Name]; ok {
		return id
	}
	return n.ID
}

// learnIDs maps the run's broker nodes to the ids a Metadata answer lists
// when those are not their node.ids, as with a broker whose ids are its
// own (kfake numbers its one broker 0): first by advertised address, then
// a node.id the answer lists and no node claimed, then, when the run has
// one broker node and the answer one broker, that broker. No two nodes
// get one id: a node the answer does not place keeps what an earlier
// answer taught unless the answer gave that id to another node.
func (r *run) learnIDs(md *kmsg.MetadataResponse) {
	listed := map[int32]bool{}
	byAddr := map[string]int32{}
	for _, b := range md.Brokers {
		listed[b.NodeID] = true
		byAddr[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))] = b.NodeID
	}
	var brokers []Node
	for _, n := range r.nodes {
		if n.Broker {
			brokers = append(brokers, n)
		}
	}
	placed := map[string]bool{}
	claimed := map[int32]bool{}
	ids := map[string]int32{}
	place := func(n Node, id int32) {
		placed[n.Name], claimed[id] = true, true
		if id != n.ID {
			ids[n.Name] = id
		}
	}
	for _, n := range brokers {
		if id, ok := byAddr[n.Addr]; ok && !claimed[id] {
			place(n, id)
		}
	}
	for _, n := range brokers {
		if !placed[n.Name] && listed[n.ID] && !claimed[n.ID] {
			place(n, n.ID)
		}
	}
	if len(brokers) == 1 && len(md.Brokers) == 1 && !placed[brokers[0].Name] {
		place(brokers[0], md.Brokers[0].NodeID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, id := range r.ids {
		if !placed[name] && !claimed[id] {
			ids[name] = id
		}
	}
	if len(ids) == 0 {
		ids = nil
	}
	r.ids = ids
}

func (c *clusterView) Leaders(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.freshMetadata(ctx, true)
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

// Partitions returns the workload's partitions with the leader, replicas
// and ISR one Metadata response names (nemesis.ReplicaView), sorted by
// topic and partition.
func (c *clusterView) Partitions(ctx context.Context) ([]nemesis.PartitionState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.freshMetadata(ctx, true)
	if err != nil {
		return nil, err
	}
	names := func(ids []int32) []string {
		out := make([]string, 0, len(ids))
		for _, id := range ids {
			if n := c.name(id); n != "" {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out
	}
	var out []nemesis.PartitionState
	for _, td := range md.Topics {
		if td.Topic == nil || td.ErrorCode != 0 || c.r.workload == nil || !c.r.workload.OwnsTopic(*td.Topic) {
			continue
		}
		for _, p := range td.Partitions {
			if p.ErrorCode != 0 && p.ErrorCode != kerr.LeaderNotAvailable.Code {
				continue
			}
			out = append(out, nemesis.PartitionState{Topic: *td.Topic, Partition: p.Partition, Leader: c.name(p.Leader),
				Replicas: names(p.Replicas), ISR: names(p.ISR)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// activeWindow is how recently a partition must have had a write
// acknowledged to count as being written now.
const activeWindow = 3 * time.Second

// ActivePartitions returns the workload's partitions ("topic-N") that had
// a send acknowledged within activeWindow (nemesis.ActivityView), passing
// over keys near their retirement (workloads.KeyRetirer) while younger ones
// are written; an error when the workload does not map keys onto
// partitions.
func (c *clusterView) ActivePartitions(context.Context) (map[string]bool, error) {
	kp, ok := c.r.workload.(workloads.KeyPartitioner)
	if !ok {
		return nil, errors.New("the workload does not map its keys onto partitions")
	}
	// A key that has had three quarters of its sends goes quiet soon (the
	// workload retires it), taking a fault's target with it: such keys
	// count only when no other key is being written.
	fresh := 0
	if kr, ok := c.r.workload.(workloads.KeyRetirer); ok {
		fresh = kr.WritesPerKey() * 3 / 4
	}
	keys, young := c.r.writtenSince(time.Now().Add(-activeWindow), fresh)
	if len(young) > 0 {
		keys = young
	}
	out := map[string]bool{}
	for _, k := range keys {
		t, p := kp.TopicPartition(k)
		out[fmt.Sprintf("%s-%d", t, p)] = true
	}
	return out, nil
}

// txnIDLister is a workload that names its transactional ids (the queue
// workload under --txn).
type txnIDLister interface{ TransactionalIDs() []string }

// Coordinators returns the nodes FindCoordinator names as the transaction
// coordinator of the workload's transactional ids (nemesis.CoordinatorView),
// sorted.
func (c *clusterView) Coordinators(ctx context.Context) ([]string, error) {
	lister, ok := c.r.workload.(txnIDLister)
	if !ok {
		return nil, nil
	}
	ids := lister.TransactionalIDs()
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = 1, ids
	resp, err := req.RequestWith(ctx, c.r.adm)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, co := range resp.Coordinators {
		if n := c.name(co.NodeID); co.ErrorCode == 0 && n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (c *clusterView) Controller(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.r.freshMetadata(ctx, false)
	if err != nil {
		return "", err
	}
	if n := c.name(md.ControllerID); n != "" {
		return n, nil
	}
	return "", fmt.Errorf("controller %d is not a known node", md.ControllerID)
}

// groupOwner is a workload whose consumers join consumer groups.
type groupOwner interface {
	// Groups returns the group IDs the workload's consumers join.
	Groups() []string
}

// GroupCoordinators returns the nodes FindCoordinator names for the workload's
// consumer groups (nemesis.GroupCoordinatorView), sorted; none when the
// workload joins no group.
func (c *clusterView) GroupCoordinators(ctx context.Context) ([]string, error) {
	g, ok := c.r.workload.(groupOwner)
	if !ok || len(g.Groups()) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return findCoordinators(ctx, c.r.adm, g.Groups(), c.name)
}

// findCoordinators asks FindCoordinator (v4+ with every key at once, older
// versions one key per request, as the client shards it) for the groups'
// coordinators and names their nodes.
func findCoordinators(ctx context.Context, r kmsg.Requestor, groups []string, name func(int32) string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(id int32, code int16, group string) error {
		if code != 0 {
			return fmt.Errorf("find the coordinator of group %q: %w", group, kerr.ErrorForCode(code))
		}
		n := name(id)
		if n == "" {
			return fmt.Errorf("coordinator %d of group %q is not a known node", id, group)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
		return nil
	}
	for _, group := range groups {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 0
		req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
		resp, err := req.RequestWith(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("find the coordinator of group %q: %w", group, err)
		}
		if len(resp.Coordinators) == 0 {
			if err := add(resp.NodeID, resp.ErrorCode, group); err != nil {
				return nil, err
			}
			continue
		}
		for _, co := range resp.Coordinators {
			if err := add(co.NodeID, co.ErrorCode, co.Key); err != nil {
				return nil, err
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// leaderPollInterval is how often the harness asks for the partition
// leaders while a run goes on.
const leaderPollInterval = 500 * time.Millisecond

// watchLeaders records, as harness events (checker.FLeaders), the leader
// and leader epoch that Metadata responses name for the workload's
// partitions, each time they change, until the returned stop is called.
// It observes the cluster only as a client does; a probe that fails is
// skipped.
func (r *run) watchLeaders(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	view := &clusterView{r: r}
	go func() {
		defer close(done)
		known := map[topicPartition]checker.Leadership{}
		tick := time.NewTicker(leaderPollInterval)
		defer tick.Stop()
		for {
			mctx, mcancel := context.WithTimeout(ctx, 2*time.Second)
			md, err := r.freshMetadata(mctx, true)
			mcancel()
			if err == nil {
				owns := func(topic string) bool { return r.workload != nil && r.workload.OwnsTopic(topic) }
				if changed := leaderChanges(known, md, owns, view.name); len(changed) > 0 {
					raw, _ := json.Marshal(changed)
					r.rec.Record(checker.Op{Process: checker.HarnessProcess, Type: checker.Info, F: checker.FLeaders, Raw: raw})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

type topicPartition struct {
	topic     string
	partition int32
}

// leaderChanges compares a Metadata response with the leaders known so far
// (which it updates) and returns the partitions of owned topics whose
// leader or epoch changed, sorted by topic and partition. A partition
// whose topic or partition carries an error, or whose leader epoch is
// older than the one known, is left as it was known.
func leaderChanges(known map[topicPartition]checker.Leadership, md *kmsg.MetadataResponse, owns func(string) bool, name func(int32) string) []checker.Leadership {
	var out []checker.Leadership
	for _, td := range md.Topics {
		if td.Topic == nil || td.ErrorCode != 0 || !owns(*td.Topic) {
			continue
		}
		for _, p := range td.Partitions {
			if p.ErrorCode != 0 && p.ErrorCode != kerr.LeaderNotAvailable.Code {
				continue
			}
			l := checker.Leadership{Topic: *td.Topic, Partition: p.Partition, Leader: name(p.Leader), Epoch: p.LeaderEpoch}
			key := topicPartition{l.Topic, l.Partition}
			if prev, ok := known[key]; ok && (prev == l || l.Epoch < prev.Epoch) {
				// Unchanged, or a stale answer (a node just healed
				// that still holds an older image): leader epochs
				// only grow.
				continue
			}
			known[key] = l
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}
