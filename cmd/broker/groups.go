package main

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
)

// runConsumerGroups is `broker consumer-groups`, kafka-consumer-groups.sh's
// --list and --describe --group G: each partition's committed offset, log
// end offset and lag, with the member that consumes it.
func runConsumerGroups(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("consumer-groups", "consumer-groups --bootstrap-server HOST:PORT (--list | --describe (--group G | --all-groups)) [flags]", stderr)
	var o adminOpts
	o.register(fs)
	var list, describe, all, state, members bool
	var group string
	fs.boolVar(&list, "list the groups, one per line", "list")
	fs.boolVar(&describe, "describe --group (or --all-groups): per partition the committed offset, log end offset, lag and consumer", "describe")
	fs.stringVar(&group, "GROUP", "the group to describe", "group")
	fs.boolVar(&all, "with --describe: every group", "all-groups")
	fs.boolVar(&state, "with --describe: the group's coordinator, assignor, state and member count instead of offsets", "state")
	fs.boolVar(&members, "with --describe: the group's members instead of offsets", "members")
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	if countTrue(list, describe) != 1 {
		fmt.Fprintln(stderr, "broker consumer-groups: give exactly one of --list, --describe")
		return exitUsage
	}
	if describe && (group == "") == !all {
		fmt.Fprintln(stderr, "broker consumer-groups: --describe needs --group G or --all-groups")
		return exitUsage
	}
	s, code := o.connect("consumer-groups", stderr)
	if code >= 0 {
		return code
	}
	defer s.Close()
	if list || all {
		listed, err := s.adm.ListGroups(s.ctx)
		if err != nil {
			fmt.Fprintf(stderr, "broker consumer-groups: %v\n", oneLine(err))
			return exitError
		}
		if list {
			for _, g := range listed.Groups() {
				fmt.Fprintln(stdout, g)
			}
			return exitOK
		}
		groups := listed.Groups()
		if len(groups) == 0 {
			return exitOK
		}
		return describeGroups(s, stdout, stderr, groups, state, members)
	}
	return describeGroups(s, stdout, stderr, []string{group}, state, members)
}

func describeGroups(s *adminSession, stdout, stderr io.Writer, groups []string, state, members bool) int {
	lags, err := s.adm.Lag(s.ctx, groups...)
	if err != nil {
		fmt.Fprintf(stderr, "broker consumer-groups: %v\n", oneLine(err))
		return exitError
	}
	sort.Strings(groups)
	code := exitOK
	for _, g := range groups {
		l, ok := lags[g]
		if !ok {
			fmt.Fprintf(stderr, "broker consumer-groups: group %s: no answer\n", g)
			code = exitError
			continue
		}
		if err := l.Error(); err != nil {
			fmt.Fprintf(stderr, "broker consumer-groups: group %s: %v\n", g, oneLine(err))
			code = exitError
			continue
		}
		fmt.Fprintln(stdout)
		switch {
		case state:
			printGroupState(stdout, l)
		case members:
			printGroupMembers(stdout, l)
		default:
			printGroupOffsets(stdout, l)
		}
	}
	return code
}

// printGroupOffsets prints kafka-consumer-groups.sh --describe's table.
func printGroupOffsets(w io.Writer, l kadm.DescribedGroupLag) {
	if l.State == "Empty" || l.State == "Dead" {
		fmt.Fprintf(w, "Consumer group '%s' has no active members.\n\n", l.Group)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
	for _, m := range l.Lag.Sorted() {
		cur, lag := "-", "-"
		if m.Commit.At >= 0 && m.Err == nil {
			cur, lag = fmt.Sprint(m.Commit.At), fmt.Sprint(m.Lag)
		}
		end := "-"
		if m.End.Err == nil {
			end = fmt.Sprint(m.End.Offset)
		}
		id, host, client := "-", "-", "-"
		if m.Member != nil {
			id, host, client = m.Member.MemberID, m.Member.ClientHost, m.Member.ClientID
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", l.Group, m.Topic, m.Partition, cur, end, lag, id, host, client)
	}
	tw.Flush()
}

func printGroupState(w io.Writer, l kadm.DescribedGroupLag) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR (ID)\tASSIGNMENT-STRATEGY\tSTATE\t#MEMBERS")
	fmt.Fprintf(tw, "%s\t%s:%d (%d)\t%s\t%s\t%d\n", l.Group, l.Coordinator.Host, l.Coordinator.Port, l.Coordinator.NodeID, l.Protocol, l.State, len(l.Members))
	tw.Flush()
}

func printGroupMembers(w io.Writer, l kadm.DescribedGroupLag) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\t#PARTITIONS")
	for _, m := range l.Members {
		n := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				n += len(t.Partitions)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", l.Group, m.MemberID, m.ClientHost, m.ClientID, n)
	}
	tw.Flush()
}
