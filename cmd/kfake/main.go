// Command kfake runs franz-go's kfake, an in-memory Kafka cluster, as a
// broker process: a Kafka-compatible broker that nobody on this project
// wrote, for faultline's `--db kfake` profile. It keeps nothing on disk, so
// a restart starts empty.
//
//	kfake --listen 0.0.0.0:9092 --advertise 10.0.0.11:9092 [--cluster-id ID] [--partitions N] [--config K=V ...]
//
// It serves until SIGTERM or SIGINT. Exit codes: 0 after a signal, 1 when
// the cluster cannot start, 2 bad usage.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr, nil))
}

// configs collects repeated --config key=value flags.
type configs map[string]string

func (c configs) String() string { return fmt.Sprint(map[string]string(c)) }
func (c configs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	c[k] = v
	return nil
}

// run starts the cluster and serves until a signal (or until stop is
// closed, for tests); ready receives the bound address.
func run(args []string, stderr io.Writer, stop <-chan struct{}) int {
	fs := flag.NewFlagSet("kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9092", "address to listen on")
	advertise := fs.String("advertise", "", "host:port the broker gives clients in Metadata (default: --listen)")
	clusterID := fs.String("cluster-id", "", "the cluster id in Metadata (default kfake's)")
	partitions := fs.Int("partitions", 0, "partitions of auto-created topics (default kfake's)")
	cfgs := configs{}
	fs.Var(cfgs, "config", "a broker config kfake reports (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kfake --listen HOST:PORT [--advertise HOST:PORT] [--cluster-id ID] [--partitions N] [--config K=V ...]")
		fmt.Fprintln(stderr, "Runs franz-go's in-memory kfake cluster (one broker) until SIGTERM or SIGINT. It keeps nothing across a restart.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *advertise == "" {
		*advertise = *listen
	}
	adHost, adPortS, err := net.SplitHostPort(*advertise)
	if err != nil {
		fmt.Fprintf(stderr, "kfake: --advertise %q: want HOST:PORT\n", *advertise)
		return 2
	}
	adPort, err := strconv.Atoi(adPortS)
	if err != nil {
		fmt.Fprintf(stderr, "kfake: --advertise %q: want HOST:PORT\n", *advertise)
		return 2
	}
	_, lPortS, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(stderr, "kfake: --listen %q: want HOST:PORT\n", *listen)
		return 2
	}
	lPort, _ := strconv.Atoi(lPortS)
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(lPort),
		// kfake advertises its listener's address; listen on --listen and
		// report --advertise, so clients in other containers reach it.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, *listen)
			if err != nil {
				return nil, err
			}
			return advertised{Listener: ln, addr: &net.TCPAddr{IP: net.ParseIP(adHost), Port: adPort}}, nil
		}),
	}
	if *clusterID != "" {
		opts = append(opts, kfake.ClusterID(*clusterID))
	}
	if *partitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(*partitions))
	}
	if len(cfgs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(cfgs))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "kfake: %v\n", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(stderr, "kfake: serving on %s, advertised as %s (in memory: nothing survives a restart)\n", *listen, *advertise)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	select {
	case s := <-sigs:
		fmt.Fprintf(stderr, "kfake: %v: shutting down\n", s)
	case <-stop:
	}
	return 0
}

// advertised is a listener whose Addr is the address to advertise.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }
