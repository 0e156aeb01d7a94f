// agentnode is a stand-in node for the agent's Docker test: it listens on
// :7000 and offers "dial host:port", "drop host...", "heal" and "dropped".
package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/faultline/faultline/nemesis/agent"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		ln, err := net.Listen("tcp", ":7000")
		if err != nil {
			fail(err)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				fail(err)
			}
			c.Close()
		}
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[2], time.Second)
		if err != nil {
			fail(err)
		}
		c.Close()
		fmt.Println("connected")
	case "drop":
		var addrs []netip.Addr
		for _, h := range os.Args[2:] {
			ips, err := net.LookupHost(h)
			if err != nil {
				fail(err)
			}
			a, err := netip.ParseAddr(ips[0])
			if err != nil {
				fail(err)
			}
			addrs = append(addrs, a)
		}
		if err := agent.Drop(addrs); err != nil {
			fail(err)
		}
	case "heal":
		if err := agent.Heal(); err != nil {
			fail(err)
		}
	case "dropped":
		addrs, err := agent.Dropped()
		if err != nil {
			fail(err)
		}
		fmt.Println(len(addrs))
	}
}
