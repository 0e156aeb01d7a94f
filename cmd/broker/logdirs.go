package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// runLogDirs is `broker log-dirs --describe`, kafka-log-dirs.sh: every
// broker's log dirs (DescribeLogDirs) with the size and offset lag of each
// partition, and the error of an offline dir, as Kafka's JSON.
func runLogDirs(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("log-dirs", "log-dirs --bootstrap-server HOST:PORT --describe [--topic-list T1,T2] [--broker-list 1,2] [flags]", stderr)
	var o adminOpts
	o.register(fs)
	var describe bool
	var topics, brokers string
	fs.boolVar(&describe, "describe the log dirs (required, as in Kafka's tool)", "describe")
	fs.stringVar(&topics, "T1,T2", "only these topics (default all)", "topic-list")
	fs.stringVar(&brokers, "ID1,ID2", "only these brokers (default all)", "broker-list")
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	if !describe {
		fmt.Fprintln(stderr, "broker log-dirs: give --describe")
		return exitUsage
	}
	var wantBrokers []int32
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		id, err := strconv.ParseInt(b, 10, 32)
		if err != nil {
			fmt.Fprintf(stderr, "broker log-dirs: --broker-list %q: want broker ids such as 1,2\n", brokers)
			return exitUsage
		}
		wantBrokers = append(wantBrokers, int32(id))
	}
	s, code := o.connect("log-dirs", stderr)
	if code >= 0 {
		return code
	}
	defer s.Close()
	var set kadm.TopicsSet
	if t := strings.TrimSpace(topics); t != "" {
		details, err := s.adm.ListTopicsWithInternal(s.ctx, strings.Split(t, ",")...)
		if err != nil {
			fmt.Fprintf(stderr, "broker log-dirs: %v\n", oneLine(err))
			return exitError
		}
		set = details.TopicsSet()
	}
	all, err := s.adm.DescribeAllLogDirs(s.ctx, set)
	if err != nil {
		fmt.Fprintf(stderr, "broker log-dirs: %v\n", oneLine(err))
		return exitError
	}
	out := logDirsJSON(all, wantBrokers)
	fmt.Fprintln(stdout, "Querying brokers for log directories information")
	ids := make([]string, len(out.Brokers))
	for i, b := range out.Brokers {
		ids[i] = strconv.Itoa(int(b.Broker))
	}
	fmt.Fprintf(stdout, "Received log directory information from brokers %s\n", strings.Join(ids, ","))
	enc, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(enc))
	return exitOK
}

type logDirsOut struct {
	Brokers []logDirsBroker `json:"brokers"`
	Version int             `json:"version"`
}

type logDirsBroker struct {
	Broker  int32        `json:"broker"`
	LogDirs []logDirJSON `json:"logDirs"`
}

type logDirJSON struct {
	Partitions []logDirPartition `json:"partitions"`
	Error      *string           `json:"error"`
	LogDir     string            `json:"logDir"`
}

type logDirPartition struct {
	Partition string `json:"partition"`
	Size      int64  `json:"size"`
	OffsetLag int64  `json:"offsetLag"`
	IsFuture  bool   `json:"isFuture"`
}

// logDirsJSON shapes kadm's answer as kafka-log-dirs.sh prints it, sorted
// by broker, dir and partition; an offline dir carries its error's name.
func logDirsJSON(all kadm.DescribedAllLogDirs, only []int32) logDirsOut {
	out := logDirsOut{Version: 1}
	keep := func(id int32) bool {
		if len(only) == 0 {
			return true
		}
		for _, o := range only {
			if o == id {
				return true
			}
		}
		return false
	}
	for id, dirs := range all {
		if !keep(id) {
			continue
		}
		b := logDirsBroker{Broker: id, LogDirs: []logDirJSON{}}
		for _, d := range dirs.Sorted() {
			j := logDirJSON{LogDir: d.Dir, Partitions: []logDirPartition{}}
			if d.Err != nil {
				msg := oneLine(d.Err)
				j.Error = &msg
			}
			for _, p := range d.Topics.Sorted() {
				j.Partitions = append(j.Partitions, logDirPartition{Partition: fmt.Sprintf("%s-%d", p.Topic, p.Partition), Size: p.Size, OffsetLag: p.OffsetLag, IsFuture: p.IsFuture})
			}
			b.LogDirs = append(b.LogDirs, j)
		}
		out.Brokers = append(out.Brokers, b)
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].Broker < out.Brokers[j].Broker })
	return out
}
