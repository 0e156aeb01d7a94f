// Package harness runs Jepsen-style tests against Kafka-compatible brokers:
// it sets up a cluster of nodes (Docker containers built FROM scratch around
// static binaries, or local processes), drives a workload through a real
// Kafka client, injects faults, records the history and hands it to the
// checker and the report.
//
// How to use it: fill a Test (DefaultTest gives the documented defaults),
// call Run with the registry of workloads Test.Workload is looked up in
// (cmd/faultline holds the table), and map the Outcome onto an exit code
// (Outcome.ExitCode); a Suite is a list of Cases with expected verdicts
// (RunSuite prints the table `make test-jepsen` gates on, records each
// case's expected verdict in its test.json, and writes the suite's index
// page into the store; Case.Judge wants an invalid case's anomalies to
// include one of its ExpectAnomalies). The harness
// drives a workload only through the workloads interfaces and takes its
// faults as a parsed nemesis.Spec.
//
// Run's phases, one file each: set up the cluster and wait until it serves
// (run.go; clusterview.go answers who serves and leads, for the waits and
// the nemesis's targets, from every broker's Metadata merged to the
// freshest per partition (freshmeta.go: a node just healed answers from a
// stale image), and records the partition leaders and epochs seen
// in Metadata responses as harness events in the history, from the
// workload's start to the end of the final reads); run the workers and the fault schedule until the
// time limit, an operation in flight at the limit still getting its
// completion, with Test.CrashClientsInterval crashing a seeded worker's
// client now and then (workers.go, progress.go: the crashed operation
// ends info, except a transaction its client found could only end
// aborted, which stays fail); heal; wait for recovery; the
// workload's final reads, in rounds of fresh clients until everything
// written was read (finalreads.go); when the workload used transactions,
// probe that a new producer can start under each of its transactional.ids
// (txnprobe.go: a stuck id is a liveness failure no read shows); check;
// write the results and the
// report (results.go). The history is streamed to history.jsonl and each
// node's log to nodes/<node>/broker.log while the run goes on, so a
// crashed harness leaves both behind. Cancelling Run's context (Ctrl-C)
// heals every fault, removes the cluster and returns ErrInterrupted.
//
// Replays, shrinking and the matrix (replay.go, shrinkrun.go, matrix.go):
// every run writes schedule.json, the fault events it executed
// (nemesis.Event: time since the workload started, start or stop, slot,
// kind, mode, seed, nodes hit, a sequence's steps); a Test whose Schedule is set hands those
// events to the same executor (nemesis.Schedule) instead of drawing a
// schedule with nemesis.Plan (Test.faultPlan), which is what LoadReplay
// (`faultline test --replay RUN`) and Shrink (`faultline shrink RUN`, the
// runs around the pure search of harness/shrink) build. MatrixCells is the
// guarantee matrix as data (configurations × fault columns × planted bugs,
// each cell with its expected verdict and, for a planted bug, the anomaly
// classes its suite case expects) and RunMatrix runs it over seeds, judges
// each run with Case.Judge (an invalid run of another class is a
// wrong-class detection, which does not count) and writes the index
// report (reports.WriteMatrixDir).
//
// Runtimes: Docker (docker.go, dockerruntime.go; dockerhosts.go places
// nodes on several Engines, `--docker-host`, each node driven through its
// own Engine's client, image and network once per Engine) builds the node image from
// an in-memory context tagged by content hash (an unchanged broker is never
// rebuilt), creates a private bridge network with pinned addresses where
// nodes are n1..nK, gives each node a named data volume that outlives its
// container (a killed node restarts on its own data), signals, pauses, runs
// the in-node fault agent for partitions, runs each node under the agent on
// the fault filesystem when a power or disk fault is named (the volume at
// /disk, the mount at /data; PowerLoss, DiskFault, HealDisk) and corrupts a
// stopped node's data in a one-shot container (Corrupt), and labels
// everything it creates
// with the run and its owner process, so that it is removed at the end,
// after Ctrl-C, and, for a harness that died, at the next start. Process
// (process.go) runs brokers as child processes on 127.0.0.x and refuses
// partitions (ErrUnsupported) rather than touching the host's firewall;
// disk faults need Docker (Test.Validate refuses them on processes).
//
// What it must never do: import broker/... (a broker is reached only
// through the Kafka protocol and the runtime, so any Kafka-compatible image
// can be tested); remove Docker objects of another live run; leave a fault
// in force or a node running after Run returns; decide correctness itself
// (the checker does).
package harness
