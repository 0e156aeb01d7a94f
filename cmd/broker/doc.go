// Command broker runs a faultline broker node: a Kafka-compatible broker that
// real Kafka clients use.
//
//	broker format -t $(broker random-uuid) -c server.properties
//	broker serve -c server.properties
//	broker quorum describe --status -c server.properties
//
// format stamps meta.properties into the log dirs and the metadata dir, as
// kafka-storage.sh format does; serve runs the node (package node) until
// SIGTERM or SIGINT, which start a controlled shutdown; a second SIGINT exits
// at once without the clean-shutdown marker, a second SIGTERM is logged and
// changes nothing (supervisors often send two). Logs go to stderr in Kafka's
// layout. Exit codes: 0 success, 1 failure (each configuration problem on its
// own line, naming the key), 2 bad usage. quorum describe sends
// DescribeQuorum to the controllers the configuration names and prints the
// quorum leader's answer as kafka-metadata-quorum.sh does.
//
// The command only parses flags, loads the configuration and hands over to
// package node; it must never hold broker logic of its own.
package main
