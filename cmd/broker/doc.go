// Command broker runs a faultline broker node: a Kafka-compatible broker that
// real Kafka clients use.
//
//	broker format -t $(broker random-uuid) -c server.properties
//	broker serve -c server.properties
//	broker quorum describe --status --bootstrap-server localhost:9092
//	broker topics --bootstrap-server localhost:9092 --describe
//	broker consumer-groups --bootstrap-server localhost:9092 --describe --group G
//	broker api-versions --bootstrap-server localhost:9092
//	broker log-dirs --bootstrap-server localhost:9092 --describe
//	broker dump-log --files 00000000000000000000.log --deep-iteration
//
// format stamps meta.properties into the log dirs and the metadata dir, as
// kafka-storage.sh format does; serve runs the node (package node) until
// SIGTERM or SIGINT, which start a controlled shutdown; a second SIGINT exits
// at once without the clean-shutdown marker, a second SIGTERM is logged and
// changes nothing (supervisors often send two). Logs go to stderr in Kafka's
// layout. Exit codes: 0 success, 1 failure (each configuration problem on its
// own line, naming the key), 2 bad usage. The other verbs are
// Kafka's tools spoken over the Kafka protocol with franz-go's kadm/kmsg
// (one file each: quorum.go, topics.go, groups.go, apiversions.go,
// logdirs.go; admin.go holds the shared --bootstrap-server handling):
// kafka-metadata-quorum.sh, kafka-topics.sh, kafka-consumer-groups.sh,
// kafka-broker-api-versions.sh and kafka-log-dirs.sh, with their flag names
// and output layouts. dump-log (dumplog.go, over storage.DumpSegment and
// friends) reads segment and index files offline like kafka-dump-log.sh and
// never writes.
//
// The command only parses flags, loads the configuration and hands over to
// package node; it must never hold broker logic of its own.
package main
