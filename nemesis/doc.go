// Package nemesis holds the faults a test injects and the schedule that
// starts and stops them, after Jepsen's nemesis: each fault is a small
// value with Start (choose targets with a seeded rng, apply) and Stop (undo
// exactly what Start did), and Noop does nothing. Targets are chosen by
// asking the cluster who leads what at that moment (Cluster), and faults
// are made real by the runtime (Runtime: signals to broker processes,
// netfilter rules through the in-node agent in package agent).
//
// Faults: kill (SIGKILL one node, a minority, a majority, partition
// leaders, or the active controller; every node only when asked for with
// kill:all; restart on the same data when it stops), pause
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
// of one batch), corrupt:bit-flip-then-leader, and partition:lagging-then-leader (a node cut off from
// all but the controller until it leaves its ISRs, then the rest of an ISR
// it replicates killed, found through the optional PartitionView).
//
// The --nemesis grammar is read in one place, ParseSpec: a comma-separated
// list of KIND or KIND:MODE, parsed into a Spec of typed entries that the
// harness (Test.Nemesis, stored in test.json as a list), the schedule
// (Spec.Faults) and the report use; a bad list is refused with one error
// naming the wrong entry.
//
// Schedule starts one fault every Interval, drawn at random from the list,
// or with Cycle in the order the list names them (a short run meets each).
//
// A schedule must never leave a fault in force: Run heals before it
// returns, even when its context was cancelled.
package nemesis
