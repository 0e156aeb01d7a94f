// Package agent is the fault agent that runs inside a node (as
// `/faultline agent ...` in the node image): it cuts the network with
// netfilter rules in the node's own network namespace, so a partition works
// the same on a local or a remote Docker host and never touches the host's
// rules. It needs CAP_NET_ADMIN in the node and nothing else; the image has
// no iptables binary. `faultline agent dial HOST:PORT` probes reachability
// (tests use it to prove a partition holds and heals).
//
// The agent must never act outside its own namespace, and Heal must always
// leave the namespace as it found it.
package agent
