package controller

import (
	"errors"
	"fmt"
	"sort"
)

// ErrReplicationFactor: more replicas were asked for than there are usable
// brokers (INVALID_REPLICATION_FACTOR).
var ErrReplicationFactor = errors.New("replication factor larger than the number of available brokers")

// PlacementBroker is a broker that replicas may be placed on.
type PlacementBroker struct {
	ID   int32
	Rack string
}

// Placement parameterizes PlaceReplicas. Start and Shift are the random
// choices of Kafka's placement (where the first leader goes, and how far
// followers are shifted from it); callers draw them once per topic.
type Placement struct {
	Brokers []PlacementBroker
	// FirstPartition is the id of the first partition to place (0 for a new
	// topic, the current count for CreatePartitions).
	FirstPartition    int32
	NumPartitions     int32
	ReplicationFactor int16
	Start             int
	Shift             int
}

// PlaceReplicas assigns replicas to partitions round robin across brokers:
// partition p's first replica (its preferred leader) is broker (p+Start) mod
// n, followers follow at a shift that grows every n partitions, so that
// leaders and followers both spread evenly. When every broker has a rack the
// broker list is first interleaved by rack and each partition takes one
// replica per rack before it takes a second one from any rack. Brokers
// without racks among brokers with racks make the placement rack-unaware.
func PlaceReplicas(pl Placement) ([][]int32, error) {
	n := len(pl.Brokers)
	rf := int(pl.ReplicationFactor)
	if rf <= 0 {
		return nil, fmt.Errorf("replication factor %d: must be at least 1", rf)
	}
	if pl.NumPartitions < 0 {
		return nil, fmt.Errorf("partition count %d: must not be negative", pl.NumPartitions)
	}
	if rf > n {
		return nil, fmt.Errorf("%w: replication factor %d, %d broker(s) available", ErrReplicationFactor, rf, n)
	}
	brokers := append([]PlacementBroker(nil), pl.Brokers...)
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].ID < brokers[j].ID })
	racks := rackCount(brokers)
	if racks > 0 {
		brokers = interleaveByRack(brokers)
	}
	start := mod(pl.Start, n)
	shift := mod(pl.Shift, n)
	out := make([][]int32, 0, pl.NumPartitions)
	for i := int32(0); i < pl.NumPartitions; i++ {
		p := int(pl.FirstPartition + i)
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + start) % n
		replicas := make([]int32, 0, rf)
		replicas = append(replicas, brokers[first].ID)
		if racks == 0 {
			for j := 0; j < rf-1; j++ {
				replicas = append(replicas, brokers[followerIndex(first, shift, j, n)].ID)
			}
		} else {
			replicas = placeRackAware(brokers, replicas, first, shift, rf, racks)
		}
		out = append(out, replicas)
	}
	return out, nil
}

func mod(a, n int) int {
	if n == 0 {
		return 0
	}
	return ((a % n) + n) % n
}

// followerIndex is the j-th follower of the replica at first: never first
// itself, spread by shift.
func followerIndex(first, shift, j, n int) int {
	if n == 1 {
		return first
	}
	return (first + 1 + (shift+j)%(n-1)) % n
}

// rackCount returns the number of distinct racks, or 0 when any broker has
// none.
func rackCount(brokers []PlacementBroker) int {
	seen := map[string]bool{}
	for _, b := range brokers {
		if b.Rack == "" {
			return 0
		}
		seen[b.Rack] = true
	}
	return len(seen)
}

// interleaveByRack orders brokers as rack1's first, rack2's first, ...,
// rack1's second, ... with racks and brokers in sorted order.
func interleaveByRack(brokers []PlacementBroker) []PlacementBroker {
	byRack := map[string][]PlacementBroker{}
	var racks []string
	for _, b := range brokers {
		if _, ok := byRack[b.Rack]; !ok {
			racks = append(racks, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	sort.Strings(racks)
	out := make([]PlacementBroker, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// placeRackAware adds followers to replicas (which holds the leader) walking
// the shifted order and skipping brokers whose rack already has a replica
// until every rack has one.
func placeRackAware(brokers []PlacementBroker, replicas []int32, first, shift, rf, racks int) []int32 {
	n := len(brokers)
	usedRack := map[string]bool{brokers[first].Rack: true}
	used := map[int32]bool{brokers[first].ID: true}
	for k := 0; len(replicas) < rf && k < 2*n; k++ {
		b := brokers[followerIndex(first, shift, k, n)]
		if used[b.ID] {
			continue
		}
		if usedRack[b.Rack] && len(usedRack) < racks {
			continue
		}
		replicas = append(replicas, b.ID)
		used[b.ID] = true
		usedRack[b.Rack] = true
	}
	// The shifted walk visits n-1 brokers; fill from the plain order if it
	// fell short (only when racks are very uneven).
	for i := 0; len(replicas) < rf && i < n; i++ {
		b := brokers[(first+i)%n]
		if !used[b.ID] {
			replicas = append(replicas, b.ID)
			used[b.ID] = true
		}
	}
	return replicas
}
