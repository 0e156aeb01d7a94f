// echonode is a tiny static program used by the Docker runtime test as a
// stand-in node: it counts its boots in /data/boots and listens on :7000;
// "dial host:port" and "cat file" are its exec commands.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == "dial" {
		c, err := net.DialTimeout("tcp", os.Args[2], 2*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "cat" {
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	}
	b, _ := os.ReadFile("/data/boots")
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := os.WriteFile("/data/boots", []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("boot", n+1)
	ln, err := net.Listen("tcp", ":7000")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Close()
	}
}
