package group

import (
	"bytes"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

// String returns the state's name as DescribeGroups and ListGroups report it.
func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	default:
		return "Dead"
	}
}

type member struct {
	id                 string
	instanceID         *string
	clientID           string
	clientHost         string
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
	protocolType       string
	protocols          []kmsg.JoinGroupRequestProtocol
	assignment         []byte

	// joinWait and syncWait are set while a JoinGroup or SyncGroup of this
	// member is parked; each receives exactly one response.
	joinWait chan *kmsg.JoinGroupResponse
	syncWait chan *kmsg.SyncGroupResponse

	sessionTimer Timer
	sessionSeq   uint64
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Metadata, b[i].Metadata) {
			return false
		}
	}
	return true
}

func (m *member) answerJoin(r *kmsg.JoinGroupResponse) {
	if m.joinWait != nil {
		m.joinWait <- r
		m.joinWait = nil
	}
}

func (m *member) answerSync(r *kmsg.SyncGroupResponse) {
	if m.syncWait != nil {
		m.syncWait <- r
		m.syncWait = nil
	}
}

type pendingMember struct {
	timer Timer
}

type group struct {
	id           string
	partition    int32
	state        groupState
	stateTime    time.Time
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	static       map[string]string // group.instance.id -> member id
	pending      map[string]*pendingMember

	// newMemberAdded tells the initial rebalance delay to wait once more.
	newMemberAdded bool
	// initialDelay is true while the first rebalance of an empty group is
	// being delayed; the join then does not complete early.
	initialDelay bool
	// rebalanceRemainingMs is what is left of the rebalance timeout while
	// the initial delay extends itself.
	rebalanceRemainingMs int64
	joinTimer            Timer
	joinSeq              uint64
	// syncPending holds the members of this generation that have not sent
	// SyncGroup yet; they are removed when the sync timer fires.
	syncPending map[string]bool
	syncTimer   Timer
	syncSeq     uint64
	// assignmentPending is true while the leader's assignment is being
	// written to the log.
	assignmentPending bool

	offsets map[topicPartition]committedOffset
}

func newGroup(id string, partition int32, now time.Time) *group {
	return &group{
		id:          id,
		partition:   partition,
		state:       stateEmpty,
		stateTime:   now,
		members:     map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]*pendingMember{},
		syncPending: map[string]bool{},
		offsets:     map[topicPartition]committedOffset{},
	}
}

func (g *group) transition(s groupState, now time.Time) {
	g.state = s
	g.stateTime = now
}

// sortedMembers returns the members ordered by id so that responses and
// records do not depend on map order.
func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// supportsProtocols tells whether a member offering protocolType and
// protocols may join: an empty group takes anything well formed, otherwise
// the type must match and one protocol must be supported by every member.
func (g *group) supportsProtocols(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		all := true
		for _, m := range g.members {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol every member supports that most members
// prefer (each votes for its first supported candidate); ties go to the
// protocol listed first by the member with the smallest id.
func (g *group) selectProtocol() string {
	ms := g.sortedMembers()
	if len(ms) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range ms[0].protocols {
		all := true
		for _, m := range ms[1:] {
			if !m.supports(p.Name) {
				all = false
				break
			}
		}
		if all {
			candidates = append(candidates, p.Name)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := candidates[0]
	for _, c := range candidates[1:] {
		if votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// rebalanceTimeoutMs is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeoutMs() int64 {
	var t int64
	for _, m := range g.members {
		t = max(t, int64(m.rebalanceTimeoutMs))
	}
	return t
}

// allJoined tells whether every member has rejoined and no member that was
// handed an id (MEMBER_ID_REQUIRED) is still expected.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

// checkMember finds the member a request names, fencing a static member
// whose instance id now belongs to another member id.
func (g *group) checkMember(memberID string, instanceID *string) (*member, int16) {
	if instanceID != nil {
		if owner, ok := g.static[*instanceID]; ok && owner != memberID {
			return nil, codeFencedInstanceID
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, codeUnknownMemberID
	}
	if instanceID != nil && (m.instanceID == nil || *m.instanceID != *instanceID) {
		return nil, codeFencedInstanceID
	}
	return m, codeNone
}

// metadataValue is the group as Kafka persists it.
func (g *group) metadataValue(now time.Time) *kmsg.GroupMetadataValue {
	v := new(kmsg.GroupMetadataValue)
	v.Default()
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = now.UnixMilli()
	for _, m := range g.sortedMembers() {
		vm := kmsg.NewGroupMetadataValueMember()
		vm.MemberID = m.id
		vm.InstanceID = m.instanceID
		vm.ClientID = m.clientID
		vm.ClientHost = m.clientHost
		vm.RebalanceTimeoutMillis = m.rebalanceTimeoutMs
		vm.SessionTimeoutMillis = m.sessionTimeoutMs
		vm.Subscription = m.metadataFor(g.protocol)
		vm.Assignment = m.assignment
		v.Members = append(v.Members, vm)
	}
	return v
}
