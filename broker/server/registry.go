package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const apiKeyApiVersions int16 = 18

// needs names the Backend components an API cannot be served without. An
// API whose component is missing is neither advertised in ApiVersions nor
// served (a request for it is treated like an unknown key), so a partly
// wired broker degrades the way clients expect: for example without
// InitProducerId kgo produces without idempotence.
type needs uint16

const (
	needMetadata needs = 1 << iota
	needController
	needReplicas
	needGroups
	needControllerAPIs
	needConfigs
	// needQuorum: DescribeQuorum, served by ControllerAPIs on a controller
	// listener or forwarded by a Controller that is a QuorumDescriber on a
	// broker listener (as Kafka's brokers forward it to the controllers).
	needQuorum
	needLogDirs
	needTxns
	needTxnMarkers
	needTxnOffsets
	needProducers
)

// handlerFunc serves one decoded request. It returns the response (its
// version is set by the dispatcher), nil for "send nothing" (acks=0
// produce), or an error to close the connection.
type handlerFunc func(s *Server, r *request) (kmsg.Response, error)

// failFunc builds a response of the request's shape with every error field
// set to code; it answers requests at versions we do not serve.
type failFunc func(req kmsg.Request, code int16) kmsg.Response

// api is one registered API key.
type api struct {
	key      int16
	name     string
	min, max int16
	// serial requests run on the connection's reader, one after another in
	// arrival order, and the connection is not read further meanwhile
	// (produce: an idempotent producer pipelines up to five requests and
	// their appends must not be reordered). Others run concurrently.
	serial bool
	needs  needs
	handle handlerFunc
	fail   failFunc
}

// registry holds every API this package implements, filled by the init
// functions of the per-key files.
var registry = map[int16]*api{}

func register(a api) {
	if _, dup := registry[a.key]; dup {
		panic(fmt.Sprintf("server: api key %d registered twice", a.key))
	}
	if a.min > a.max || a.handle == nil || a.fail == nil {
		panic(fmt.Sprintf("server: api key %d registered incompletely", a.key))
	}
	a.name = kmsg.NameForKey(a.key)
	registry[a.key] = &a
}

// available returns the registered APIs this backend can serve, by key.
func available(b *Backend) map[int16]*api {
	out := make(map[int16]*api, len(registry))
	for k, a := range registry {
		if a.needs&needMetadata != 0 && b.Metadata == nil ||
			a.needs&needController != 0 && b.Controller == nil ||
			a.needs&needReplicas != 0 && b.Replicas == nil ||
			a.needs&needGroups != 0 && b.Groups == nil ||
			a.needs&needControllerAPIs != 0 && b.ControllerAPIs == nil ||
			a.needs&needConfigs != 0 && b.Configs == nil ||
			a.needs&needQuorum != 0 && b.quorumDescriber() == nil ||
			a.needs&needLogDirs != 0 && b.LogDirs == nil ||
			a.needs&needTxns != 0 && b.Txns == nil ||
			a.needs&needTxnMarkers != 0 && b.TxnMarkers == nil ||
			a.needs&needTxnOffsets != 0 && txnOffsets(b) == nil ||
			a.needs&needProducers != 0 && producerStates(b) == nil {
			continue
		}
		out[k] = a
	}
	return out
}

// sortedKeys returns the keys of apis in ascending order.
func sortedKeys(apis map[int16]*api) []int16 {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// request is one decoded request on its way through a handler.
type request struct {
	ctx    context.Context
	header requestHeader
	api    *api
	kreq   kmsg.Request
	// answer is set when the response is known without running the
	// handler (a version we do not serve).
	answer kmsg.Response
	remote string
	// errors collects the error codes the handler put into the response,
	// for the error metric.
	errors []int16
}

func (r *request) clientID() string {
	if r.header.clientID == nil {
		return ""
	}
	return *r.header.clientID
}

func (r *request) noteError(code int16) {
	if code != 0 {
		r.errors = append(r.errors, code)
	}
}

// decodeRequest turns a frame into a request. An error means the frame
// cannot be answered and the connection must be closed: a malformed
// header or body, an unknown API key (Kafka closes the connection too:
// the client cannot know what a response would look like), or a version
// beyond what kmsg can decode. ApiVersions at a version we do not serve is
// answered in v0 format with UNSUPPORTED_VERSION and our ranges (KIP-511),
// other keys at a version we do not serve get their response shape with
// UNSUPPORTED_VERSION everywhere.
func (s *Server) decodeRequest(frame []byte) (*request, error) {
	h, body, err := parseRequestHeader(frame)
	if err != nil {
		return nil, fmt.Errorf("request header: %w", err)
	}
	r := &request{header: h}
	a := s.apis[h.key]
	if a == nil {
		return r, fmt.Errorf("unknown or unserved api key %d (version %d)", h.key, h.version)
	}
	r.api = a
	if h.key == apiKeyApiVersions && (h.version < a.min || h.version > a.max) {
		resp := s.apiVersionsResponse()
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		r.answer = resp
		r.noteError(resp.ErrorCode)
		return r, nil
	}
	kreq := kmsg.RequestForKey(h.key)
	if kreq == nil || h.version < 0 || h.version > kreq.MaxVersion() {
		return r, fmt.Errorf("%s version %d cannot be decoded", a.name, h.version)
	}
	kreq.SetVersion(h.version)
	if kreq.IsFlexible() {
		if body, err = skipTags(body); err != nil {
			return r, fmt.Errorf("%s v%d header tags: %w", a.name, h.version, err)
		}
	}
	// ReadFrom copies strings (UnsafeReadFrom would alias them to the
	// frame, and a backend keeping a topic or group name would then keep
	// the whole frame alive). Byte fields such as produced records still
	// alias the frame, which is never reused.
	if err = kreq.ReadFrom(body); err != nil {
		return r, fmt.Errorf("%s v%d body: %w", a.name, h.version, err)
	}
	r.kreq = kreq
	if h.version < a.min || h.version > a.max {
		if p, ok := kreq.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			return r, fmt.Errorf("acks=0 %s at unserved version %d", a.name, h.version)
		}
		r.answer = a.fail(kreq, kerr.UnsupportedVersion.Code)
		r.answer.SetVersion(h.version)
		r.noteError(kerr.UnsupportedVersion.Code)
	}
	return r, nil
}

// serveRequest runs the handler (unless the answer is already known) and
// returns the response with its version set, nil for no response, or an
// error to close the connection. A panic in a handler is a bug: it is
// logged with its stack and closes only this connection.
func (s *Server) serveRequest(r *request) (resp kmsg.Response, err error) {
	if r.answer != nil {
		return r.answer, nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = s.bug(p, fmt.Sprintf("handling %s v%d from %s (client id %q)", r.api.name, r.header.version, r.remote, r.clientID()))
		}
	}()
	resp, err = r.api.handle(s, r)
	if err != nil || resp == nil {
		return nil, err
	}
	resp.SetVersion(r.header.version)
	return resp, nil
}

// txnOffsets is the group coordinator's transactional offset commits, nil
// when the wired Groups does not take them.
func producerStates(b *Backend) ProducerStates {
	p, _ := b.Replicas.(ProducerStates)
	return p
}

func txnOffsets(b *Backend) TxnOffsets {
	t, _ := b.Groups.(TxnOffsets)
	return t
}

// withTimeoutMs bounds ctx by a request's TimeoutMillis (none when it is
// not positive).
func withTimeoutMs(ctx context.Context, ms int32) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}
