package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestHeaderBytesMin is the smallest request header: api key (2), api
// version (2), correlation id (4). The client id follows.
const requestHeaderBytesMin = 8

// frameBytesMin is the smallest frame worth decoding: a header with a null
// client id.
const frameBytesMin = requestHeaderBytesMin + 2

var (
	errFrameTooLarge = errors.New("frame larger than socket.request.max.bytes")
	errFrameTooSmall = errors.New("frame smaller than a request header")
)

// requestHeader is a decoded request header (v1, or v2 for flexible
// requests). The client id is a classic nullable string in both: KIP-482
// kept it non-compact so that any broker can read it.
type requestHeader struct {
	key           int16
	version       int16
	correlationID int32
	clientID      *string
}

// readFrame reads one size-prefixed frame. A frame larger than maxBytes is
// refused before its body is read, so a hostile size cannot make us
// allocate; the caller closes the connection.
func readFrame(r io.Reader, sizeBuf *[4]byte, maxBytes int32) ([]byte, int32, error) {
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return nil, 0, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 || size > maxBytes {
		return nil, size, errFrameTooLarge
	}
	if size < frameBytesMin {
		return nil, size, errFrameTooSmall
	}
	if size <= frameEagerBytesMax {
		frame := make([]byte, size)
		if _, err := io.ReadFull(r, frame); err != nil {
			return nil, size, err
		}
		return frame, size, nil
	}
	// A large frame's memory is taken as its bytes arrive, so a client that
	// announces 100 MB and sends nothing holds no more than a small one.
	var buf bytes.Buffer
	buf.Grow(frameEagerBytesMax)
	n, err := io.CopyN(&buf, r, int64(size))
	if err != nil {
		if n < int64(size) && errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, size, err
	}
	return buf.Bytes(), size, nil
}

// frameEagerBytesMax is the largest frame whose buffer is allocated before
// its bytes arrive.
const frameEagerBytesMax = 1 << 20

// parseRequestHeader decodes the fixed part of the header and the client id
// and returns the rest of the frame. The tag buffer of flexible requests is
// not consumed here: whether there is one depends on the key and version,
// which the caller checks first.
func parseRequestHeader(frame []byte) (requestHeader, []byte, error) {
	var h requestHeader
	if len(frame) < frameBytesMin {
		return h, nil, errFrameTooSmall
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[requestHeaderBytesMin:]
	n := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case n == -1:
	case n < -1 || int(n) > len(rest):
		return h, nil, fmt.Errorf("client id length %d with %d bytes left", n, len(rest))
	default:
		id := string(rest[:n])
		h.clientID = &id
		rest = rest[n:]
	}
	return h, rest, nil
}

// skipTags consumes a tag buffer (KIP-482): an unsigned varint count, then
// per tag an unsigned varint tag and a length-prefixed value. The request
// header defines no tags we need, so they are skipped.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[n:]
	if count > uint64(len(b)) {
		return nil, fmt.Errorf("tag count %d with %d bytes left", count, len(b))
	}
	for range count {
		if _, n = binary.Uvarint(b); n <= 0 {
			return nil, errors.New("bad tag id")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("bad tag size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// appendResponse appends a whole response frame: size, correlation id, the
// header tag buffer when the response is flexible (never for ApiVersions,
// whose response header stays v0 so that a client that sent a version we
// do not know can still read it), then the body.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != apiKeyApiVersions {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
