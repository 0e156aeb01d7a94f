// Package server is the broker's network layer: it accepts Kafka client
// connections, frames and decodes requests with franz-go's kmsg, dispatches
// them to the rest of the broker through Backend, and writes the responses
// back in request order.
//
// Use:
//
//	srv, err := server.New(server.Options{}, backend, logger, registry)
//	addrs, err := srv.ListenAndServe("0.0.0.0:9092") // or srv.Serve(ln)
//	...
//	err = srv.Shutdown(ctx) // SIGTERM: stop accepting, finish in-flight, close
//
// Each API key lives in its own file (00_produce.go, 01_fetch.go, ...),
// which opens with the versions it serves and its behaviour and registers
// its version range; ApiVersions is built from that registry, leaving out
// the APIs whose Backend component is not wired.
//
// Protocol handling, per connection:
//   - a frame is a 4-byte size and a request; a size above MaxRequestBytes
//     (socket.request.max.bytes) is refused and the connection closed;
//   - requests are decoded in arrival order and handled concurrently
//     (produce and offset commits one at a time, in order); responses are
//     written strictly in request order; acks=0 produce gets no response;
//   - a malformed request, an unknown API key or a version kmsg cannot
//     decode closes only that connection, after the responses to earlier
//     requests; a known key at a version we do not serve is answered with
//     UNSUPPORTED_VERSION (ApiVersions in v0 format, per KIP-511).
//
// The server does I/O and protocol shape only; every decision (leadership,
// acks, offsets, groups, transactions, topic creation) belongs to the
// Backend. The
// partition layer decides in its own types (replica.FetchPartition,
// replica.FetchResult, replica.ProduceResult): the handlers decode kmsg
// into them and encode the answers back, so server imports replica and
// never the other way round. The one check made here is that a Produce
// request's acks is 0, 1 or -1, a property of the whole request answered
// with INVALID_REQUIRED_ACKS on every partition before any is touched.
//
// It must never panic on network input: decoding is bounds-checked, and a
// panic in a handler is recovered, logged as a bug and closes only its
// connection. It must never write a response out of order or answer an
// acks=0 produce.
package server
