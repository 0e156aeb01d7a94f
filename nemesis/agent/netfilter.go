package agent

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// tableName is the nftables table the agent owns inside a node's network
// namespace. Nothing else in the namespace is touched, and the host's rules
// are never seen: the agent runs inside the node.
const tableName = "faultline"

// Drop replaces the agent's rules with ones that drop every IPv4 packet
// arriving from any of srcs. Dropping input alone cuts both directions of a
// TCP connection (the handshake replies are dropped too). An empty srcs
// heals.
func Drop(srcs []netip.Addr) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	removeTable(conn, tableName)
	if len(srcs) == 0 {
		return flush(conn)
	}
	table, chain := inputChain(conn, tableName)
	for _, src := range srcs {
		if !src.Is4() {
			return fmt.Errorf("drop %s: only IPv4 sources are supported", src)
		}
		ip := src.As4()
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
			// The IPv4 source address: 4 bytes at offset 12 of the header.
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip[:]},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
	return flush(conn)
}

// Heal removes every rule the agent installed.
func Heal() error { return Drop(nil) }

// Dropped lists the sources currently dropped (for status and tests).
func Dropped() ([]netip.Addr, error) {
	conn, err := nftables.New()
	if err != nil {
		return nil, fmt.Errorf("open netlink: %w", err)
	}
	t, err := findTable(conn, tableName)
	if err != nil || t == nil {
		return nil, err
	}
	rules, err := conn.GetRules(t, &nftables.Chain{Name: "input", Table: t})
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	var out []netip.Addr
	for _, r := range rules {
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Cmp); ok && len(c.Data) == 4 {
				out = append(out, netip.AddrFrom4([4]byte(c.Data)))
			}
		}
	}
	return out, nil
}

// The agent's tables, one per fault (the partition's, the loss and delay
// fallbacks'), each healed apart from the others.

// findTable returns the agent's IPv4 table name, or nil when there is none.
func findTable(conn *nftables.Conn, name string) (*nftables.Table, error) {
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, nil
}

// removeTable queues the deletion of the agent's IPv4 table name if it
// exists.
func removeTable(conn *nftables.Conn, name string) {
	if t, err := findTable(conn, name); err == nil && t != nil {
		conn.DelTable(t)
	}
}

// dropTable deletes the agent's IPv4 table name if it exists.
func dropTable(name string) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("open netlink: %w", err)
	}
	t, err := findTable(conn, name)
	if err != nil || t == nil {
		return err
	}
	conn.DelTable(t)
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("remove table %s: %w", name, err)
	}
	return nil
}

// inputChain queues the agent's IPv4 table name with a chain on the input
// hook that accepts whatever its rules do not decide.
func inputChain(conn *nftables.Conn, name string) (*nftables.Table, *nftables.Chain) {
	table := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: name})
	policy := nftables.ChainPolicyAccept
	chain := conn.AddChain(&nftables.Chain{Name: "input", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &policy})
	return table, chain
}

func flush(conn *nftables.Conn) error {
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("apply netfilter rules: %w", err)
	}
	return nil
}
