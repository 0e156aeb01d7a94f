package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// PartitionState is one of the workload's partitions as a Metadata
// response names it: what a client can observe, never broker internals.
type PartitionState struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Leader    string   `json:"leader,omitempty"` // "" while it has none
	Replicas  []string `json:"replicas"`
	ISR       []string `json:"isr"`
}

// ReplicaView is what the ISR-aware faults (rolling-restart, membership,
// lagging-failover) need besides Cluster: the workload's partitions with
// their leader, replicas and in-sync replicas, from live metadata. The
// harness's cluster view has it.
type ReplicaView interface {
	Partitions(ctx context.Context) ([]PartitionState, error)
}

// ActivityView is what aims a fault at the partitions being written now
// (a flip in a partition nobody writes to, or a failover of one, shows
// nothing): the workload's partitions ("topic-N") that had a write
// acknowledged in the last few seconds. The harness's cluster view has it.
type ActivityView interface {
	ActivePartitions(ctx context.Context) (map[string]bool, error)
}

// activePartitions asks c for the partitions being written now; nil when
// it cannot tell (then every partition counts).
func activePartitions(ctx context.Context, c Cluster) map[string]bool {
	view, ok := c.(ActivityView)
	if !ok {
		return nil
	}
	active, err := view.ActivePartitions(ctx)
	if err != nil || len(active) == 0 {
		return nil
	}
	return active
}

// label names a partition as its directory does: "topic-N".
func (p PartitionState) label() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// activeFirst keeps, of parts, those being written now when there are any
// (active nil: all of them).
func activeFirst(parts []PartitionState, active map[string]bool) []PartitionState {
	if active == nil {
		return parts
	}
	var out []PartitionState
	for _, p := range parts {
		if active[p.label()] {
			out = append(out, p)
		}
	}
	return out
}

var errNoReplicaView = errors.New("the cluster view names no ISR (this fault needs the harness's metadata view)")

// isrPoll is how often the ISR-aware faults ask for metadata.
const isrPoll = 250 * time.Millisecond

// waitFor polls the partitions until done says so, for at most limit; it
// returns how long that took, or an error naming last's verdict.
func waitFor(ctx context.Context, rv ReplicaView, limit time.Duration, what string, done func([]PartitionState) bool) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		parts, err := rv.Partitions(ctx)
		if err == nil && done(parts) {
			return time.Since(start).Round(time.Millisecond), nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return time.Since(start), fmt.Errorf("%s: not seen within %s (last metadata error: %v)", what, limit, last)
			}
			return time.Since(start), fmt.Errorf("%s: not seen within %s", what, limit)
		case <-time.After(isrPoll):
		}
	}
}

// inEveryISR reports whether node is in the ISR of every partition it
// replicates (and the metadata lists at least one partition).
func inEveryISR(node string) func([]PartitionState) bool {
	return func(parts []PartitionState) bool {
		if len(parts) == 0 {
			return false
		}
		for _, p := range parts {
			if slices.Contains(p.Replicas, node) && !slices.Contains(p.ISR, node) {
				return false
			}
		}
		return true
	}
}

// outOfEveryISR reports whether node is in no partition's ISR.
func outOfEveryISR(node string) func([]PartitionState) bool {
	return func(parts []PartitionState) bool {
		if len(parts) == 0 {
			return false
		}
		for _, p := range parts {
			if slices.Contains(p.ISR, node) {
				return false
			}
		}
		return true
	}
}

// Stop shuts its targets down cleanly (SIGTERM: a controlled shutdown,
// leadership handed over) and restarts them, on their own data, when it
// stops.
type Stop struct {
	Runtime Runtime
	Cluster Cluster
	Modes   []string
	stopped []string
}

// Name is "stop".
func (s *Stop) Name() string { return string(KindStop) }

// Start stops the chosen nodes, one after another.
func (s *Stop) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	return hitTargets(ctx, rng, s.Cluster, s.Modes, &s.stopped, s.Runtime.Stop)
}

// Stop restarts every node it stopped.
func (s *Stop) Stop(ctx context.Context) (any, error) {
	started := s.stopped
	s.stopped = nil
	return Targets{Nodes: started}, startAll(ctx, s.Runtime, started)
}

// MembershipResult records what a membership or rolling-restart fault did:
// the nodes in the order it took them, and for each how long the cluster
// took to see it leave and come back.
type MembershipResult struct {
	Nodes []string          `json:"nodes"`
	Did   map[string]string `json:"did,omitempty"`
}

// AimedAt returns the nodes, in the order they were taken.
func (m MembershipResult) AimedAt() []string { return m.Nodes }

// RejoinTimeout bounds how long a node restarted by rolling-restart or
// membership may take to be back in the ISR of every partition it
// replicates, and how long membership waits for the node to be seen gone.
const RejoinTimeout = 60 * time.Second

// RollingRestart restarts every node one by one, as an operator's rolling
// upgrade: SIGTERM, start on the same data, and wait until the node is back
// in the ISR of every partition it replicates before the next one goes.
// It does all that when it starts; stopping it restarts a node a failed
// step left down.
type RollingRestart struct {
	Runtime Runtime
	Cluster Cluster
	down    []string
}

// Name is "rolling-restart".
func (r *RollingRestart) Name() string { return string(KindRollingRestart) }

// timeout is the time a whole rolling restart may take.
func (r *RollingRestart) timeout() time.Duration {
	return time.Duration(len(r.Cluster.Nodes())) * (RejoinTimeout + 30*time.Second)
}

// Start restarts every node in turn.
func (r *RollingRestart) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	order := shuffled(r.Cluster.Nodes(), rng)
	if pinned := aimOf(ctx).nodes; len(pinned) > 0 {
		order = append([]string(nil), pinned...)
	}
	out := MembershipResult{Nodes: order, Did: map[string]string{}}
	rv, ok := r.Cluster.(ReplicaView)
	if !ok {
		return out, errNoReplicaView
	}
	for _, n := range order {
		t0 := time.Now()
		if err := r.Runtime.Stop(ctx, n); err != nil {
			out.Did[n] = "stop failed: " + err.Error()
			r.down = append(r.down, n)
			return out, fmt.Errorf("stop %s: %w", n, err)
		}
		if err := r.Runtime.Start(ctx, n); err != nil {
			out.Did[n] = "start failed: " + err.Error()
			r.down = append(r.down, n)
			return out, fmt.Errorf("start %s: %w", n, err)
		}
		if _, err := waitFor(ctx, rv, RejoinTimeout, n+" back in every ISR", inEveryISR(n)); err != nil {
			out.Did[n] = err.Error()
			return out, err
		}
		out.Did[n] = fmt.Sprintf("stopped (SIGTERM), started on its own data, back in every ISR %s after the stop", time.Since(t0).Round(time.Millisecond))
	}
	return out, nil
}

// Stop starts a node that a failed step left down.
func (r *RollingRestart) Stop(ctx context.Context) (any, error) {
	started := r.down
	r.down = nil
	return Targets{Nodes: started}, startAll(ctx, r.Runtime, started)
}

// Membership takes one node out of the cluster (a controlled shutdown)
// until the others no longer list it in any ISR, and when it stops brings
// it back on the data it had (the data dir is kept) and waits until it is
// in the ISR of every partition it replicates again. A node that never
// leaves or never returns within RejoinTimeout is recorded as such (info).
type Membership struct {
	Runtime Runtime
	Cluster Cluster
	out     []string
}

// Name is "membership".
func (m *Membership) Name() string { return string(KindMembership) }

// waitsOnStop: its stop waits for the node to rejoin every ISR, so the
// schedule heals the other faults first at the end of a run.
func (m *Membership) waitsOnStop() bool { return true }

// Start takes one node out.
func (m *Membership) Start(ctx context.Context, rng *rand.Rand) (any, error) {
	nodes := m.Cluster.Nodes()
	n := nodes[rng.IntN(len(nodes))]
	if pinned := aimOf(ctx).nodes; len(pinned) > 0 {
		n = pinned[0]
	}
	out := MembershipResult{Nodes: []string{n}, Did: map[string]string{}}
	rv, ok := m.Cluster.(ReplicaView)
	if !ok {
		return out, errNoReplicaView
	}
	m.out = append(m.out, n)
	if err := m.Runtime.Stop(ctx, n); err != nil {
		return out, fmt.Errorf("stop %s: %w", n, err)
	}
	took, err := waitFor(ctx, rv, RejoinTimeout, n+" out of every ISR", outOfEveryISR(n))
	if err != nil {
		out.Did[n] = "stopped (SIGTERM); " + err.Error()
		return out, err
	}
	out.Did[n] = fmt.Sprintf("stopped (SIGTERM), out of every ISR after %s; data dir kept", took)
	return out, nil
}

// Stop brings the node back and waits for it to rejoin.
func (m *Membership) Stop(ctx context.Context) (any, error) {
	back := m.out
	m.out = nil
	out := MembershipResult{Nodes: back, Did: map[string]string{}}
	if err := startAll(ctx, m.Runtime, back); err != nil {
		return out, err
	}
	rv, ok := m.Cluster.(ReplicaView)
	if !ok {
		return out, errNoReplicaView
	}
	var errs []error
	for _, n := range back {
		took, err := waitFor(ctx, rv, RejoinTimeout, n+" back in every ISR", inEveryISR(n))
		if err != nil {
			out.Did[n] = "started on its own data; " + err.Error()
			errs = append(errs, err)
			continue
		}
		out.Did[n] = fmt.Sprintf("started on its own data, back in every ISR after %s", took)
	}
	return out, errors.Join(errs...)
}

// pickAimed draws, with pick, one of the candidates that cands finds among
// the live cluster's partitions (ctl is the active controller): among
// those being written now when any qualify, else among all; on a replay
// the pinned node must be the candidate's leader. none is the error when
// there is no candidate.
func pickAimed[T any](ctx context.Context, c Cluster, pick uint64, cands func(parts []PartitionState, ctl string) []T, leader func(T) string, none string) (T, error) {
	var zero T
	view, ok := c.(ReplicaView)
	if !ok {
		return zero, errNoReplicaView
	}
	ctl, err := c.Controller(ctx)
	if err != nil {
		return zero, fmt.Errorf("find the active controller: %w", err)
	}
	parts, err := view.Partitions(ctx)
	if err != nil {
		return zero, fmt.Errorf("find partition leaders: %w", err)
	}
	found := cands(activeFirst(parts, activePartitions(ctx, c)), ctl)
	if len(found) == 0 {
		found = cands(parts, ctl)
	}
	if pinned := pinnedNodes(ctx); len(pinned) > 0 {
		found = slices.DeleteFunc(found, func(t T) bool { return leader(t) != pinned[0] })
	}
	if len(found) == 0 {
		return zero, errors.New(none)
	}
	return found[pick%uint64(len(found))], nil
}

// chooseLeaderStep records a sequence fault's choose-leader step: the
// leader and partition drawn live (or the error that prevented it), or
// on a replay the ones recorded. mode names the fault in errors.
func chooseLeaderStep(seq *sequence, mode, rule, leader, partition string, liveErr error) (string, string, error) {
	var chosen []string
	if leader != "" {
		chosen = []string{leader}
	}
	st, err := seq.step(Step{Name: "choose-leader", Rule: rule, Nodes: chosen, Partition: partition}, liveErr)
	if err != nil {
		return "", "", err
	}
	if len(st.Nodes) != 1 || st.Partition == "" {
		return "", "", fmt.Errorf("%s: recorded step %s names %v and %q, not a leader and its partition", mode, st.Name, st.Nodes, st.Partition)
	}
	return st.Nodes[0], st.Partition, nil
}
