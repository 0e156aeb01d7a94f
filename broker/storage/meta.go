package storage

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// MetaPropertiesFile is the name of a log dir's identity file.
const MetaPropertiesFile = "meta.properties"

// MetaProperties is the content of meta.properties (KRaft, version 1).
type MetaProperties struct {
	Version     int
	ClusterID   string
	NodeID      int32
	DirectoryID string // optional; base64url Uuid
}

// NewUUID returns a random Kafka Uuid in its string form (22 characters of
// URL-safe base64 without padding), as used for cluster and directory ids.
func NewUUID() string {
	var b [16]byte
	for {
		// crypto/rand.Read never fails since Go 1.24 (it aborts instead).
		_, _ = rand.Read(b[:])
		// Kafka reserves the zero Uuid and the one-Uuid; ids that start
		// with '-' confuse command lines, so Kafka rerolls them too.
		s := base64.RawURLEncoding.EncodeToString(b[:])
		if !strings.HasPrefix(s, "-") && s != "AAAAAAAAAAAAAAAAAAAAAA" && s != "AAAAAAAAAAAAAAAAAAAAAQ" {
			return s
		}
	}
}

// ParseMetaProperties parses Java properties text with the keys of a KRaft
// meta.properties. It requires version=1, cluster.id and node.id.
func ParseMetaProperties(data []byte) (MetaProperties, error) {
	var mp MetaProperties
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			return mp, fmt.Errorf("%w: meta.properties line %q has no '='", ErrCorruptCheckpoint, line)
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return mp, fmt.Errorf("%w: meta.properties: %v", ErrCorruptCheckpoint, err)
	}
	v, err := strconv.Atoi(props["version"])
	if err != nil {
		return mp, fmt.Errorf("%w: meta.properties version %q", ErrCorruptCheckpoint, props["version"])
	}
	if v != 1 {
		return mp, fmt.Errorf("%w: meta.properties version %d; only version 1 (KRaft) is supported", ErrCorruptCheckpoint, v)
	}
	mp.Version = v
	mp.ClusterID = props["cluster.id"]
	if mp.ClusterID == "" {
		return mp, fmt.Errorf("%w: meta.properties has no cluster.id", ErrCorruptCheckpoint)
	}
	id, err := strconv.ParseInt(props["node.id"], 10, 32)
	if err != nil || id < 0 {
		return mp, fmt.Errorf("%w: meta.properties node.id %q", ErrCorruptCheckpoint, props["node.id"])
	}
	mp.NodeID = int32(id)
	mp.DirectoryID = props["directory.id"]
	return mp, nil
}

// Format renders meta.properties as Kafka writes it: a comment header, then
// the keys in order.
func (mp MetaProperties) Format() []byte {
	props := map[string]string{
		"version":    strconv.Itoa(mp.Version),
		"cluster.id": mp.ClusterID,
		"node.id":    strconv.Itoa(int(mp.NodeID)),
	}
	if mp.DirectoryID != "" {
		props["directory.id"] = mp.DirectoryID
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("#\n#Written by faultline\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.Bytes()
}

// ReadMetaProperties reads dir/meta.properties. A missing file is an error
// wrapping os.ErrNotExist (an unformatted dir).
func ReadMetaProperties(fs FS, dir string) (MetaProperties, error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	data, err := readFile(fs, path)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("read %s: %w", path, err)
	}
	mp, err := ParseMetaProperties(data)
	if err != nil {
		return mp, fmt.Errorf("%s: %w", path, err)
	}
	return mp, nil
}

// WriteMetaProperties writes dir/meta.properties atomically.
func WriteMetaProperties(fs FS, dir string, mp MetaProperties) error {
	return writeFileAtomic(fs, filepath.Join(dir, MetaPropertiesFile), mp.Format())
}

// FormatLogDir prepares a log dir as `kafka-storage format` does: it creates
// the dir and writes meta.properties with a fresh directory id. A dir that
// already has meta.properties is refused unless ignoreFormatted, in which case
// it is left as it is (and an error is still returned when its cluster id or
// node id differ).
func FormatLogDir(fs FS, dir string, clusterID string, nodeID int32, ignoreFormatted bool) error {
	if clusterID == "" {
		return fmt.Errorf("format %s: cluster id is empty (pass -t CLUSTER_ID)", dir)
	}
	if old, err := ReadMetaProperties(fs, dir); err == nil {
		if !ignoreFormatted {
			return fmt.Errorf("format %s: log directory is already formatted (cluster.id=%s, node.id=%d); use --ignore-formatted to skip it", dir, old.ClusterID, old.NodeID)
		}
		if old.ClusterID != clusterID || old.NodeID != nodeID {
			return fmt.Errorf("format %s: already formatted for cluster.id=%s node.id=%d, not %s/%d", dir, old.ClusterID, old.NodeID, clusterID, nodeID)
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	return WriteMetaProperties(fs, dir, MetaProperties{Version: 1, ClusterID: clusterID, NodeID: nodeID, DirectoryID: NewUUID()})
}
