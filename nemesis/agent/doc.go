// Package agent is the fault agent that runs inside a node (as
// `/faultline agent ...` in the node image): it cuts the network with
// netfilter rules in the node's own network namespace, so a partition works
// the same on a local or a remote Docker host and never touches the host's
// rules. It needs CAP_NET_ADMIN in the node and nothing else; the image has
// no iptables binary. `faultline agent dial HOST:PORT` probes reachability
// (tests use it to prove a partition holds and heals).
//
// With a disk fault asked for, the agent is the node's entrypoint
// (`faultline agent run --backing /disk/data --mount /data -- /broker
// serve ...`): it mounts the fault filesystem, runs the broker on it as its
// child for the node's life and takes commands on SocketPath (Supervisor;
// `faultline agent disk CMD` sends them): faultfs commands, where a power
// loss first kills the broker and then ends the node. `faultline agent
// corrupt` damages a stopped node's log dir as a seed decides
// (PlanCorruption, a pure function of the seed and the dir's listing;
// ApplyCorruption does it). On a live node, `faultline agent log-end`
// reads each partition's log end from its active segment (LogEnds), and
// `faultline agent flip-tail` flips one bit in the records of the last
// batch at or above a given offset (PlanTailFlip decides, FlipTails does
// it): a leader's disk damaging a batch no follower has yet.
//
// `faultline agent netem` makes a packet fault (delay, loss, duplication,
// reordering) the root netem qdisc of the node's eth0 over rtnetlink
// (Netem; no tc binary); on a kernel without sch_netem, loss falls back to
// a netfilter rule in a table of its own, and delay, jitter and reordering
// to the delay queue: a rule hands the packets arriving at the node to a
// netfilter queue, and `faultline agent delay-queue`, a process netem
// leaves running until heal, holds each one for its delay (delayPlan and
// delayState decide; serveDelayQueue gives the verdicts).
//
// The agent must never act outside its own namespace, and Heal must always
// leave the namespace as it found it.
package agent
