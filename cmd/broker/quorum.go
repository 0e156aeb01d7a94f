package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/lifecycle"
	"github.com/faultline/faultline/broker/quorum"
)

// runQuorum is `broker quorum describe --status|--replication`, as
// kafka-metadata-quorum.sh describe: DescribeQuorum sent through a broker
// (--bootstrap-server, which forwards it to the quorum leader), straight to
// the controllers (--bootstrap-controller), or to the controllers a node's
// configuration names (-c: its controller.quorum.voters or
// controller.quorum.bootstrap.servers).
func runQuorum(args []string, stdout, stderr io.Writer) int {
	const synopsis = "quorum describe (--status | --replication) (--bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT | -c server.properties) [--timeout DURATION]"
	if len(args) == 0 || args[0] != "describe" {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
			fmt.Fprintln(stdout, "Usage: broker "+synopsis)
			return exitOK
		}
		fmt.Fprintln(stderr, "Usage: broker "+synopsis)
		return exitUsage
	}
	fs := flagSet("quorum describe", synopsis, stderr)
	var configPath, bootServer, bootController, commandConfig string
	var status, replication bool
	timeout := "10s"
	fs.stringVar(&bootServer, "HOST:PORT[,...]", "a broker to send DescribeQuorum to; it forwards the request to the quorum leader", "bootstrap-server")
	fs.stringVar(&bootController, "HOST:PORT[,...]", "a controller to ask directly (its controller listener)", "bootstrap-controller")
	fs.stringVar(&configPath, "FILE", "a node's server.properties: its controller.quorum.voters (or controller.quorum.bootstrap.servers) name the controllers to ask", "c", "config")
	fs.stringVar(&commandConfig, "FILE", "client properties, as Kafka's tool takes them; accepted and ignored (with a warning) until the broker has security", "command-config")
	fs.boolVar(&status, "print the quorum's leader, epoch, high watermark, follower lag, voters and observers", "status")
	fs.boolVar(&replication, "print each voter's and observer's log end offset, lag and last fetch", "replication")
	fs.stringVar(&timeout, "DURATION", "how long to look for the quorum leader (default 10s)", "timeout")
	if code := parse(fs, args[1:], stdout); code >= 0 {
		return code
	}
	if countTrue(configPath != "", bootServer != "", bootController != "") != 1 || status == replication {
		fmt.Fprintln(stderr, "broker quorum describe: give one of --bootstrap-server, --bootstrap-controller or -c, and exactly one of --status or --replication")
		return exitUsage
	}
	wait, err := time.ParseDuration(timeout)
	if err != nil || wait <= 0 {
		fmt.Fprintf(stderr, "broker quorum describe: --timeout %q: want a positive duration such as 10s\n", timeout)
		return exitUsage
	}
	if commandConfig != "" {
		fmt.Fprintf(stderr, "broker quorum describe: warning: --command-config %s ignored: the broker has no security settings yet\n", commandConfig)
	}
	var p *kmsg.DescribeQuorumResponseTopicPartition
	switch {
	case bootServer != "":
		o := adminOpts{bootstrap: bootServer, timeout: timeout}
		s, code := o.connect("quorum describe", stderr)
		if code >= 0 {
			return code
		}
		defer s.Close()
		resp, err := describeQuorumRequest().RequestWith(s.ctx, s.kgo)
		if err != nil {
			fmt.Fprintf(stderr, "broker quorum describe: DescribeQuorum through %s: %v\n", bootServer, oneLine(err))
			return exitError
		}
		if p, err = quorumPartition(resp); err != nil {
			fmt.Fprintf(stderr, "broker quorum describe: %v\n", err)
			return exitError
		}
	default:
		var voters map[int32]string
		var bootstrap []string
		if bootController != "" {
			if bootstrap, err = splitHostPorts(bootController); err != nil {
				fmt.Fprintf(stderr, "broker quorum describe: --bootstrap-controller: %v\n", err)
				return exitUsage
			}
		} else {
			cfg, _, err := loadConfig(configPath, nil)
			if err != nil {
				reportConfigError(stderr, "quorum describe", err)
				return exitError
			}
			voters, bootstrap = controllerAddrs(cfg)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if p, err = describeQuorum(ctx, voters, bootstrap); err != nil {
			fmt.Fprintf(stderr, "broker quorum describe: %v\n", err)
			return exitError
		}
	}
	if status {
		printQuorumStatus(stdout, p, time.Now())
	} else {
		printQuorumReplication(stdout, p, time.Now())
	}
	return exitOK
}

// controllerAddrs are the controllers a node's configuration names.
func controllerAddrs(cfg *config.Config) (map[int32]string, []string) {
	voters := map[int32]string{}
	for _, v := range cfg.ControllerQuorumVoters {
		voters[v.ID] = net.JoinHostPort(v.Host, strconv.Itoa(int(v.Port)))
	}
	var bootstrap []string
	for _, b := range cfg.ControllerQuorumBootstrapServers {
		bootstrap = append(bootstrap, b.String())
	}
	return voters, bootstrap
}

func describeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = quorum.MetadataTopic
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = quorum.MetadataPartition.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// describeQuorum sends DescribeQuorum to the controllers until the quorum
// leader answers. Given only bootstrap controllers (no voter ids), a
// follower's answer names the leader, and the leader's listener when the
// follower knows it (DescribeQuorum v2 Nodes): the leader is asked next.
func describeQuorum(ctx context.Context, voters map[int32]string, bootstrap []string) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	if len(voters) == 0 {
		return describeQuorumVia(ctx, bootstrap)
	}
	tr, err := lifecycle.NewKgoTransport(lifecycle.KgoTransportConfig{Voters: voters, Bootstrap: bootstrap, ClientID: "broker-quorum-describe", DialTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	raw, err := lifecycle.SendToActive(ctx, tr, describeQuorumRequest())
	if err != nil {
		return nil, fmt.Errorf("no controller of %s answered as quorum leader: %w", strings.Join(addrs(voters, bootstrap), ","), err)
	}
	resp, ok := raw.(*kmsg.DescribeQuorumResponse)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", raw)
	}
	return quorumPartition(resp)
}

// describeQuorumVia asks each bootstrap controller once, then the leader a
// follower named.
func describeQuorumVia(ctx context.Context, bootstrap []string) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	asked := map[string]bool{}
	queue := append([]string(nil), bootstrap...)
	var lastErr error
	for len(queue) > 0 && len(asked) < len(bootstrap)+3 {
		addr := queue[0]
		queue = queue[1:]
		if asked[addr] {
			continue
		}
		asked[addr] = true
		resp, err := askController(ctx, addr)
		if err != nil {
			lastErr = fmt.Errorf("controller %s: %w", addr, err)
			continue
		}
		p, err := quorumPartition(resp)
		if err == nil {
			return p, nil
		}
		lastErr = fmt.Errorf("controller %s: %w", addr, err)
		if errors.Is(err, kerr.NotLeaderForPartition) {
			if leader, ok := leaderEndpoint(resp); ok {
				queue = append([]string{leader}, queue...)
			} else {
				lastErr = fmt.Errorf("%w (controller %d leads the quorum; give its controller listener)", lastErr, leaderOf(resp))
			}
		}
	}
	if lastErr == nil {
		lastErr = errors.New("no controller given")
	}
	return nil, fmt.Errorf("no controller of %s answered as quorum leader: %w", strings.Join(bootstrap, ","), lastErr)
}

func askController(ctx context.Context, addr string) (*kmsg.DescribeQuorumResponse, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("broker-quorum-describe"), kgo.DialTimeout(2*time.Second), kgo.RequestRetries(1))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	raw, err := cl.SeedBrokers()[0].Request(ctx, describeQuorumRequest())
	if err != nil {
		return nil, err
	}
	resp, ok := raw.(*kmsg.DescribeQuorumResponse)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", raw)
	}
	return resp, nil
}

// leaderEndpoint is the quorum leader's listener as a follower's answer
// lists it (DescribeQuorum v2 Nodes).
func leaderEndpoint(resp *kmsg.DescribeQuorumResponse) (string, bool) {
	id := leaderOf(resp)
	for _, n := range resp.Nodes {
		if n.NodeID == id && len(n.Listeners) > 0 {
			l := n.Listeners[0]
			return net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))), true
		}
	}
	return "", false
}

func leaderOf(resp *kmsg.DescribeQuorumResponse) int32 {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p.LeaderID
		}
	}
	return -1
}

// quorumPartition is the metadata partition's part of the answer.
func quorumPartition(resp *kmsg.DescribeQuorumResponse) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
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
