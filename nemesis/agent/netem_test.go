package agent

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNetemRoundTrip(t *testing.T) {
	n, err := ParseNetem(strings.Fields("delay=100ms jitter=10ms loss=5 duplicate=2.5 reorder=25"))
	require.NoError(t, err)
	assert.Equal(t, Netem{Delay: 100 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 5, Duplicate: 2.5, Reorder: 25}, n)
	back, err := ParseNetem(strings.Fields(n.String()))
	require.NoError(t, err)
	assert.Equal(t, n, back)
}

func TestParseNetemRefuses(t *testing.T) {
	for _, in := range []string{"delay", "delay=-1s", "loss=101", "loss=x", "reorder=10", "jitter=2s delay=1s", "speed=1", "loss=NaN", "delay=2h", "delay=2000000h jitter=2000000h"} {
		_, err := ParseNetem(strings.Fields(in))
		assert.Error(t, err, in)
	}
}

// decodeNetem reads back what netemRequest encoded, as the kernel would.
func decodeNetem(t *testing.T, m netlink.Message) (ifindex int, parent uint32, kind string, qopt [6]uint32, attrs map[uint16][]byte) {
	t.Helper()
	require.GreaterOrEqual(t, len(m.Data), sizeofTcMsg)
	ifindex = int(int32(binary.NativeEndian.Uint32(m.Data[4:])))
	parent = binary.NativeEndian.Uint32(m.Data[12:])
	top, err := netlink.UnmarshalAttributes(m.Data[sizeofTcMsg:])
	require.NoError(t, err)
	attrs = map[uint16][]byte{}
	for _, a := range top {
		switch a.Type {
		case tcaKind:
			kind = string(a.Data)
		case tcaOptions:
			require.GreaterOrEqual(t, len(a.Data), 24)
			for i := range qopt {
				qopt[i] = binary.NativeEndian.Uint32(a.Data[4*i:])
			}
			inner, err := netlink.UnmarshalAttributes(a.Data[24:])
			require.NoError(t, err)
			for _, ia := range inner {
				attrs[ia.Type] = ia.Data
			}
		}
	}
	return
}

func TestNetemRequestDelay(t *testing.T) {
	m, err := netemRequest(7, Netem{Delay: 200 * time.Millisecond, Jitter: 20 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, netlink.HeaderType(rtmNewQdisc), m.Header.Type)
	assert.NotZero(t, m.Header.Flags&netlink.Create)
	assert.NotZero(t, m.Header.Flags&netlink.Replace)
	assert.NotZero(t, m.Header.Flags&netlink.Acknowledge)
	ifindex, parent, kind, q, attrs := decodeNetem(t, m)
	assert.Equal(t, 7, ifindex)
	assert.Equal(t, uint32(tcHRoot), parent)
	assert.Equal(t, "netem\x00", kind)
	assert.Equal(t, uint32(200_000_000>>pschedShift), q[0], "latency in ticks")
	assert.Equal(t, uint32(netemLimit), q[1])
	assert.Zero(t, q[2], "no loss")
	assert.Zero(t, q[3], "no gap without reordering")
	assert.Equal(t, uint32(20_000_000>>pschedShift), q[5], "jitter in ticks")
	assert.Equal(t, int64(200*time.Millisecond), int64(binary.NativeEndian.Uint64(attrs[tcaNetemLatency64])))
	assert.Equal(t, int64(20*time.Millisecond), int64(binary.NativeEndian.Uint64(attrs[tcaNetemJitter64])))
	assert.NotContains(t, attrs, uint16(tcaNetemReorder))
}

func TestNetemRequestLossDuplicateReorder(t *testing.T) {
	m, err := netemRequest(3, Netem{Delay: 50 * time.Millisecond, Loss: 100, Duplicate: 50, Reorder: 25})
	require.NoError(t, err)
	_, _, _, q, attrs := decodeNetem(t, m)
	assert.Equal(t, uint32(math.MaxUint32), q[2], "100% loss")
	assert.Equal(t, uint32(1), q[3], "gap 1 so that reordering happens")
	assert.InDelta(t, float64(math.MaxUint32)/2, float64(q[4]), 2, "50% duplicates")
	require.Len(t, attrs[tcaNetemReorder], 8)
	assert.InDelta(t, float64(math.MaxUint32)/4, float64(binary.NativeEndian.Uint32(attrs[tcaNetemReorder])), 2)
}

func TestRootKind(t *testing.T) {
	mk := func(ifindex int, parent uint32, kind string) netlink.Message {
		attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: tcaKind, Data: append([]byte(kind), 0)}})
		require.NoError(t, err)
		return netlink.Message{Header: netlink.Header{Type: rtmNewQdisc}, Data: append(tcMsg(ifindex, 0, parent), attrs...)}
	}
	msgs := []netlink.Message{mk(1, tcHRoot, "noqueue"), mk(2, 0x10001, "pfifo"), mk(2, tcHRoot, "netem"), {Data: []byte{1}}}
	assert.Equal(t, "netem", rootKind(msgs, 2))
	assert.Equal(t, "noqueue", rootKind(msgs, 1))
	assert.Empty(t, rootKind(msgs, 3))
}

func FuzzParseNetem(f *testing.F) {
	f.Add("delay=100ms jitter=10ms loss=5")
	f.Add("reorder=50 delay=1s")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseNetem(strings.Fields(s))
		if err != nil {
			return
		}
		if _, err := netemRequest(1, n); err != nil {
			t.Fatalf("valid %q does not encode: %v", s, err)
		}
	})
}

func TestLossRuleThreshold(t *testing.T) {
	rules := lossRules(12.5)
	require.Len(t, rules, 4)
	cmp := rules[2].(*expr.Cmp)
	assert.Equal(t, expr.CmpOpLt, cmp.Op)
	assert.Equal(t, []byte{0, 0, 0x04, 0xe2}, cmp.Data, "1250 of 10000, big-endian after the byteorder conversion")
	assert.Equal(t, uint32(lossResolution), rules[0].(*expr.Numgen).Modulus)
}
