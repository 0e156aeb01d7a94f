package raftq

import (
	"maps"
	"slices"

	"github.com/faultline/faultline/broker/metadata"
)

// imageDelta returns records that, applied to from, give to (up to Offset
// and ControllerID, which records do not carry). With from the empty image
// they are the snapshot of to. They are ordered so that every record
// applies: topics removed before topics created under the same name,
// topics before their partitions and configs.
//
// Brokers present in from and missing from to are left alone: the metadata
// log has no record that unregisters a broker, so an image never loses one.
func imageDelta(from, to *metadata.Image) []metadata.Record {
	var out []metadata.Record
	for _, id := range slices.Sorted(maps.Keys(to.Brokers)) {
		b := to.Brokers[id]
		if old, ok := from.Brokers[id]; ok && sameBroker(old, b) {
			continue
		}
		r := &metadata.RegisterBrokerRecord{
			BrokerID:             b.ID,
			IncarnationID:        b.IncarnationID,
			BrokerEpoch:          b.Epoch,
			Endpoints:            slices.Clone(b.Endpoints),
			Fenced:               b.Fenced,
			InControlledShutdown: b.InControlledShutdown,
		}
		if b.Rack != "" {
			rack := b.Rack
			r.Rack = &rack
		}
		out = append(out, r)
	}

	// Topics of from that do not survive as the same topic in to.
	kept := map[metadata.Uuid]bool{}
	for _, name := range from.TopicNames() {
		t := from.Topics[name]
		nt := to.TopicsByID[t.ID]
		if nt != nil && nt.Name == t.Name && len(nt.Partitions) >= len(t.Partitions) {
			kept[t.ID] = true
			continue
		}
		out = append(out, &metadata.RemoveTopicRecord{TopicID: t.ID})
	}
	for _, name := range to.TopicNames() {
		t := to.Topics[name]
		var old *metadata.Topic
		if kept[t.ID] {
			old = from.TopicsByID[t.ID]
		} else {
			out = append(out, &metadata.TopicRecord{Name: t.Name, TopicID: t.ID})
		}
		for i, p := range t.Partitions {
			if old != nil && i < len(old.Partitions) && samePartition(old.Partitions[i], p) {
				continue
			}
			out = append(out, &metadata.PartitionRecord{
				PartitionID:    int32(i),
				TopicID:        t.ID,
				Replicas:       slices.Clone(p.Replicas),
				ISR:            slices.Clone(p.ISR),
				Leader:         p.Leader,
				LeaderEpoch:    p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch,
			})
		}
		var oldConfigs map[string]string
		if old != nil {
			oldConfigs = old.Configs
		}
		out = appendConfigDelta(out, metadata.ConfigResourceTopic, t.Name, oldConfigs, t.Configs)
	}

	resources := map[string]bool{}
	for r := range from.BrokerConfigs {
		resources[r] = true
	}
	for r := range to.BrokerConfigs {
		resources[r] = true
	}
	for _, r := range slices.Sorted(maps.Keys(resources)) {
		out = appendConfigDelta(out, metadata.ConfigResourceBroker, r, from.BrokerConfigs[r], to.BrokerConfigs[r])
	}

	if to.NextProducerID > from.NextProducerID {
		out = append(out, &metadata.ProducerIDsRecord{BrokerID: -1, BrokerEpoch: -1, NextProducerID: to.NextProducerID})
	}
	return out
}

// appendConfigDelta appends the ConfigRecords that turn old into cur.
func appendConfigDelta(out []metadata.Record, typ int8, resource string, old, cur map[string]string) []metadata.Record {
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[k]; !ok {
			out = append(out, &metadata.ConfigRecord{ResourceType: typ, ResourceName: resource, Name: k})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if ov, ok := old[k]; ok && ov == cur[k] {
			continue
		}
		v := cur[k]
		out = append(out, &metadata.ConfigRecord{ResourceType: typ, ResourceName: resource, Name: k, Value: &v})
	}
	return out
}

func sameBroker(a, b metadata.Broker) bool {
	return a.ID == b.ID && a.IncarnationID == b.IncarnationID && a.Epoch == b.Epoch && a.Host == b.Host &&
		a.Port == b.Port && a.Rack == b.Rack && a.Fenced == b.Fenced &&
		a.InControlledShutdown == b.InControlledShutdown && slices.Equal(a.Endpoints, b.Endpoints)
}

func samePartition(a, b metadata.Partition) bool {
	return a.Partition == b.Partition && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		a.PartitionEpoch == b.PartitionEpoch && slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR)
}
