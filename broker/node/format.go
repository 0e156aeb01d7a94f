package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/faultline/faultline/broker/config"
	"github.com/faultline/faultline/broker/storage"
)

// FormatOptions are the flags of `broker format`.
type FormatOptions struct {
	// ClusterID is the cluster's id, a 22-character base64url Kafka UUID.
	ClusterID string
	// IgnoreFormatted skips dirs that already hold meta.properties instead of
	// failing.
	IgnoreFormatted bool
	// InitialControllers is the initial quorum (id@host:port[:dir-id],...),
	// as kafka-storage.sh format --initial-controllers. It must agree with
	// controller.quorum.voters when that is set.
	InitialControllers string
	// Standalone formats this node as the only voter of a new quorum.
	Standalone bool
}

// dataDirs returns the log dirs and the metadata dir, without duplicates, in
// the order they are configured.
func dataDirs(cfg *config.Config) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range append(append([]string{}, cfg.LogDirs...), cfg.MetadataLogDir) {
		if d == "" || seen[filepath.Clean(d)] {
			continue
		}
		seen[filepath.Clean(d)] = true
		out = append(out, d)
	}
	return out
}

// Format stamps meta.properties (version, cluster.id, node.id, a new
// directory.id) into every log dir and the metadata dir, creating them as
// needed, as kafka-storage.sh format does. It refuses an already formatted
// dir unless opts.IgnoreFormatted. It returns one line per dir saying what it
// did.
func Format(cfg *config.Config, opts FormatOptions) ([]string, error) {
	if _, err := ParseUUID(opts.ClusterID); err != nil {
		return nil, fmt.Errorf("cluster id: %w", err)
	}
	if err := checkInitialControllers(cfg, opts); err != nil {
		return nil, err
	}
	dirs := dataDirs(cfg)
	var todo []string
	var lines []string
	for _, d := range dirs {
		mp, err := storage.ReadMetaProperties(storage.OS, d)
		switch {
		case err == nil && !opts.IgnoreFormatted:
			return nil, fmt.Errorf("log directory %s is already formatted (cluster.id %s, node.id %d); use --ignore-formatted to skip it and format the others", d, mp.ClusterID, mp.NodeID)
		case err == nil && (mp.ClusterID != opts.ClusterID || mp.NodeID != cfg.NodeID):
			return nil, fmt.Errorf("log directory %s is already formatted for cluster.id %s and node.id %d, not %s and %d", d, mp.ClusterID, mp.NodeID, opts.ClusterID, cfg.NodeID)
		case err == nil:
			lines = append(lines, fmt.Sprintf("Skipping %s: already formatted.", d))
		case errors.Is(err, os.ErrNotExist):
			todo = append(todo, d)
		default:
			return nil, fmt.Errorf("check %s: %w", d, err)
		}
	}
	if len(todo) == 0 {
		return append(lines, "All of the log directories are already formatted."), nil
	}
	for _, d := range todo {
		if err := storage.FormatLogDir(storage.OS, d, opts.ClusterID, cfg.NodeID, false); err != nil {
			return nil, err
		}
		what := "data"
		if filepath.Clean(d) == filepath.Clean(cfg.MetadataLogDir) {
			what = "metadata"
			if containsDir(cfg.LogDirs, d) {
				what = "data and metadata"
			}
		}
		lines = append(lines, fmt.Sprintf("Formatting %s directory %s with cluster.id %s and node.id %d.", what, d, opts.ClusterID, cfg.NodeID))
	}
	return lines, nil
}

// checkInitialControllers validates --initial-controllers and --standalone
// against the configuration.
func checkInitialControllers(cfg *config.Config, opts FormatOptions) error {
	if opts.Standalone && opts.InitialControllers != "" {
		return errors.New("--standalone and --initial-controllers cannot be used together")
	}
	if opts.Standalone {
		if !cfg.IsController() {
			return errors.New("--standalone needs a node whose process.roles includes controller")
		}
		if len(cfg.ControllerQuorumVoters) > 1 {
			return fmt.Errorf("--standalone: controller.quorum.voters lists %d voters; a standalone quorum has one", len(cfg.ControllerQuorumVoters))
		}
		return nil
	}
	if opts.InitialControllers == "" {
		return nil
	}
	ids := map[int32]string{}
	for _, entry := range strings.Split(opts.InitialControllers, ",") {
		entry = strings.TrimSpace(entry)
		idText, rest, ok := strings.Cut(entry, "@")
		id, err := strconv.ParseInt(idText, 10, 32)
		if !ok || err != nil || id < 0 || rest == "" {
			return fmt.Errorf("--initial-controllers: %q is not id@host:port[:directory-id]", entry)
		}
		// host:port[:dir-id]; a directory id is 22 characters of base64url.
		if i := strings.LastIndexByte(rest, ':'); i > 0 && len(rest)-i-1 == 22 {
			if _, err := ParseUUID(rest[i+1:]); err == nil {
				rest = rest[:i]
			}
		}
		if _, ok := ids[int32(id)]; ok {
			return fmt.Errorf("--initial-controllers: controller %d is listed twice", id)
		}
		ids[int32(id)] = rest
	}
	if cfg.IsController() {
		if _, ok := ids[cfg.NodeID]; !ok {
			return fmt.Errorf("--initial-controllers does not list this controller's node.id %d", cfg.NodeID)
		}
	}
	for _, v := range cfg.ControllerQuorumVoters {
		addr, ok := ids[v.ID]
		if !ok || addr != v.Address() {
			return fmt.Errorf("--initial-controllers disagrees with controller.quorum.voters on voter %d (%s)", v.ID, v.Address())
		}
	}
	if n := len(cfg.ControllerQuorumVoters); n > 0 && n != len(ids) {
		return fmt.Errorf("--initial-controllers lists %d controllers, controller.quorum.voters %d", len(ids), n)
	}
	return nil
}

// checkFormatted verifies that every data dir is formatted for this node and
// one cluster, and returns the cluster id.
func checkFormatted(cfg *config.Config) (string, error) {
	clusterID := ""
	clusterDir := ""
	for _, d := range dataDirs(cfg) {
		mp, err := storage.ReadMetaProperties(storage.OS, d)
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no meta.properties found in %s: format the storage first with `broker format -t <cluster-id> -c <server.properties>`", d)
		}
		if err != nil {
			return "", err
		}
		if _, err := ParseUUID(mp.ClusterID); err != nil {
			return "", fmt.Errorf("%s: cluster.id: %w", filepath.Join(d, storage.MetaPropertiesFile), err)
		}
		if mp.NodeID != cfg.NodeID {
			return "", fmt.Errorf("stored node id %d in %s does not match node.id %d of the configuration", mp.NodeID, d, cfg.NodeID)
		}
		if clusterID != "" && mp.ClusterID != clusterID {
			return "", fmt.Errorf("cluster id mismatch: %s belongs to cluster %s but %s to cluster %s", d, mp.ClusterID, clusterDir, clusterID)
		}
		clusterID, clusterDir = mp.ClusterID, d
	}
	return clusterID, nil
}
