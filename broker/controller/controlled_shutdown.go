package controller

import (
	"github.com/faultline/faultline/broker/metadata"
)

// beginControlledShutdown is the record that puts a live broker in
// controlled shutdown (Kafka's BrokerRegistrationChangeRecord with
// InControlledShutdown): it no longer counts as live, so the heartbeat's
// decision then moves each of its leaderships to another live ISR member,
// or to no leader when there is none (a single node's partitions stay
// leaderless until it is back).
func beginControlledShutdown(b metadata.Broker) []metadata.Record {
	if b.InControlledShutdown || b.Fenced {
		return nil
	}
	return []metadata.Record{&metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: 1}}
}

// mayShutDown reports whether a broker in controlled shutdown may stop: it
// leads no partition any more.
func mayShutDown(im *metadata.Image, id int32) bool { return leaderCount(im, id) == 0 }

func leaderCount(im *metadata.Image, id int32) int {
	n := 0
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if p.Leader == id {
				n++
			}
		}
	}
	return n
}
