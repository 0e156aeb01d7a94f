package group

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/metadata"
)

// Coordinator is the classic group coordinator of one broker. It implements
// server.Groups. Create it with New, feed it leadership changes with
// ApplyImage or OnPartitionLeadership, and Close it at shutdown.
type Coordinator struct {
	cfg    Config
	log    OffsetsLog
	md     metadata.Source
	logger *slog.Logger
	clock  Clock

	// ctx lives as long as the coordinator; loads and group metadata
	// writes that no single request owns run under it.
	ctx    context.Context
	cancel context.CancelFunc
	loads  sync.WaitGroup

	appendLocks PartitionLocks

	mu         sync.Mutex
	closed     bool
	partitions map[int32]*partitionState // offsets partitions this node leads
	groups     map[string]*group
	tokenSeq   uint64
	// txnPending are offsets committed inside transactions not yet
	// ended (TxnOffsetCommit), by offsets partition and producer.
	txnPending map[txnKey]map[string]map[topicPartition]committedOffset
}

// partitionState is one offsets partition this node leads. token changes
// every time leadership is gained, so work started under an older
// leadership can tell that it is stale.
type partitionState struct {
	loading     bool
	token       uint64
	leaderEpoch int32 // -1 when leadership came from OnPartitionLeadership
	cancel      context.CancelFunc
	retry       Timer
}

// New returns a coordinator that owns no partition yet.
func New(cfg Config, offsets OffsetsLog, md metadata.Source) (*Coordinator, error) {
	if offsets == nil || md == nil {
		return nil, errors.New("group coordinator needs an offsets log and a metadata source")
	}
	cfg.fillDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("group coordinator config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		cfg:        cfg,
		log:        offsets,
		md:         md,
		logger:     cfg.Logger,
		clock:      cfg.Clock,
		ctx:        ctx,
		cancel:     cancel,
		partitions: map[int32]*partitionState{},
		groups:     map[string]*group{},
	}, nil
}

// Close drops every group, answers parked requests with NOT_COORDINATOR and
// waits for running loads to stop.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for p := range c.partitions {
		c.unloadLocked(p)
	}
	c.mu.Unlock()
	c.cancel()
	c.loads.Wait()
}

// numPartitions is the partition count of __consumer_offsets: the topic's
// own once it exists, the configured one before.
func (c *Coordinator) numPartitions() int32 {
	if t := c.md.Image().Topic(OffsetsTopic); t != nil && len(t.Partitions) > 0 {
		return int32(len(t.Partitions))
	}
	return c.cfg.OffsetsTopicNumPartitions
}

// PartitionFor returns the offsets partition that holds group.
func (c *Coordinator) PartitionFor(group string) int32 {
	return partitionFor(group, c.numPartitions())
}

// ownerLocked returns the group's offsets partition and whether this node
// can serve it: NOT_COORDINATOR when it does not lead the partition,
// COORDINATOR_LOAD_IN_PROGRESS while the partition is being replayed.
func (c *Coordinator) ownerLocked(group string) (int32, int16) {
	p := c.PartitionFor(group)
	st := c.partitions[p]
	switch {
	case st == nil:
		return p, codeNotCoordinator
	case st.loading:
		return p, codeCoordinatorLoadInProgress
	}
	return p, codeNone
}

// lockOwner takes the append lock of group's offsets partition, then c.mu,
// checking that this node serves the partition before and after the
// append lock (ownerLocked): the append lock orders a write's records and
// its effect on memory with every other write to the partition. On
// success it returns the partition and the append lock's unlock with both
// locks held (the caller releases c.mu itself); otherwise it holds
// neither and returns ownerLocked's code.
func (c *Coordinator) lockOwner(group string) (int32, func(), int16) {
	c.mu.Lock()
	p, code := c.ownerLocked(group)
	c.mu.Unlock()
	if code != codeNone {
		return p, nil, code
	}
	lock := c.appendLocks.Of(p)
	lock.Lock()
	c.mu.Lock()
	if _, code := c.ownerLocked(group); code != codeNone {
		c.mu.Unlock()
		lock.Unlock()
		return p, nil, code
	}
	return p, lock.Unlock, codeNone
}

// ApplyImage brings the set of offsets partitions this coordinator owns in
// line with image: it starts loading the partitions whose leader became this
// node, drops the ones it no longer leads, and reloads a partition whose
// leader epoch changed while it stayed here (another leader may have written
// to it in between). It has the shape of a metadata.Publisher subscriber;
// for the partitions only the new image matters, as the coordinator
// compares it with what it owns, so a missed image does no harm; a topic
// that prev has and image does not (or has under another id) was deleted,
// and the groups' offsets of it are dropped (dropDeletedTopicOffsets). The partition layer should see the
// image first: until it serves the partition as leader, Replay fails and
// the load is retried.
func (c *Coordinator) ApplyImage(prev, image *metadata.Image) {
	if deleted := deletedTopics(prev, image); len(deleted) > 0 {
		c.dropDeletedTopicOffsets(deleted)
	}
	leads := map[int32]int32{} // partition -> leader epoch
	if t := image.Topic(OffsetsTopic); t != nil {
		for _, p := range t.Partitions {
			if p.Leader == c.cfg.NodeID {
				leads[p.Partition] = p.LeaderEpoch
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range c.partitions {
		if _, ok := leads[p]; !ok {
			c.setLeadershipLocked(p, false, -1)
		}
	}
	for p, epoch := range leads {
		c.setLeadershipLocked(p, true, epoch)
	}
}

// OnPartitionLeadership tells the coordinator that this node became (true)
// or stopped being (false) the leader of offsets partition p, for a node
// that tracks leadership itself instead of calling ApplyImage. Becoming
// leader starts replaying the partition in the background; until it is done
// the groups on p answer COORDINATOR_LOAD_IN_PROGRESS. Repeated calls with
// the same value do nothing.
func (c *Coordinator) OnPartitionLeadership(p int32, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLeadershipLocked(p, leader, -1)
}

// setLeadershipLocked applies one leadership change; epoch -1 means unknown
// and never forces a reload.
func (c *Coordinator) setLeadershipLocked(p int32, leader bool, epoch int32) {
	if c.closed {
		return
	}
	st := c.partitions[p]
	if !leader {
		if st != nil {
			c.unloadLocked(p)
		}
		return
	}
	if st != nil {
		if epoch < 0 || st.leaderEpoch < 0 || st.leaderEpoch == epoch {
			return
		}
		c.unloadLocked(p)
	}
	c.tokenSeq++
	st = &partitionState{loading: true, token: c.tokenSeq, leaderEpoch: epoch}
	c.partitions[p] = st
	c.startLoadLocked(p, st)
}

func (c *Coordinator) startLoadLocked(p int32, st *partitionState) {
	ctx, cancel := context.WithCancel(c.ctx)
	st.cancel = cancel
	c.logger.Info(fmt.Sprintf("Scheduling loading of offsets and group metadata from %s-%d", OffsetsTopic, p))
	c.loads.Add(1)
	go c.load(ctx, p, st.token)
}

// unloadLocked forgets partition p and its groups; parked requests of those
// groups are answered with NOT_COORDINATOR.
func (c *Coordinator) unloadLocked(p int32) {
	st := c.partitions[p]
	delete(c.partitions, p)
	if st.cancel != nil {
		st.cancel()
	}
	if st.retry != nil {
		st.retry.Stop()
	}
	n := 0
	for id, g := range c.groups {
		if g.partition != p {
			continue
		}
		c.dropGroupLocked(g, codeNotCoordinator)
		delete(c.groups, id)
		n++
	}
	c.dropPendingLocked(p)
	c.logger.Info(fmt.Sprintf("Unloaded %d groups of %s-%d", n, OffsetsTopic, p))
}

func (c *Coordinator) dropGroupLocked(g *group, code int16) {
	stopTimer(g.joinTimer)
	stopTimer(g.syncTimer)
	for _, pm := range g.pending {
		stopTimer(pm.timer)
	}
	for _, m := range g.members {
		stopTimer(m.sessionTimer)
		m.answerJoin(joinError(m.id, code))
		m.answerSync(syncError(code))
	}
	g.transition(stateDead, c.clock.Now())
}

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}

// load replays partition p and installs its groups. It holds the
// partition's append lock so that no commit of an older leadership can land
// in the log behind the replay's back.
func (c *Coordinator) load(ctx context.Context, p int32, token uint64) {
	defer c.loads.Done()
	lock := c.appendLocks.Of(p)
	lock.Lock()
	defer lock.Unlock()
	if !c.current(p, token) {
		return
	}
	start := c.clock.Now()
	loaded := newLoadedPartition(p, c.logger)
	err := c.replay(ctx, p, loaded)

	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.partitions[p]
	if st == nil || st.token != token {
		return
	}
	if err != nil {
		c.logger.Error(fmt.Sprintf("Error loading offsets from %s-%d, retrying in %d ms: %v", OffsetsTopic, p, c.cfg.LoadRetryBackoffMs, err))
		st.retry = c.clock.AfterFunc(msDuration(c.cfg.LoadRetryBackoffMs), func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if cur := c.partitions[p]; cur == st && !c.closed {
				c.startLoadLocked(p, st)
			}
		})
		return
	}
	groups := c.installLocked(loaded)
	c.installPendingLocked(loaded)
	st.loading = false
	c.logger.Info(fmt.Sprintf("Finished loading offsets and group metadata from %s-%d in %d milliseconds (%d groups, %d unreadable records skipped)",
		OffsetsTopic, p, c.clock.Now().Sub(start).Milliseconds(), groups, loaded.skipped))
}

func (c *Coordinator) current(p int32, token uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.partitions[p]
	return st != nil && st.token == token
}

// installLocked turns a replayed partition into live groups and returns how
// many it installed. Groups with members come back Stable with fresh
// session timers, as after a coordinator failover in Kafka.
func (c *Coordinator) installLocked(l *loadedPartition) int {
	now := c.clock.Now()
	parts := c.numPartitions()
	n := 0
	get := func(id string) *group {
		if g := c.groups[id]; g != nil && g.partition == l.partition {
			return g
		}
		if partitionFor(id, parts) != l.partition {
			c.logger.Warn(fmt.Sprintf("Ignoring group %s found in %s-%d: it belongs to partition %d", id, OffsetsTopic, l.partition, partitionFor(id, parts)))
			return nil
		}
		g := newGroup(id, l.partition, now)
		c.groups[id] = g
		n++
		return g
	}
	for id, v := range l.groups {
		g := get(id)
		if g == nil {
			continue
		}
		c.restoreGroupLocked(g, v)
	}
	for id, offs := range l.offsets {
		if g := get(id); g != nil {
			g.offsets = offs
		}
	}
	return n
}

func (c *Coordinator) restoreGroupLocked(g *group, v *kmsg.GroupMetadataValue) {
	g.protocolType = v.ProtocolType
	g.generation = v.Generation
	if len(v.Members) == 0 {
		return
	}
	leaderFound := false
	for _, vm := range v.Members {
		if v.Leader != nil && vm.MemberID == *v.Leader {
			leaderFound = true
		}
	}
	if v.Protocol == nil || !leaderFound {
		c.logger.Warn(fmt.Sprintf("Group %s in %s-%d has members but no valid protocol or leader; loading it as Empty", g.id, OffsetsTopic, g.partition))
		return
	}
	g.protocol = *v.Protocol
	g.leader = *v.Leader
	for _, vm := range v.Members {
		m := &member{
			id:                 vm.MemberID,
			instanceID:         vm.InstanceID,
			clientID:           vm.ClientID,
			clientHost:         vm.ClientHost,
			sessionTimeoutMs:   vm.SessionTimeoutMillis,
			rebalanceTimeoutMs: vm.RebalanceTimeoutMillis,
			protocolType:       v.ProtocolType,
			protocols:          []kmsg.JoinGroupRequestProtocol{{Name: g.protocol, Metadata: vm.Subscription}},
			assignment:         vm.Assignment,
		}
		if m.sessionTimeoutMs <= 0 {
			m.sessionTimeoutMs = int32(c.cfg.GroupMinSessionTimeoutMs)
		}
		if m.rebalanceTimeoutMs <= 0 {
			m.rebalanceTimeoutMs = m.sessionTimeoutMs
		}
		if old := g.members[m.id]; old != nil {
			stopTimer(old.sessionTimer)
		}
		g.members[m.id] = m
		if m.instanceID != nil {
			g.static[*m.instanceID] = m.id
		}
		c.scheduleSessionLocked(g, m)
	}
	g.transition(stateStable, c.clock.Now())
}

// live tells whether g is still the coordinator's group of that name; timer
// callbacks of dropped groups check it and do nothing.
func (c *Coordinator) liveLocked(g *group) bool {
	return c.groups[g.id] == g && g.state != stateDead
}

// scheduleSessionLocked restarts m's session timer.
func (c *Coordinator) scheduleSessionLocked(g *group, m *member) {
	stopTimer(m.sessionTimer)
	m.sessionSeq++
	seq := m.sessionSeq
	m.sessionTimer = c.clock.AfterFunc(msDuration(int64(m.sessionTimeoutMs)), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.liveLocked(g) || g.members[m.id] != m || m.sessionSeq != seq {
			return
		}
		// A member whose JoinGroup or SyncGroup is parked is alive: it is
		// waiting for us, not the other way round.
		if m.joinWait != nil || m.syncWait != nil {
			c.scheduleSessionLocked(g, m)
			return
		}
		c.logger.Info(fmt.Sprintf("Member %s in group %s has failed, removing it from the group", m.id, g.id))
		c.removeMemberLocked(g, m, codeUnknownMemberID)
	})
}

// removeMemberLocked takes m out of g and starts a rebalance if needed.
func (c *Coordinator) removeMemberLocked(g *group, m *member, code int16) {
	stopTimer(m.sessionTimer)
	m.answerJoin(joinError(m.id, code))
	m.answerSync(syncError(code))
	delete(g.members, m.id)
	delete(g.syncPending, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembers(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
	switch g.state {
	case stateStable, stateCompletingRebalance:
		c.prepareRebalanceLocked(g, "removing member "+m.id)
	case statePreparingRebalance:
		c.tryCompleteJoinLocked(g)
	}
}

// prepareRebalanceLocked moves g to PreparingRebalance and arms the join
// timer: the initial rebalance delay when the group was empty, the
// rebalance timeout otherwise.
func (c *Coordinator) prepareRebalanceLocked(g *group, reason string) {
	if g.state == stateCompletingRebalance {
		c.resetAssignmentLocked(g, codeRebalanceInProgress)
	}
	stopTimer(g.syncTimer)
	g.syncSeq++
	clear(g.syncPending)
	wasEmpty := g.state == stateEmpty
	g.transition(statePreparingRebalance, c.clock.Now())
	c.logger.Info(fmt.Sprintf("Preparing to rebalance group %s in state PreparingRebalance with old generation %d (%s-%d) (reason: %s)",
		g.id, g.generation, OffsetsTopic, g.partition, reason))
	rebalanceMs := g.rebalanceTimeoutMs()
	if wasEmpty && c.cfg.GroupInitialRebalanceDelayMs > 0 {
		delay := min(c.cfg.GroupInitialRebalanceDelayMs, max(rebalanceMs, 0))
		g.initialDelay = true
		g.newMemberAdded = false
		g.rebalanceRemainingMs = max(rebalanceMs-delay, 0)
		c.armJoinTimerLocked(g, delay)
		return
	}
	g.initialDelay = false
	c.armJoinTimerLocked(g, rebalanceMs)
	c.tryCompleteJoinLocked(g)
}

func (c *Coordinator) armJoinTimerLocked(g *group, delayMs int64) {
	stopTimer(g.joinTimer)
	g.joinSeq++
	seq := g.joinSeq
	g.joinTimer = c.clock.AfterFunc(msDuration(delayMs), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.liveLocked(g) || g.joinSeq != seq || g.state != statePreparingRebalance {
			return
		}
		if g.initialDelay && g.newMemberAdded && g.rebalanceRemainingMs > 0 {
			// Members are still arriving: wait another delay, within
			// what is left of the rebalance timeout.
			g.newMemberAdded = false
			d := min(c.cfg.GroupInitialRebalanceDelayMs, g.rebalanceRemainingMs)
			g.rebalanceRemainingMs -= d
			c.armJoinTimerLocked(g, d)
			return
		}
		c.completeJoinLocked(g)
	})
}

func (c *Coordinator) tryCompleteJoinLocked(g *group) {
	if g.state == statePreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoinLocked(g)
	}
}

// completeJoinLocked ends the join phase: members that did not rejoin are
// removed, the generation advances and every parked JoinGroup is answered
// (the leader with the member list). A group left without members becomes
// Empty and is written to the log.
func (c *Coordinator) completeJoinLocked(g *group) {
	stopTimer(g.joinTimer)
	g.joinSeq++
	g.initialDelay = false
	for _, m := range g.sortedMembers() {
		if m.joinWait == nil {
			c.logger.Info(fmt.Sprintf("Member %s in group %s has not rejoined in time, removing it from the group", m.id, g.id))
			stopTimer(m.sessionTimer)
			m.answerSync(syncError(codeRebalanceInProgress))
			delete(g.members, m.id)
			if m.instanceID != nil && g.static[*m.instanceID] == m.id {
				delete(g.static, *m.instanceID)
			}
		}
	}
	g.generation++
	now := c.clock.Now()
	if len(g.members) == 0 {
		g.protocol = ""
		g.leader = ""
		g.transition(stateEmpty, now)
		c.logger.Info(fmt.Sprintf("Group %s with generation %d is now empty (%s-%d)", g.id, g.generation, OffsetsTopic, g.partition))
		c.persistGroupAsync(g)
		return
	}
	if g.members[g.leader] == nil {
		g.leader = g.sortedMembers()[0].id
	}
	g.protocol = g.selectProtocol()
	g.transition(stateCompletingRebalance, now)
	c.logger.Info(fmt.Sprintf("Stabilized group %s generation %d (%s-%d) with %d members", g.id, g.generation, OffsetsTopic, g.partition, len(g.members)))
	for _, m := range g.members {
		g.syncPending[m.id] = true
		m.answerJoin(c.joinResponseLocked(g, m))
		c.scheduleSessionLocked(g, m)
	}
	// Members that never send SyncGroup are removed after the rebalance
	// timeout, so that the others are not kept waiting forever.
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	stopTimer(g.syncTimer)
	g.syncTimer = c.clock.AfterFunc(msDuration(g.rebalanceTimeoutMs()), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.liveLocked(g) || g.syncSeq != seq || g.generation != gen || len(g.syncPending) == 0 {
			return
		}
		if g.state != stateCompletingRebalance && g.state != stateStable {
			return
		}
		for id := range g.syncPending {
			if m := g.members[id]; m != nil {
				c.logger.Info(fmt.Sprintf("Member %s in group %s did not send SyncGroup in time, removing it from the group", id, g.id))
				c.removeMemberLocked(g, m, codeUnknownMemberID)
			}
		}
	})
}

func (c *Coordinator) joinResponseLocked(g *group, m *member) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	pt, pr := g.protocolType, g.protocol
	r.ProtocolType = &pt
	r.Protocol = &pr
	r.LeaderID = g.leader
	r.MemberID = m.id
	if m.id == g.leader {
		for _, o := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			rm.InstanceID = o.instanceID
			rm.ProtocolMetadata = o.metadataFor(g.protocol)
			r.Members = append(r.Members, rm)
		}
	}
	return r
}

// resetAssignmentLocked forgets a pending assignment and answers the parked
// SyncGroups with code.
func (c *Coordinator) resetAssignmentLocked(g *group, code int16) {
	g.assignmentPending = false
	for _, m := range g.members {
		m.assignment = nil
		if m.syncWait != nil {
			m.answerSync(syncError(code))
			// The member was kept alive while it waited; it gets a full
			// session to act on the answer.
			c.scheduleSessionLocked(g, m)
		}
	}
}

// persistGroupAsync writes g's current metadata (Empty or Stable) to the log
// in the background; Kafka does the same when a group empties. A failure
// is only logged: the in-memory group is right, the log catches up with the
// next write.
func (c *Coordinator) persistGroupAsync(g *group) {
	c.loads.Add(1)
	go func() {
		defer c.loads.Done()
		lock := c.appendLocks.Of(g.partition)
		lock.Lock()
		defer lock.Unlock()
		c.mu.Lock()
		if !c.liveLocked(g) || (g.state != stateEmpty && g.state != stateStable) {
			c.mu.Unlock()
			return
		}
		rec := groupMetadataRecord(g.id, g.metadataValue(c.clock.Now()))
		c.mu.Unlock()
		if err := c.appendRecords(g.partition, []Record{rec}); err != nil {
			c.logger.Warn(fmt.Sprintf("Failed to write metadata of group %s to %s-%d: %v", g.id, OffsetsTopic, g.partition, err))
		}
	}()
}

func joinError(memberID string, code int16) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.ErrorCode = code
	r.Generation = -1
	r.MemberID = memberID
	return r
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.ErrorCode = code
	return r
}

// newMemberID returns "clientId-UUID" as Kafka names members.
func newMemberID(clientID string) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", clientID, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func msDuration(ms int64) time.Duration {
	return time.Duration(ms) * time.Millisecond
}

// appendRecords appends to offsets partition p, waiting at most
// offsets.commit.timeout.ms for the records to be committed.
func (c *Coordinator) appendRecords(p int32, records []Record) error {
	ctx, cancel := context.WithTimeout(c.ctx, msDuration(c.cfg.OffsetsCommitTimeoutMs))
	defer cancel()
	return c.log.Append(ctx, p, records)
}

// deletedTopics returns the topics of prev that next no longer has, or has
// under another topic id (deleted and created again between the images).
func deletedTopics(prev, next *metadata.Image) map[string]bool {
	if prev == nil {
		return nil
	}
	var out map[string]bool
	for name, t := range prev.Topics {
		if nt := next.Topic(name); nt == nil || nt.ID != t.ID {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// dropDeletedTopicOffsets removes the committed offsets of deleted topics
// from the groups this coordinator owns and writes their tombstones, and
// forgets transactions' pending offsets of those topics, as Kafka's
// GroupCoordinator.onPartitionsDeleted does when the metadata publisher
// sees a topic deleted. Each offsets partition is handled under its append
// lock, so the tombstones land in the log in the order their removal is
// applied in memory. It runs in the background (ApplyImage is the
// publisher's callback, which an append must not wait on); a commit for a
// topic created again under the same name that lands before it is removed
// too, as in Kafka.
func (c *Coordinator) dropDeletedTopicOffsets(deleted map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	for p, st := range c.partitions {
		c.loads.Add(1)
		go c.dropPartitionOffsets(p, st.token, deleted)
	}
}

// dropPartitionOffsets is dropDeletedTopicOffsets for offsets partition p,
// owned under token: once p is loaded (a load holds the append lock while
// it replays, so a partition still loading is waited for, or its replay
// would bring the offsets back), and for as long as this node owns it.
func (c *Coordinator) dropPartitionOffsets(p int32, token uint64, deleted map[string]bool) {
	defer c.loads.Done()
	lock := c.appendLocks.Of(p)
	for {
		lock.Lock()
		c.mu.Lock()
		st := c.partitions[p]
		if c.closed || st == nil || st.token != token {
			c.mu.Unlock()
			lock.Unlock()
			return
		}
		if !st.loading {
			break
		}
		c.mu.Unlock()
		lock.Unlock()
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(loadWaitPoll):
		}
	}
	defer lock.Unlock()
	for k, byGroup := range c.txnPending {
		if k.partition != p {
			continue
		}
		for _, offs := range byGroup {
			maps.DeleteFunc(offs, func(tp topicPartition, _ committedOffset) bool { return deleted[tp.topic] })
		}
	}
	var recs []Record
	for _, g := range c.groups {
		if g.partition != p || !c.liveLocked(g) {
			continue
		}
		for tp := range g.offsets {
			if deleted[tp.topic] {
				delete(g.offsets, tp)
				recs = append(recs, offsetTombstone(g.id, tp))
			}
		}
	}
	c.mu.Unlock()
	if len(recs) == 0 {
		return
	}
	if err := c.appendRecords(p, recs); err != nil {
		c.logger.Warn(fmt.Sprintf("Failed to write %d offset tombstones of deleted topics to %s-%d: %v", len(recs), OffsetsTopic, p, err))
	}
}

// loadWaitPoll is how often dropPartitionOffsets looks whether a
// partition it waits for has loaded, on the wall clock (not Config.Clock:
// a fake clock must not be needed to let a load's wait end).
const loadWaitPoll = 20 * time.Millisecond
