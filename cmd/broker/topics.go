package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/quorum"
)

// runTopics is `broker topics`, kafka-topics.sh's verbs over the Kafka
// protocol: --list, --describe, --create and --delete. Internal topics are
// included, and __cluster_metadata, which Metadata never names, is described
// from DescribeQuorum (its one partition, led by the quorum leader, with the
// voters as replicas), as seed 000 expects operators to see it.
func runTopics(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("topics", "topics --bootstrap-server HOST:PORT (--list | --describe | --create | --delete) [--topic T] [flags]", stderr)
	var o adminOpts
	o.register(fs)
	var list, describe, create, del, ifNotExists, excludeInternal, underReplicated, unavailable bool
	var topic string
	partitions, rf := "", ""
	configs := overrides{}
	fs.boolVar(&list, "list the topics, one per line (internal ones included unless --exclude-internal)", "list")
	fs.boolVar(&describe, "describe the topics (or --topic): partition count, replication factor, non-default configs, and each partition's leader, replicas and ISR", "describe")
	fs.boolVar(&create, "create --topic with --partitions and --replication-factor (broker defaults when absent) and --config overrides", "create")
	fs.boolVar(&del, "delete --topic", "delete")
	fs.stringVar(&topic, "TOPIC", "the topic (required by --create and --delete; filters --list and --describe)", "topic")
	fs.stringVar(&partitions, "N", "partitions of the new topic (default: the broker's num.partitions)", "partitions")
	fs.stringVar(&rf, "N", "replication factor of the new topic (default: the broker's default.replication.factor)", "replication-factor")
	fs.varFlag(configs, "KEY=VALUE", "a topic config of the new topic (repeatable)", "config")
	fs.boolVar(&ifNotExists, "with --create: succeed when the topic exists", "if-not-exists")
	fs.boolVar(&excludeInternal, "with --list or --describe: leave out internal topics", "exclude-internal")
	fs.boolVar(&underReplicated, "with --describe: only partitions whose ISR is smaller than their replicas", "under-replicated-partitions")
	fs.boolVar(&unavailable, "with --describe: only partitions without a leader", "unavailable-partitions")
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	if n := countTrue(list, describe, create, del); n != 1 {
		fmt.Fprintln(stderr, "broker topics: give exactly one of --list, --describe, --create, --delete")
		return exitUsage
	}
	if (create || del) && topic == "" {
		fmt.Fprintln(stderr, "broker topics: --create and --delete need --topic")
		return exitUsage
	}
	var np int32 = -1
	var nrf int16 = -1
	if partitions != "" {
		if _, err := fmt.Sscan(partitions, &np); err != nil || np <= 0 {
			fmt.Fprintf(stderr, "broker topics: --partitions %q: want a positive number\n", partitions)
			return exitUsage
		}
	}
	if rf != "" {
		if _, err := fmt.Sscan(rf, &nrf); err != nil || nrf <= 0 {
			fmt.Fprintf(stderr, "broker topics: --replication-factor %q: want a positive number\n", rf)
			return exitUsage
		}
	}
	s, code := o.connect("topics", stderr)
	if code >= 0 {
		return code
	}
	defer s.Close()
	switch {
	case create:
		cfg := map[string]*string{}
		for k, v := range configs {
			cfg[k] = &v
		}
		resp, err := s.adm.CreateTopic(s.ctx, np, nrf, cfg, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			if ifNotExists && errors.Is(err, kerr.TopicAlreadyExists) {
				return exitOK
			}
			fmt.Fprintf(stderr, "broker topics: creating %s: %v\n", topic, oneLine(err))
			return exitError
		}
		fmt.Fprintf(stdout, "Created topic %s.\n", topic)
		return exitOK
	case del:
		resp, err := s.adm.DeleteTopics(s.ctx, topic)
		if err == nil {
			if r, ok := resp[topic]; ok {
				err = r.Err
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "broker topics: deleting %s: %v\n", topic, oneLine(err))
			return exitError
		}
		return exitOK
	}
	var only []string
	if topic != "" {
		only = []string{topic}
	}
	details, err := s.adm.ListTopicsWithInternal(s.ctx, only...)
	if err != nil {
		fmt.Fprintf(stderr, "broker topics: %v\n", oneLine(err))
		return exitError
	}
	var views []topicView
	for _, name := range details.Names() {
		d := details[name]
		if d.Err != nil {
			if name == quorum.MetadataTopic {
				continue // described from DescribeQuorum below
			}
			if topic != "" {
				fmt.Fprintf(stderr, "broker topics: topic %s: %v\n", name, oneLine(d.Err))
				return exitError
			}
			continue
		}
		if excludeInternal && d.IsInternal {
			continue
		}
		views = append(views, fromTopicDetail(d))
	}
	if !excludeInternal && (topic == "" || topic == quorum.MetadataTopic) {
		if v, ok := metadataTopicView(s); ok {
			views = append(views, v)
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].name < views[j].name })
	if topic != "" && len(views) == 0 {
		fmt.Fprintf(stderr, "broker topics: topic %s does not exist\n", topic)
		return exitError
	}
	if list {
		for _, v := range views {
			fmt.Fprintln(stdout, v.name)
		}
		return exitOK
	}
	names := make([]string, 0, len(views))
	for _, v := range views {
		if v.name != quorum.MetadataTopic {
			names = append(names, v.name)
		}
	}
	if len(names) > 0 {
		if rcs, err := s.adm.DescribeTopicConfigs(s.ctx, names...); err == nil {
			byName := map[string]kadm.ResourceConfig{}
			for _, rc := range rcs {
				byName[rc.Name] = rc
			}
			for i := range views {
				views[i].configs = nonDefaultConfigs(byName[views[i].name])
			}
		}
	}
	printTopics(stdout, views, underReplicated, unavailable)
	return exitOK
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// topicView is what --describe prints of a topic.
type topicView struct {
	name       string
	id         string
	partitions []partitionView
	rf         int
	configs    string
}

type partitionView struct {
	partition int32
	leader    int32
	replicas  []int32
	isr       []int32
	offline   []int32
	err       error
}

func fromTopicDetail(d kadm.TopicDetail) topicView {
	v := topicView{name: d.Topic, id: base64.RawURLEncoding.EncodeToString(d.ID[:]), rf: d.Partitions.NumReplicas()}
	for _, p := range d.Partitions.Sorted() {
		v.partitions = append(v.partitions, partitionView{partition: p.Partition, leader: p.Leader, replicas: p.Replicas, isr: p.ISR, offline: p.OfflineReplicas, err: p.Err})
	}
	return v
}

// metadataTopicView describes __cluster_metadata from DescribeQuorum.
func metadataTopicView(s *adminSession) (topicView, bool) {
	resp, err := describeQuorumRequest().RequestWith(s.ctx, s.kgo)
	if err != nil {
		return topicView{}, false
	}
	pp, err := quorumPartition(resp)
	if err != nil {
		return topicView{}, false
	}
	p := *pp
	pv := partitionView{partition: p.Partition, leader: p.LeaderID}
	var leaderEnd int64 = -1
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			leaderEnd = v.LogEndOffset
		}
	}
	for _, v := range p.CurrentVoters {
		pv.replicas = append(pv.replicas, v.ReplicaID)
		if v.ReplicaID == p.LeaderID || (leaderEnd >= 0 && v.LogEndOffset >= p.HighWatermark) {
			pv.isr = append(pv.isr, v.ReplicaID)
		}
	}
	return topicView{name: quorum.MetadataTopic, id: "(the KRaft metadata log)", partitions: []partitionView{pv}, rf: len(pv.replicas), configs: ""}, true
}

// nonDefaultConfigs lists the configs set on the topic itself, as
// kafka-topics.sh prints them.
func nonDefaultConfigs(rc kadm.ResourceConfig) string {
	var out []string
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			out = append(out, c.Key+"="+*c.Value)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// printTopics prints kafka-topics.sh --describe's layout: a topic line, then
// a tab-indented line per partition.
func printTopics(w io.Writer, views []topicView, underReplicated, unavailable bool) {
	for _, v := range views {
		var rows []partitionView
		for _, p := range v.partitions {
			if underReplicated && len(p.isr) >= len(p.replicas) {
				continue
			}
			if unavailable && p.leader >= 0 {
				continue
			}
			rows = append(rows, p)
		}
		if (underReplicated || unavailable) && len(rows) == 0 {
			continue
		}
		if !underReplicated && !unavailable {
			fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n", v.name, v.id, len(v.partitions), v.rf, v.configs)
		}
		for _, p := range rows {
			leader := fmt.Sprint(p.leader)
			if p.leader < 0 {
				leader = "none"
			}
			line := fmt.Sprintf("\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", v.name, p.partition, leader, joinInt32s(p.replicas), joinInt32s(p.isr))
			if len(p.offline) > 0 {
				line += "\tOffline: " + joinInt32s(p.offline)
			}
			if p.err != nil {
				line += "\tError: " + oneLine(p.err)
			}
			fmt.Fprintln(w, line)
		}
	}
}
