// Package nemesis holds the faults a test injects and the schedule that
// starts and stops them, after Jepsen's nemesis: each fault is a small
// value with Start (choose targets with a seeded rng, apply) and Stop (undo
// exactly what Start did), and Noop does nothing. Targets are chosen by
// asking the cluster who leads what at that moment (Cluster), and faults
// are made real by the runtime (Runtime: signals to broker processes,
// netfilter rules through the in-node agent in package agent).
//
// Faults: kill (SIGKILL one node, a minority, a majority (the nodes
// leading the workload's partitions first, the rest drawn), partition
// leaders, or the active controller; every node only when asked for with
// kill:all; the node coordinating one of the workload's transactional ids
// only when asked for with kill:coordinator, from a Cluster that is a
// CoordinatorView; restart on the same data when it stops), pause
// (SIGSTOP/SIGCONT, same targets), partition (one node
// isolated, random halves, majorities ring, the active controller isolated;
// node-to-node traffic only, never clients), none; and the disk faults,
// with kill's targets, made real by a runtime that is also a Disk: power
// (the broker killed and its fault filesystem's unsynced writes dropped,
// torn or reordered as the seed draws; every target at the same moment, and
// all started again at once when it stops), disk-error
// (EIO on fsync and/or write), disk-full (ENOSPC at the current size),
// disk-slow (latency), each healed when it stops, and corrupt (kill, then
// damage the stopped node's data; restart when it stops). Each records
// what it did to each node (DiskTargets).
//
// Fixed sequences of two faults, chosen only when named, are the modes
// that expose the planted bugs (sequence.go): power:follower-then-leader,
// power:after-fsync-error (EIO on every fsync, then every node's power),
// power:after-slow-fsync (the same with slow fsyncs),
// power:restart-lagging-then-leader, corrupt:bit-flip (one node, one bit
// of one batch), corrupt:bit-flip-then-leader, corrupt:disk-replaced (one
// node's data dir emptied as a new disk would be, its identity and the
// metadata log kept), and partition:lagging-then-leader (a node cut off from
// all but the controller until it leaves its ISRs, then the rest of an ISR
// it replicates killed, found through the optional ReplicaView). Two
// partition modes hold their cut for the sequence wait, longer than a
// broker session, and are also chosen only when named:
// partition:leader-and-follower (zombie.go: a partition's leader and one
// in-sync follower, from ReplicaView, cut off from the other nodes) and
// partition:coordinator (coordinator.go: the consumer group's coordinator,
// from the optional CoordinatorView, cut off from every other node).
// partition:deposed-leader-returns (deposed.go) cuts a partition's leader
// off from every node for the sequence wait, so it is deposed while
// producers still append to it, heals, and once it is back in the ISR
// kills the rest of that ISR so it leads again (a later round spares that
// node). partition:leader-cut-then-killed (cutkill.go) cuts a partition's
// leader off from its followers only and kills it 1 s later, while they
// are still in the ISR. corrupt:unreplicated-tail
// (tailflip.go) corrupts a live leader: it drops its followers' packets,
// their agents read their log ends (TailFlipper), it waits for its own log
// end to pass them, and its agent flips a bit in the last batch none of
// them has. These three, and the ISR kills of
// lagging-then-leader, aim at the partitions being written now when the
// cluster tells (ActivityView).
// partition:clients-coordinator (coordinator.go, also only when named)
// cuts the clients, ClientsNode in its Grudge, off from a transaction
// coordinator that keeps its peers; partition:coordinator-cut-then-killed
// cuts a transaction coordinator off from all but the controller and one
// other node for the sequence wait, then kills it.
//
// Membership and failover faults: stop (SIGTERM, restart when it stops),
// rolling-restart (every node in turn, each back in every ISR before the
// next), membership (one node out until no ISR lists it, back on its kept
// data when it stops), lagging-failover (a follower cut or slowed until it
// leaves the ISR, then healed and its leader killed); these aim from what
// Metadata says (ReplicaView), never from broker internals. packet is a
// netem fault made by the agent (Network).
//
// The --nemesis grammar is read in one place, ParseSpec: a comma-separated
// list of KIND or KIND:MODE, an entry composing several with "+"
// (partition:one+kill:leaders), parsed into a Spec of typed entries that the
// harness (Test.Nemesis, stored in test.json as a list), the schedule
// (Spec.Faults, one fault per slot of Spec.Parts) and the report use; a bad
// list is refused with one error naming the wrong entry.
//
// A schedule is data: Plan draws a []Event from a seed (staggered gaps,
// stable periods between rounds, overlapping timelines per kind with
// PlanOptions.Overlap), Schedule executes one and returns it as executed
// (Executed, with the nodes each start hit), and an executed list fed back
// replays the faults exactly (events pin mode, seed and nodes through
// WithAim). A sequence mode's start also records its steps (Event.Steps:
// each step's time, nodes, partition and the rule that resolved them
// against the live cluster); fed back, its fault drives the recorded
// steps at their recorded times (steps.go) and notes on the step where the
// live cluster disagreed (ReplayNotes). A schedule must never leave a fault in force: Run heals before
// it returns, even when its context was cancelled. PlanOptions.Cycle draws
// the entries in the order the list names them (a short run meets each).
// Pairs and KeepPairs cut an executed list down to some of its faults
// (the shrinker's candidates).
package nemesis
