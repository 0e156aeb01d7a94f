package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/node"
)

// Exit codes: 0 success, 1 failure at run time (bad configuration, storage
// not formatted, startup failed), 2 bad command-line usage.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"format", "Format the log dirs and metadata dir of a node (like kafka-storage.sh format)", runFormat},
		{"serve", "Run a broker node until SIGTERM or SIGINT", runServe},
		{"quorum", "Describe the controller quorum: `quorum describe --status --bootstrap-server HOST:PORT` (like kafka-metadata-quorum.sh)", runQuorum},
		{"topics", "List, describe, create and delete topics (like kafka-topics.sh)", runTopics},
		{"consumer-groups", "List consumer groups and describe their offsets and lag (like kafka-consumer-groups.sh)", runConsumerGroups},
		{"api-versions", "Print every broker's API version ranges (like kafka-broker-api-versions.sh)", runAPIVersions},
		{"log-dirs", "Describe each broker's log dirs: partition sizes, offline dirs (like kafka-log-dirs.sh)", runLogDirs},
		{"dump-log", "Print the batches of a segment or the entries of an index, offline, naming corruption (like kafka-dump-log.sh)", runDumpLog},
		{"random-uuid", "Print a new random cluster id (like kafka-storage.sh random-uuid)", runRandomUUID},
		{"version", "Print the broker version", runVersion},
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "broker: unknown command %q (see `broker help`)\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: broker <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A Kafka-compatible broker. Format its directories once, then serve:")
	fmt.Fprintln(w, "  broker format -t $(broker random-uuid) -c server.properties")
	fmt.Fprintln(w, "  broker serve -c server.properties")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help             Show this help, or `broker help <command>` for a command's flags")
}

// flags is a FlagSet whose usage lists each flag once with its aliases
// ("-t, --cluster-id CLUSTER_ID").
type flags struct {
	*flag.FlagSet
	synopsis string
	help     []flagHelp
}

type flagHelp struct {
	names []string
	arg   string // "" for booleans
	usage string
}

// flagSet makes a flags for a command; parse errors and --help are reported
// by parse.
func flagSet(name, synopsis string, stderr io.Writer) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), synopsis: synopsis}
	f.SetOutput(stderr)
	f.Usage = f.printUsage
	return f
}

func (f *flags) printUsage() {
	out := f.Output()
	fmt.Fprintf(out, "Usage: broker %s\n", f.synopsis)
	if len(f.help) == 0 {
		return
	}
	fmt.Fprintln(out, "\nFlags:")
	for _, h := range f.help {
		names := make([]string, len(h.names))
		for i, n := range h.names {
			if len(n) == 1 {
				names[i] = "-" + n
			} else {
				names[i] = "--" + n
			}
		}
		head := strings.Join(names, ", ")
		if h.arg != "" {
			head += " " + h.arg
		}
		fmt.Fprintf(out, "  %s\n        %s\n", head, h.usage)
	}
}

func (f *flags) stringVar(p *string, arg, usage string, names ...string) {
	for _, n := range names {
		f.StringVar(p, n, *p, usage)
	}
	f.help = append(f.help, flagHelp{names: names, arg: arg, usage: usage})
}

func (f *flags) boolVar(p *bool, usage string, names ...string) {
	for _, n := range names {
		f.BoolVar(p, n, *p, usage)
	}
	f.help = append(f.help, flagHelp{names: names, usage: usage})
}

func (f *flags) varFlag(v flag.Value, arg, usage string, names ...string) {
	for _, n := range names {
		f.Var(v, n, usage)
	}
	f.help = append(f.help, flagHelp{names: names, arg: arg, usage: usage})
}

// parse parses args; it returns -1 to go on, or the exit code to return.
func parse(fs *flags, args []string, stdout io.Writer) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "broker %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage
	}
	return -1
}

// overrides collects repeated --override key=value flags.
type overrides map[string]string

func (o overrides) String() string {
	keys := make([]string, 0, len(o))
	for k, v := range o {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (o overrides) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	o[strings.TrimSpace(k)] = v
	return nil
}

// loadConfig reads the properties file, applies the overrides and validates
// the result. It returns the warnings (unknown keys and the like) and, on
// failure, an error with one problem per line, each naming its key.
func loadConfig(path string, over overrides) (*config.Config, []string, error) {
	if path == "" {
		return nil, nil, errors.New("missing -c/--config server.properties")
	}
	if len(over) == 0 {
		return config.Load(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	props, err := config.ParseProperties(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read config %s: %w", path, err)
	}
	for k, v := range over {
		props[k] = v
	}
	return config.FromMap(props)
}

// reportConfigError prints each problem of an error on its own line (a
// configuration error lists several, one per key).
func reportConfigError(stderr io.Writer, cmd string, err error) {
	for _, line := range config.Problems(err) {
		fmt.Fprintf(stderr, "broker %s: %s\n", cmd, line)
	}
}

func runRandomUUID(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("random-uuid", "random-uuid", stderr)
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	fmt.Fprintln(stdout, node.RandomUUID())
	return exitOK
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("version", "version", stderr)
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	fmt.Fprintf(stdout, "faultline broker %s\n", node.VersionString())
	return exitOK
}

func runFormat(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("format", "format -t CLUSTER_ID -c server.properties [--ignore-formatted] [--initial-controllers ID@HOST:PORT[:DIR_ID],...]", stderr)
	var opts node.FormatOptions
	var configPath string
	over := overrides{}
	fs.stringVar(&opts.ClusterID, "CLUSTER_ID", "the cluster id: 22 base64url characters, as printed by 'broker random-uuid' (required)", "t", "cluster-id")
	fs.stringVar(&configPath, "FILE", "the node's server.properties (required)", "c", "config")
	fs.boolVar(&opts.IgnoreFormatted, "skip directories that are already formatted instead of failing", "g", "ignore-formatted")
	fs.stringVar(&opts.InitialControllers, "ID@HOST:PORT[:DIR_ID],...", "the initial controller quorum; checked against controller.quorum.voters", "I", "initial-controllers")
	fs.boolVar(&opts.Standalone, "format this node as the only voter of a new controller quorum", "s", "standalone")
	fs.varFlag(over, "KEY=VALUE", "a configuration key that overrides the file (repeatable)", "override")
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	if opts.ClusterID == "" {
		fmt.Fprintln(stderr, "broker format: missing -t CLUSTER_ID (make one with `broker random-uuid`)")
		return exitUsage
	}
	if configPath == "" {
		fmt.Fprintln(stderr, "broker format: missing -c server.properties")
		return exitUsage
	}
	cfg, warnings, err := loadConfig(configPath, over)
	for _, w := range warnings {
		fmt.Fprintf(stderr, "broker format: warning: %s\n", w)
	}
	if err != nil {
		reportConfigError(stderr, "format", err)
		return exitError
	}
	formatted, err := node.Format(cfg, opts)
	if err != nil {
		fmt.Fprintf(stderr, "broker format: %v\n", err)
		return exitError
	}
	for _, line := range formatted {
		fmt.Fprintln(stdout, line)
	}
	return exitOK
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("serve", "serve -c server.properties [--override key=value ...]", stderr)
	var configPath, level string
	over := overrides{}
	level = "info"
	fs.stringVar(&configPath, "FILE", "the node's server.properties (required)", "c", "config")
	fs.varFlag(over, "KEY=VALUE", "a configuration key that overrides the file (repeatable)", "override")
	fs.stringVar(&level, "LEVEL", "lowest level logged to stderr: debug, info (default), warn or error", "log-level")
	if code := parse(fs, args, stdout); code >= 0 {
		return code
	}
	if configPath == "" {
		fmt.Fprintln(stderr, "broker serve: missing -c server.properties")
		return exitUsage
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintf(stderr, "broker serve: --log-level: %v\n", err)
		return exitUsage
	}
	logger := slog.New(node.NewKafkaHandler(stderr, lv))
	cfg, warnings, err := loadConfig(configPath, over)
	if err != nil {
		reportConfigError(stderr, "serve", err)
		return exitError
	}
	for _, w := range warnings {
		logger.Warn(w, node.ComponentKey, "KafkaConfig")
	}

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(signals)

	startCtx, cancelStart := context.WithCancel(context.Background())
	defer cancelStart()
	// A signal during startup abandons it (Start cleans up after itself);
	// one taken just as Start succeeded is handed on, as a shutdown.
	duringStart := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-signals:
			duringStart <- sig
			cancelStart()
		case <-startCtx.Done():
		}
	}()
	n, err := node.Start(startCtx, cfg, logger)
	if err != nil {
		if startCtx.Err() != nil {
			logger.Info("Startup interrupted by a signal", node.ComponentKey, "KafkaServer")
			return exitError
		}
		reportConfigError(stderr, "serve", err)
		return exitError
	}
	cancelStart()

	var sig os.Signal
	select {
	case sig = <-signals:
	case sig = <-duringStart:
	case <-n.Done():
	}
	if sig != nil {
		logger.Info(fmt.Sprintf("Received %s, starting controlled shutdown", sig), node.ComponentKey, "KafkaServer")
	} else {
		logger.Error(fmt.Sprintf("Broker stopped: %v", n.Err()), node.ComponentKey, "KafkaServer")
	}
	// While shutting down, SIGTERM again changes nothing (as the JVM runs
	// Kafka's shutdown hook once): process supervisors and `timeout` often
	// send it twice. SIGINT again (a second Ctrl-C) stops at once, without
	// the clean marker: the next start recovers.
	go func() {
		for sig := range signals {
			if sig == syscall.SIGTERM {
				logger.Info("Received SIGTERM again; the controlled shutdown goes on (SIGINT or SIGKILL stops at once)", node.ComponentKey, "KafkaServer")
				continue
			}
			logger.Warn(fmt.Sprintf("Received %s again, exiting without a clean shutdown", sig), node.ComponentKey, "KafkaServer")
			os.Exit(exitError)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout(cfg))
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		fmt.Fprintf(stderr, "broker serve: shutdown: %v\n", err)
		return exitError
	}
	if err := n.Err(); err != nil {
		return exitError
	}
	return exitOK
}

// shutdownTimeout bounds a controlled shutdown, after which the process exits
// without the clean marker.
func shutdownTimeout(cfg *config.Config) time.Duration {
	return node.ShutdownTimeout(cfg)
}
