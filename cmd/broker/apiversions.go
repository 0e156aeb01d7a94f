package main

import (
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// runAPIVersions is `broker api-versions`, kafka-broker-api-versions.sh:
// every broker's advertised version range per API key, and the highest
// version both it and this tool's client (franz-go) speak.
func runAPIVersions(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("api-versions", "api-versions --bootstrap-server HOST:PORT [flags]", stderr)
	var o adminOpts
	o.register(fs)
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	s, code := o.connect("api-versions", stderr)
	if code >= 0 {
		return code
	}
	defer s.Close()
	meta, err := s.adm.BrokerMetadata(s.ctx)
	if err != nil {
		fmt.Fprintf(stderr, "broker api-versions: %v\n", oneLine(err))
		return exitError
	}
	vs, err := s.adm.ApiVersions(s.ctx)
	if err != nil {
		fmt.Fprintf(stderr, "broker api-versions: %v\n", oneLine(err))
		return exitError
	}
	byID := map[int32]kadm.BrokerDetail{}
	for _, b := range meta.Brokers {
		byID[b.NodeID] = b
	}
	code = exitOK
	for _, v := range vs.Sorted() {
		b := byID[v.NodeID]
		rack := "null"
		if b.Rack != nil {
			rack = *b.Rack
		}
		if v.Err != nil {
			fmt.Fprintf(stderr, "broker api-versions: %s:%d (id: %d): %v\n", b.Host, b.Port, v.NodeID, oneLine(v.Err))
			code = exitError
			continue
		}
		fmt.Fprintf(stdout, "%s:%d (id: %d rack: %s) -> (\n", b.Host, b.Port, v.NodeID, rack)
		var lines []string
		v.EachKeySorted(func(key, lo, hi int16) {
			lines = append(lines, apiVersionLine(key, lo, hi))
		})
		for i, l := range lines {
			sep := ","
			if i == len(lines)-1 {
				sep = ""
			}
			fmt.Fprintf(stdout, "\t%s%s\n", l, sep)
		}
		fmt.Fprintln(stdout, ")")
	}
	return code
}

// apiVersionLine is one key's line: "Produce(0): 0 to 11 [usable: 11]".
func apiVersionLine(key, lo, hi int16) string {
	name := kmsg.NameForKey(key)
	if name == "" {
		return fmt.Sprintf("UNKNOWN(%d): %d to %d", key, lo, hi)
	}
	usable := "UNSUPPORTED"
	if req := kmsg.RequestForKey(key); req != nil {
		if m := min(req.MaxVersion(), hi); m >= lo {
			usable = fmt.Sprint(m)
		}
	}
	return fmt.Sprintf("%s(%d): %d to %d [usable: %s]", name, key, lo, hi, usable)
}
