// Package profile describes, as data, how a Kafka-compatible broker is put
// into a faultline node and driven: Jepsen's DB protocol (setup, start,
// kill, pause, logs, primaries) as a file a user writes instead of Go.
//
// A profile (YAML) names the executables or directories to put into the
// node's FROM scratch image, the files to render per node (a config
// template), the one-time format command, the start command, the signals
// that stop, kill and pause the broker, where its data lives, how many nodes
// and which topologies it supports, and whether the active controller can
// be found through the Kafka protocol (Metadata's controller id / KRaft's
// DescribeQuorum) for `kill:controller`. Readiness is always checked through
// the Kafka protocol (ApiVersions and Metadata with franz-go), never by
// scraping logs.
//
// Commands and files are Go text/templates over NodeData: the node's id,
// name, roles, addresses, the voters string, the data and config dirs, the
// cluster id and the merged broker properties (the harness's defaults for a
// Kafka-style cluster, the test's durability settings and --broker-config
// overrides). {{bin "name"}} is where the named binary is inside the node.
//
// Built-in profiles (builtin/*.yaml, embedded): faultline (the reference
// broker, the default), kfake (franz-go's in-memory kfake cluster wrapped in
// bin/kfake) and apache-kafka (Kafka 4.x in KRaft mode from a distribution
// and a JRE the user points at). Load validates a profile up front; every
// error names the field.
package profile
