package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-v5
//
// Behaviour:
//   - Lists every API key this server registered and whose Backend
//     component is wired, with the version range its file registered.
//   - A version we do not serve is answered by the dispatcher, not here: a
//     v0-format response (no header tags) with UNSUPPORTED_VERSION and the
//     full list, so the client retries at a version we serve (KIP-511).
//     kgo v1.22 opens every connection at v5.
//   - v5 (KIP-1242): a client that names a cluster id or node id that is
//     not ours gets REBOOTSTRAP_REQUIRED; naming only one of the two is
//     INVALID_REQUEST.
//   - The client software name and version (v3+) are accepted as sent.
//   - Feature levels (KIP-584, v3+): transaction.version 0-2 is
//     supported and finalized at Backend.TransactionVersion when the
//     broker has a transaction coordinator and a TxnAdder (KIP-890 part
//     2; clients such as franz-go then add partitions through Produce v12
//     and offsets through TxnOffsetCommit v5, and end transactions with
//     EndTxn v5); nothing is advertised otherwise.
//
// Version notes: v1 ThrottleMillis; v3 flexible, client software fields;
// v5 ClusterID and NodeID in the request.

func init() {
	register(api{key: 18, min: 0, max: 5, handle: handleApiVersions, fail: failApiVersions})
}

func handleApiVersions(s *Server, r *request) (kmsg.Response, error) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := s.apiVersionsResponse()
	if req.Version >= 5 {
		named := req.ClusterID != nil
		switch {
		case named != (req.NodeID >= 0):
			resp.ErrorCode = kerr.InvalidRequest.Code
		case named && (s.backend.NodeID != req.NodeID || (s.clusterID() != "" && *req.ClusterID != s.clusterID())):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
		}
	}
	r.noteError(resp.ErrorCode)
	return resp, nil
}

func failApiVersions(_ kmsg.Request, code int16) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	return resp
}

// apiVersionsResponse lists the served APIs, sorted by key. The list is
// shared between responses, which only read it.
func (s *Server) apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ApiKeys = s.apiKeys
	if level := s.transactionVersion(); level > 0 {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = transactionVersionFeature, 0, 2
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, level, level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = 1
	}
	return resp
}

// transactionVersionFeature is KIP-890's feature name.
const transactionVersionFeature = "transaction.version"

// transactionVersion is the transaction.version level this broker
// finalizes: Backend.TransactionVersion (at most 2) when it coordinates
// transactions and can add partitions to them, else 0.
func (s *Server) transactionVersion() int16 {
	if s.backend.Txns == nil || s.backend.TxnAdder == nil {
		return 0
	}
	return min(max(s.backend.TransactionVersion, 0), 2)
}

// tv2 reports whether transactions run under transaction.version 2.
func (s *Server) tv2() bool { return s.transactionVersion() >= 2 }

// servedApiKeys builds the ApiVersions list of apis.
func servedApiKeys(apis map[int16]*api) []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, k := range sortedKeys(apis) {
		a := apis[k]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = k, a.min, a.max
		if k == 0 {
			// librdkafka (through 2.8) compresses with gzip, snappy and
			// lz4 only when the broker's Produce range starts at v0, so
			// the range is advertised from v0, as Kafka 4 does
			// (KAFKA-18659); v0-v2 requests still get UNSUPPORTED_VERSION.
			ak.MinVersion = 0
		}
		out = append(out, ak)
	}
	return out
}
