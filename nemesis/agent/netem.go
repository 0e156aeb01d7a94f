package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
)

// Netem is a packet fault on a node's interface, made by the kernel's netem
// queueing discipline as the root qdisc: every packet the node sends out of
// the interface is delayed (Delay, ± Jitter), dropped (Loss, a percentage),
// sent twice (Duplicate) or, with Reorder, sent at once ahead of the delayed
// ones. The zero Netem is no fault. It applies to everything the node sends,
// its answers to clients included (a partition cuts node-to-node traffic
// only; netem has no such filter without a classifier). On a kernel
// without netem (CONFIG_NET_SCH_NETEM unset) loss falls back to a
// netfilter rule that drops that share of the packets arriving at the
// node, delay, jitter and reordering to the delay queue (a netfilter
// queue the agent's own process holds the arriving packets in), and
// duplication is refused (ErrNoNetem).
type Netem struct {
	Delay     time.Duration
	Jitter    time.Duration
	Loss      float64 // percent of packets dropped
	Duplicate float64 // percent of packets sent twice
	Reorder   float64 // percent of packets sent at once, ahead of the delayed ones
}

// IsZero reports whether n is no fault.
func (n Netem) IsZero() bool { return n == Netem{} }

// String writes n as ParseNetem reads it: "delay=100ms jitter=10ms loss=5".
func (n Netem) String() string {
	var parts []string
	if n.Delay > 0 {
		parts = append(parts, "delay="+n.Delay.String())
	}
	if n.Jitter > 0 {
		parts = append(parts, "jitter="+n.Jitter.String())
	}
	for _, p := range []struct {
		k string
		v float64
	}{{"loss", n.Loss}, {"duplicate", n.Duplicate}, {"reorder", n.Reorder}} {
		if p.v > 0 {
			parts = append(parts, p.k+"="+strconv.FormatFloat(p.v, 'g', -1, 64))
		}
	}
	return strings.Join(parts, " ")
}

// ParseNetem reads fields KEY=VALUE: delay and jitter are durations, loss,
// duplicate and reorder percentages in [0, 100]. Reordering needs a delay
// (the packets that are not sent at once are the delayed ones).
func ParseNetem(fields []string) (Netem, error) {
	var n Netem
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Netem{}, fmt.Errorf("netem: want KEY=VALUE, got %q", f)
		}
		switch k {
		case "delay", "jitter":
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return Netem{}, fmt.Errorf("netem: %s: want a duration of at least 0, got %q", k, v)
			}
			if k == "delay" {
				n.Delay = d
			} else {
				n.Jitter = d
			}
		case "loss", "duplicate", "reorder":
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || p < 0 || p > 100 || math.IsNaN(p) {
				return Netem{}, fmt.Errorf("netem: %s: want a percentage in [0, 100], got %q", k, v)
			}
			switch k {
			case "loss":
				n.Loss = p
			case "duplicate":
				n.Duplicate = p
			default:
				n.Reorder = p
			}
		default:
			return Netem{}, fmt.Errorf("netem: unknown key %q (known: delay, jitter, loss, duplicate, reorder)", k)
		}
	}
	return n, n.Validate()
}

// maxNetemDelay bounds a packet delay: a packet held longer is as good as
// lost to every protocol on the node.
const maxNetemDelay = time.Hour

// Validate refuses a Netem the kernel would refuse or misread.
func (n Netem) Validate() error {
	if n.Reorder > 0 && n.Delay == 0 {
		return errors.New("netem: reorder needs a delay (the packets not sent at once are the delayed ones)")
	}
	if n.Jitter > n.Delay {
		return fmt.Errorf("netem: jitter %s is more than the delay %s", n.Jitter, n.Delay)
	}
	if n.Delay > maxNetemDelay {
		return fmt.Errorf("netem: delay %s is more than %s", n.Delay, maxNetemDelay)
	}
	return nil
}

// Kernel constants of the traffic-control netlink interface
// (linux/rtnetlink.h, linux/pkt_sched.h): a stable ABI.
const (
	rtmNewQdisc = 36
	rtmDelQdisc = 37
	rtmGetQdisc = 38

	tcaKind    = 1
	tcaOptions = 2

	tcaNetemReorder   = 3
	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11

	tcHRoot = 0xFFFFFFFF

	// netemLimit is the qdisc's queue length in packets (tc's default).
	netemLimit = 1000
	// psched ticks are 64 ns (PSCHED_SHIFT 6); the 64-bit attributes
	// carry the exact nanoseconds for kernels that read them.
	pschedShift = 6

	sizeofTcMsg = 20
)

// tcMsg encodes struct tcmsg: family, padding, ifindex, handle, parent, info.
func tcMsg(ifindex int, handle, parent uint32) []byte {
	b := make([]byte, sizeofTcMsg)
	binary.NativeEndian.PutUint32(b[4:], uint32(int32(ifindex)))
	binary.NativeEndian.PutUint32(b[8:], handle)
	binary.NativeEndian.PutUint32(b[12:], parent)
	return b
}

// probability scales a percentage to netem's u32, where 2^32-1 is always.
func probability(percent float64) uint32 {
	if percent <= 0 {
		return 0
	}
	if percent >= 100 {
		return math.MaxUint32
	}
	return uint32(percent / 100 * math.MaxUint32)
}

// netemOptions encodes TCA_OPTIONS for netem: struct tc_netem_qopt
// (latency, limit, loss, gap, duplicate, jitter; latency and jitter in
// psched ticks) followed by attributes: the 64-bit latency and jitter in
// nanoseconds, and the reorder probability.
func netemOptions(n Netem) ([]byte, error) {
	q := make([]byte, 24)
	put := func(i int, v uint32) { binary.NativeEndian.PutUint32(q[4*i:], v) }
	put(0, uint32(min(uint64(n.Delay)>>pschedShift, math.MaxUint32)))
	put(1, netemLimit)
	put(2, probability(n.Loss))
	if n.Reorder > 0 {
		// gap 1: any packet may be the one sent ahead (tc's default).
		put(3, 1)
	}
	put(4, probability(n.Duplicate))
	put(5, uint32(min(uint64(n.Jitter)>>pschedShift, math.MaxUint32)))
	ae := netlink.NewAttributeEncoder()
	ae.Int64(tcaNetemLatency64, int64(n.Delay))
	ae.Int64(tcaNetemJitter64, int64(n.Jitter))
	if n.Reorder > 0 {
		r := make([]byte, 8)
		binary.NativeEndian.PutUint32(r, probability(n.Reorder))
		ae.Bytes(tcaNetemReorder, r)
	}
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return append(q, attrs...), nil
}

// netemRequest builds the netlink message that makes n the root qdisc of
// the interface (created, or replacing the one there).
func netemRequest(ifindex int, n Netem) (netlink.Message, error) {
	opts, err := netemOptions(n)
	if err != nil {
		return netlink.Message{}, err
	}
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: tcaKind, Data: append([]byte("netem"), 0)},
		{Type: tcaOptions, Data: opts},
	})
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: rtmNewQdisc, Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Replace},
		Data:   append(tcMsg(ifindex, 0, tcHRoot), attrs...),
	}, nil
}

// delRootRequest builds the message that removes the root qdisc (the
// interface falls back to its default).
func delRootRequest(ifindex int) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: rtmDelQdisc, Flags: netlink.Request | netlink.Acknowledge},
		Data:   tcMsg(ifindex, 0, tcHRoot),
	}
}

// rootKind finds, in the replies to a qdisc dump, the kind of the root
// qdisc of ifindex ("" when it has none listed).
func rootKind(msgs []netlink.Message, ifindex int) string {
	for _, m := range msgs {
		if m.Header.Type != rtmNewQdisc || len(m.Data) < sizeofTcMsg {
			continue
		}
		if int(int32(binary.NativeEndian.Uint32(m.Data[4:]))) != ifindex || binary.NativeEndian.Uint32(m.Data[12:]) != tcHRoot {
			continue
		}
		attrs, err := netlink.UnmarshalAttributes(m.Data[sizeofTcMsg:])
		if err != nil {
			continue
		}
		for _, a := range attrs {
			if a.Type == tcaKind {
				return strings.TrimRight(string(a.Data), "\x00")
			}
		}
	}
	return ""
}

// DefaultInterface is the node container's interface on its network.
const DefaultInterface = "eth0"

func rtnetlink(ifname string) (*netlink.Conn, int, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, 0, fmt.Errorf("netem: find interface %s: %w", ifname, err)
	}
	conn, err := netlink.Dial(0 /* NETLINK_ROUTE */, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("netem: open netlink: %w", err)
	}
	return conn, ifi.Index, nil
}

// ApplyNetem makes n the packet fault of the interface (replacing the one
// in force); a zero n heals.
func ApplyNetem(ifname string, n Netem) error {
	if n.IsZero() {
		return HealNetem(ifname)
	}
	if err := n.Validate(); err != nil {
		return err
	}
	conn, ifindex, err := rtnetlink(ifname)
	if err != nil {
		return err
	}
	defer conn.Close()
	req, err := netemRequest(ifindex, n)
	if err != nil {
		return err
	}
	_, err = conn.Execute(req)
	if err != nil && isNoNetem(err) {
		return applyFallback(ifname, n)
	}
	if err != nil {
		return fmt.Errorf("netem: install on %s: %w", ifname, err)
	}
	return nil
}

// applyFallback makes n with netfilter on a kernel without netem: a rule
// drops the Loss share of the packets arriving, and the delay queue holds
// the packets arriving on ifname for the delay, jitter and reordering. Only
// duplication cannot be made.
func applyFallback(ifname string, n Netem) error {
	if n.Duplicate > 0 {
		return fmt.Errorf("netem: %w: duplication needs it; loss, delay and reordering fall back to netfilter", ErrNoNetem)
	}
	if err := healFallback(); err != nil {
		return err
	}
	if n.Loss > 0 {
		if err := applyLoss(n.Loss); err != nil {
			return err
		}
	}
	if n.Delay > 0 {
		if err := applyDelay(ifname, n); err != nil {
			return errors.Join(err, applyLoss(0))
		}
	}
	return nil
}

// healFallback removes both netfilter fallbacks.
func healFallback() error { return errors.Join(applyLoss(0), healDelay()) }

// NetemKind returns the kind of the interface's root qdisc ("netem" while
// a packet fault is in force), or, on a kernel without netem, the
// fallbacks in force: "netfilter-loss", "netfilter-delay" or both.
func NetemKind(ifname string) (string, error) {
	nft, err := nftables.New()
	if err != nil {
		return "", fmt.Errorf("open netlink: %w", err)
	}
	tables, err := nft.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return "", fmt.Errorf("list tables: %w", err)
	}
	var fallbacks []string
	for _, f := range []struct{ table, kind string }{{lossTableName, "netfilter-loss"}, {delayTableName, "netfilter-delay"}} {
		if slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == f.table }) {
			fallbacks = append(fallbacks, f.kind)
		}
	}
	if len(fallbacks) > 0 {
		return strings.Join(fallbacks, " "), nil
	}
	conn, ifindex, err := rtnetlink(ifname)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return rootKindOf(conn, ifindex)
}

func rootKindOf(conn *netlink.Conn, ifindex int) (string, error) {
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: rtmGetQdisc, Flags: netlink.Request | netlink.Dump},
		Data:   tcMsg(0, 0, 0),
	})
	if err != nil {
		return "", fmt.Errorf("netem: list qdiscs: %w", err)
	}
	return rootKind(msgs, ifindex), nil
}

// HealNetem removes the agent's netem root qdisc, if there is one (any
// other root qdisc is left alone), and the loss fallback's rule.
func HealNetem(ifname string) error {
	if err := healFallback(); err != nil {
		return err
	}
	conn, ifindex, err := rtnetlink(ifname)
	if err != nil {
		return err
	}
	defer conn.Close()
	kind, err := rootKindOf(conn, ifindex)
	if err != nil {
		return err
	}
	if kind != "netem" {
		return nil
	}
	if _, err := conn.Execute(delRootRequest(ifindex)); err != nil {
		return fmt.Errorf("netem: remove from %s: %w", ifname, err)
	}
	return nil
}
