// Command faultline runs Jepsen-style tests against Kafka-compatible brokers
// and checks their histories: test (one test: cluster, workload, faults,
// check, report; --replay RUN reruns a stored run exactly, its recorded
// fault schedule included), suite (tests with expected verdicts, `make
// test-jepsen`), matrix (the guarantee matrix, `make test-jepsen-matrix`),
// shrink (the smallest reproduction of an invalid run),
// check (re-check a stored history), report (re-render a stored run), serve
// (browse the store) and agent (the fault agent inside node containers).
// Run `faultline help`, or `faultline <command> --help` for a command's
// flags.
//
// The command holds the table of workloads --workload names
// (workloadRegistry) and maps outcomes onto Jepsen's exit codes: 0 valid, 1
// anomalies found, 2 unknown, 254 bad arguments, 255 internal error. It
// reaches brokers only through the harness, never through broker/... .
package main
