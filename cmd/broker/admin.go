package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminOpts are the flags every Kafka-tool verb shares: where to connect,
// Kafka's --command-config (accepted, ignored until security exists) and
// how long to try.
type adminOpts struct {
	bootstrap     string
	commandConfig string
	timeout       string
}

func (o *adminOpts) register(fs *flags) {
	o.timeout = "10s"
	fs.stringVar(&o.bootstrap, "HOST:PORT[,HOST:PORT]", "the broker(s) to connect to (required)", "bootstrap-server")
	fs.stringVar(&o.commandConfig, "FILE", "client properties, as Kafka's tools take them; accepted and ignored (with a warning) until the broker has security", "command-config")
	fs.stringVar(&o.timeout, "DURATION", "how long to wait for the brokers to answer (default 10s)", "timeout")
}

// adminSession is an admin client on a reachable cluster.
type adminSession struct {
	kgo  *kgo.Client
	adm  *kadm.Client
	ctx  context.Context
	stop context.CancelFunc
}

func (s *adminSession) Close() {
	s.stop()
	s.kgo.Close()
}

// connect checks the flags, warns about --command-config and returns a
// session once a broker of --bootstrap-server answers ApiVersions; an
// unreachable cluster is one clear error naming the addresses.
func (o *adminOpts) connect(verb string, stderr io.Writer) (*adminSession, int) {
	if strings.TrimSpace(o.bootstrap) == "" {
		fmt.Fprintf(stderr, "broker %s: missing --bootstrap-server HOST:PORT\n", verb)
		return nil, exitUsage
	}
	wait, err := time.ParseDuration(o.timeout)
	if err != nil || wait <= 0 {
		fmt.Fprintf(stderr, "broker %s: --timeout %q: want a positive duration such as 10s\n", verb, o.timeout)
		return nil, exitUsage
	}
	seeds, err := splitHostPorts(o.bootstrap)
	if err != nil {
		fmt.Fprintf(stderr, "broker %s: --bootstrap-server: %v\n", verb, err)
		return nil, exitUsage
	}
	if o.commandConfig != "" {
		fmt.Fprintf(stderr, "broker %s: warning: --command-config %s ignored: the broker has no security settings yet\n", verb, o.commandConfig)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("broker-"+strings.ReplaceAll(verb, " ", "-")),
		kgo.DialTimeout(min(wait, 3*time.Second)), kgo.RequestRetries(2), kgo.RetryTimeout(wait))
	if err != nil {
		fmt.Fprintf(stderr, "broker %s: %v\n", verb, err)
		return nil, exitError
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl); err != nil {
		cancel()
		cl.Close()
		fmt.Fprintf(stderr, "broker %s: cannot reach a broker at %s: %v\n", verb, strings.Join(seeds, ","), oneLine(err))
		return nil, exitError
	}
	return &adminSession{kgo: cl, adm: kadm.NewClient(cl), ctx: ctx, stop: cancel}, -1
}

func splitHostPorts(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("%q: want HOST:PORT", a)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errors.New("no address given")
	}
	return out, nil
}

// oneLine keeps an error's message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func joinInt32s(xs []int32) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprint(x)
	}
	return strings.Join(out, ",")
}
