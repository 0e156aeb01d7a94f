package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// lossTableName is the nftables table of the loss fallback, apart from the
// partition's table so that healing one never touches the other.
const lossTableName = "faultline-loss"

// lossResolution is the modulus of the random number a packet draws: loss
// is exact to 0.01%.
const lossResolution = 10000

// ErrNoNetem means the kernel has no netem queueing discipline
// (CONFIG_NET_SCH_NETEM unset and no module to load): duplication cannot
// be made; loss, delay and reordering fall back to netfilter.
var ErrNoNetem = errors.New("the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM)")

// lossRules returns the expressions of the fallback's one rule: draw a
// random number in [0, lossResolution), turn it to network order (a
// comparison is a memcmp of the register) and drop the packet when it is
// below the loss threshold.
func lossRules(percent float64) []expr.Any {
	threshold := make([]byte, 4)
	binary.BigEndian.PutUint32(threshold, uint32(percent/100*lossResolution))
	return []expr.Any{
		&expr.Numgen{Register: 1, Modulus: lossResolution, Type: unix.NFT_NG_RANDOM},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: threshold},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}
}

// applyLoss drops percent of the IPv4 packets arriving at the node (its
// input hook: the sender sees them lost on the wire), replacing the rule in
// force; 0 heals.
func applyLoss(percent float64) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	removeTable(conn, lossTableName)
	if percent > 0 {
		table, chain := inputChain(conn, lossTableName)
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: lossRules(percent)})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("apply the loss rule: %w", err)
	}
	return nil
}

// isNoNetem reports whether a qdisc request failed because the kernel does
// not know the kind (it answers ENOENT).
func isNoNetem(err error) bool { return errors.Is(err, syscall.ENOENT) }
