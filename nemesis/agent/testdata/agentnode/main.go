// agentnode is a stand-in node for the agent's Docker test: it listens on
// :7000 and offers "dial host:port", "drop host...", "heal" and "dropped";
// for the disk test, "write DIR" (a broker-like writer: synced and unsynced
// data, then it runs until killed) and "cat FILE".
package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
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
	case "write":
		if err := write(os.Args[2]); err != nil {
			fail(err)
		}
		fmt.Println("written")
		for {
			time.Sleep(time.Hour)
		}
	case "cat":
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fail(err)
		}
		fmt.Print(string(b))
	case "dropped":
		addrs, err := agent.Dropped()
		if err != nil {
			fail(err)
		}
		fmt.Println(len(addrs))
	}
}

// write makes DIR/synced hold "durable" (file and directory fsynced), then
// appends "tail" to it and creates DIR/unsynced, neither fsynced. On a
// restart it writes nothing.
func write(dir string) error {
	synced := filepath.Join(dir, "synced")
	if _, err := os.Stat(synced); err == nil {
		return nil
	}
	f, err := os.Create(synced)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString("durable"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return err
	}
	if _, err := f.WriteString("tail"); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "unsynced"), []byte("volatile"), 0o644)
}
