package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/quorum"
)

// runQuorum is `broker quorum describe --status|--replication -c FILE`, as
// kafka-metadata-quorum.sh describe: it asks the controllers named by the
// node's configuration (controller.quorum.voters or
// controller.quorum.bootstrap.servers) for the quorum's state with
// DescribeQuorum, sent to the quorum leader.
func runQuorum(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "describe" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
			fmt.Fprintln(stdout, "Usage: broker quorum describe (--status | --replication) -c server.properties")
			return exitOK
		}
		fmt.Fprintln(stderr, "Usage: broker quorum describe (--status | --replication) -c server.properties")
		return exitUsage
	}
	fs := flagSet("quorum describe", "quorum describe (--status | --replication) -c server.properties [--timeout DURATION]", stderr)
	var configPath string
	var status, replication bool
	timeout := "10s"
	fs.stringVar(&configPath, "FILE", "a node's server.properties: its controller.quorum.voters (or controller.quorum.bootstrap.servers) name the controllers to ask (required)", "c", "config")
	fs.boolVar(&status, "print the quorum's leader, epoch, high watermark, follower lag, voters and observers", "status")
	fs.boolVar(&replication, "print each voter's and observer's log end offset, lag and last fetch", "replication")
	fs.stringVar(&timeout, "DURATION", "how long to look for the quorum leader (default 10s)", "timeout")
	if code := parse(fs, args[1:], stdout); code >= 0 {
		return code
	}
	if configPath == "" || status == replication {
		fmt.Fprintln(stderr, "broker quorum describe: give -c server.properties and exactly one of --status or --replication")
		return exitUsage
	}
	wait, err := time.ParseDuration(timeout)
	if err != nil || wait <= 0 {
		fmt.Fprintf(stderr, "broker quorum describe: --timeout %q: want a positive duration such as 10s\n", timeout)
		return exitUsage
	}
	cfg, _, err := loadConfig(configPath, nil)
	if err != nil {
		reportConfigError(stderr, "quorum describe", err)
		return exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p, err := describeQuorum(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "broker quorum describe: %v\n", err)
		return exitError
	}
	if status {
		printQuorumStatus(stdout, p, time.Now())
	} else {
		printQuorumReplication(stdout, p, time.Now())
	}
	return exitOK
}

// describeQuorum sends DescribeQuorum until the quorum leader answers.
func describeQuorum(ctx context.Context, cfg *config.Config) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	voters := map[int32]string{}
	for _, v := range cfg.ControllerQuorumVoters {
		voters[v.ID] = net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port)))
	}
	var bootstrap []string
	for _, b := range cfg.ControllerQuorumBootstrapServers {
		bootstrap = append(bootstrap, b.String())
	}
	tr, err := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{Voters: voters, Bootstrap: bootstrap, ClientID: "broker-quorum-describe", DialTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorum.MetadataTopic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = quorum.MetadataPartition.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := lifecycle.SendToActive(ctx, tr, req)
	if err != nil {
		return nil, fmt.Errorf("no controller of %s answered as quorum leader: %w", strings.Join(addrs(voters, bootstrap), ","), err)
	}
	resp, ok := raw.(*kmsg.DescribeQuorumResponse)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", raw)
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("DescribeQuorum: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("DescribeQuorum %s-%d: %w", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("DescribeQuorum: the answer does not name %s-0", quorum.MetadataTopic)
}

func addrs(voters map[int32]string, bootstrap []string) []string {
	var out []string
	for _, a := range voters {
		out = append(out, a)
	}
	sort.Strings(out)
	return append(out, bootstrap...)
}

// leaderState returns the leader's own replica state (its log end offset).
func leaderState(p *kmsg.DescribeQuorumResponseTopicPartition) (kmsg.DescribeQuorumResponseTopicPartitionReplicaState, bool) {
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == p.LeaderID {
			return v, true
		}
	}
	return kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}, false
}

func ids(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = strconv.Itoa(int(r.ReplicaID))
	}
	return "[" + strings.Join(out, ",") + "]"
}

// printQuorumStatus prints the lines of kafka-metadata-quorum.sh describe
// --status.
func printQuorumStatus(w io.Writer, p *kmsg.DescribeQuorumResponseTopicPartition, now time.Time) {
	var maxLag, maxLagTimeMs int64
	if leader, ok := leaderState(p); ok {
		for _, v := range p.CurrentVoters {
			maxLag = max(maxLag, leader.LogEndOffset-v.LogEndOffset)
			if v.LastCaughtUpTimestamp >= 0 && v.ReplicaID != p.LeaderID {
				maxLagTimeMs = max(maxLagTimeMs, now.UnixMilli()-v.LastCaughtUpTimestamp)
			}
		}
	}
	fmt.Fprintf(w, "LeaderId:               %d\n", p.LeaderID)
	fmt.Fprintf(w, "LeaderEpoch:            %d\n", p.LeaderEpoch)
	fmt.Fprintf(w, "HighWatermark:          %d\n", p.HighWatermark)
	fmt.Fprintf(w, "MaxFollowerLag:         %d\n", maxLag)
	fmt.Fprintf(w, "MaxFollowerLagTimeMs:   %d\n", maxLagTimeMs)
	fmt.Fprintf(w, "CurrentVoters:          %s\n", ids(p.CurrentVoters))
	fmt.Fprintf(w, "CurrentObservers:       %s\n", ids(p.Observers))
}

// printQuorumReplication prints the table of kafka-metadata-quorum.sh
// describe --replication.
func printQuorumReplication(w io.Writer, p *kmsg.DescribeQuorumResponseTopicPartition, now time.Time) {
	leader, _ := leaderState(p)
	fmt.Fprintf(w, "%-8s %-14s %-8s %-22s %-22s %s\n", "NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
	row := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, status string) {
		ago := func(ts int64) string {
			if ts < 0 {
				return "-1"
			}
			return fmt.Sprintf("%d ms ago", max(now.UnixMilli()-ts, 0))
		}
		fmt.Fprintf(w, "%-8d %-14d %-8d %-22s %-22s %s\n", r.ReplicaID, r.LogEndOffset, max(leader.LogEndOffset-r.LogEndOffset, 0), ago(r.LastFetchTimestamp), ago(r.LastCaughtUpTimestamp), status)
	}
	for _, v := range p.CurrentVoters {
		status := "Follower"
		if v.ReplicaID == p.LeaderID {
			status = "Leader"
		}
		row(v, status)
	}
	for _, o := range p.Observers {
		row(o, "Observer")
	}
}
