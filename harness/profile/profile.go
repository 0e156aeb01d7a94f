package profile

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// Profile is one broker's description; see the package doc and
// builtin/faultline.yaml for a commented example.
type Profile struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Binaries are the executables (or directories, copied whole) to put
	// into the node, by name: the value is a host path, absolute or
	// relative to the profile file, and may use ${VAR} environment
	// variables (FAULTLINE_BROKER_BINARY is --broker-binary). In the node
	// a binary named x is at /x ({{bin "x"}}).
	Binaries map[string]string `yaml:"binaries"`
	// Files are rendered per node into the node's config dir, by name.
	Files map[string]string `yaml:"files"`
	// Format is run once per node before its first start (optional).
	Format []string `yaml:"format"`
	// Start runs the broker in the foreground; its output is the node's
	// broker.log.
	Start   []string `yaml:"start"`
	Signals Signals  `yaml:"signals"`
	// MaxNodes bounds --nodes (0: 9, the harness's limit).
	MaxNodes int `yaml:"max_nodes"`
	// Topologies the broker supports: combined, split (default combined
	// and split).
	Topologies []string `yaml:"topologies"`
	// Controller says how the active controller is found: "metadata" (the
	// controller id of Metadata responses, as KRaft brokers report it) or
	// "none" (kill:controller and partition:controller are refused).
	Controller string `yaml:"controller"`
	// Properties are defaults merged under the harness's (a profile can
	// drop a key with an empty value).
	Properties map[string]string `yaml:"properties"`
	// Durable is false for a broker that keeps nothing across a restart
	// (kfake): the docs and the kfake suite expect loss under kill.
	Durable *bool `yaml:"durable"`

	// Dir is the directory relative binary paths are resolved against
	// (the profile file's; the working directory for built-ins).
	Dir string `yaml:"-"`
}

// Signals name the signals (TERM, KILL, STOP, CONT, INT, ...).
type Signals struct {
	Stop   string `yaml:"stop"`
	Kill   string `yaml:"kill"`
	Pause  string `yaml:"pause"`
	Resume string `yaml:"resume"`
}

// NodeData is what templates see.
type NodeData struct {
	NodeID         int
	Name           string
	Roles          string // "broker,controller", "broker" or "controller"
	Broker         bool
	Controller     bool
	Host           string // the address the others and the clients reach
	Bind           string // the address to listen on
	ClientPort     int
	ControllerPort int
	Voters         string // id@host:port,... of the controllers
	Bootstrap      string // host:port,... of the controllers
	DataDir        string // the node's data dir (on the fault filesystem with disk faults)
	ConfigDir      string // where Files are written
	ClusterID      string
	Nodes          int
	// Properties are the merged broker properties; PropertiesText is them
	// as a sorted server.properties.
	Properties map[string]string
}

// PropertiesText renders Properties as a server.properties, sorted.
func (d NodeData) PropertiesText() string {
	keys := make([]string, 0, len(d.Properties))
	for k := range d.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "# server.properties for %s, written by faultline\n", d.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, d.Properties[k])
	}
	return b.String()
}

var knownSignals = map[string]bool{"TERM": true, "KILL": true, "STOP": true, "CONT": true, "INT": true, "HUP": true, "QUIT": true, "USR1": true, "USR2": true, "TSTP": true}

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Builtin lists the built-in profiles' names, sorted.
func Builtin() []string {
	ents, _ := builtinFS.ReadDir("builtin")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Default is the built-in faultline profile (the reference broker), parsed
// once; callers must not modify it.
var Default = sync.OnceValue(func() *Profile {
	b, err := builtinFS.ReadFile("builtin/faultline.yaml")
	if err == nil {
		var p *Profile
		if p, err = Parse(b, ""); err == nil {
			return p
		}
	}
	panic("the built-in faultline profile does not load: " + err.Error())
})

// Load returns the built-in profile called nameOrPath, or reads the file
// at that path; either way validated.
func Load(nameOrPath string) (*Profile, error) {
	if nameOrPath == "" {
		nameOrPath = "faultline"
	}
	if b, err := builtinFS.ReadFile("builtin/" + nameOrPath + ".yaml"); err == nil && !strings.ContainsAny(nameOrPath, "/.") {
		return Parse(b, "")
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("--db %q: neither a built-in profile (%s) nor a file", nameOrPath, strings.Join(Builtin(), ", "))
		}
		return nil, fmt.Errorf("--db: %w", err)
	}
	p, err := Parse(b, filepath.Dir(nameOrPath))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", nameOrPath, err)
	}
	return p, nil
}

// Parse decodes and validates a profile; dir resolves relative binaries.
// Unknown fields are errors (a typo must not be silently ignored).
func Parse(b []byte, dir string) (*Profile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var p Profile
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p.Dir = dir
	p.defaults()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Profile) defaults() {
	if p.Signals.Stop == "" {
		p.Signals.Stop = "TERM"
	}
	if p.Signals.Kill == "" {
		p.Signals.Kill = "KILL"
	}
	if p.Signals.Pause == "" {
		p.Signals.Pause = "STOP"
	}
	if p.Signals.Resume == "" {
		p.Signals.Resume = "CONT"
	}
	if len(p.Topologies) == 0 {
		p.Topologies = []string{"combined", "split"}
	}
	if p.Controller == "" {
		p.Controller = "metadata"
	}
	if p.MaxNodes == 0 {
		p.MaxNodes = 9
	}
}

// IsDurable reports whether the broker claims to keep acknowledged data
// across a restart (default true).
func (p *Profile) IsDurable() bool { return p.Durable == nil || *p.Durable }

// Validate checks every field; the error names each bad field, one per
// line.
func (p *Profile) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("profile field %s: "+format, append([]any{field}, args...)...))
	}
	if p.Name == "" {
		bad("name", "missing")
	}
	if len(p.Start) == 0 {
		bad("start", "missing: the command that runs the broker")
	}
	for name := range p.Binaries {
		if name == "" || strings.ContainsAny(name, "/ ") || name == "faultline" {
			bad("binaries", "%q: a binary's name is one path element, not \"faultline\" (the agent's)", name)
		}
		if p.Binaries[name] == "" {
			bad("binaries."+name, "empty path")
		}
	}
	for name := range p.Files {
		if name == "" || strings.Contains(name, "/") {
			bad("files", "%q: a file's name is one path element", name)
		}
	}
	for field, sig := range map[string]string{"signals.stop": p.Signals.Stop, "signals.kill": p.Signals.Kill, "signals.pause": p.Signals.Pause, "signals.resume": p.Signals.Resume} {
		if !knownSignals[strings.TrimPrefix(strings.ToUpper(sig), "SIG")] {
			bad(field, "unknown signal %q (want TERM, KILL, STOP, CONT, INT, HUP, QUIT, USR1, USR2 or TSTP)", sig)
		}
	}
	for _, t := range p.Topologies {
		if t != "combined" && t != "split" {
			bad("topologies", "%q: want combined or split", t)
		}
	}
	if p.Controller != "metadata" && p.Controller != "none" {
		bad("controller", "%q: want metadata or none", p.Controller)
	}
	if p.MaxNodes < 1 || p.MaxNodes > 9 {
		bad("max_nodes", "%d: want 1 to 9", p.MaxNodes)
	}
	// Every template must parse, and render against a sample node.
	sample := NodeData{NodeID: 1, Name: "n1", Roles: "broker,controller", Broker: true, Controller: true, Host: "h", Bind: "0.0.0.0",
		ClientPort: 9092, ControllerPort: 9093, Voters: "1@h:9093", Bootstrap: "h:9093", DataDir: "/data", ConfigDir: "/etc/faultline", ClusterID: "c", Nodes: 1,
		Properties: map[string]string{}}
	for i, a := range p.Format {
		if _, err := p.render(a, sample, nil); err != nil {
			bad(fmt.Sprintf("format[%d]", i), "%v", err)
		}
	}
	for i, a := range p.Start {
		if _, err := p.render(a, sample, nil); err != nil {
			bad(fmt.Sprintf("start[%d]", i), "%v", err)
		}
	}
	for name, f := range p.Files {
		if _, err := p.render(f, sample, nil); err != nil {
			bad("files."+name, "%v", err)
		}
	}
	return errors.Join(errs...)
}

// SignalName is sig upper-cased without SIG.
func SignalName(sig string) string { return strings.TrimPrefix(strings.ToUpper(sig), "SIG") }

// BinPath maps a binary's name to its path in the node.
type BinPath func(name string) string

// InImage is where the Docker runtime puts binaries: /name.
func InImage(name string) string { return "/" + name }

func (p *Profile) render(text string, d NodeData, bin BinPath) (string, error) {
	if bin == nil {
		bin = InImage
	}
	tmpl, err := template.New("").Option("missingkey=error").Funcs(template.FuncMap{
		"bin": func(name string) (string, error) {
			if _, ok := p.Binaries[name]; !ok {
				return "", fmt.Errorf("bin %q: not in binaries", name)
			}
			return bin(name), nil
		},
	}).Parse(text)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Rendered is one node's commands and files.
type Rendered struct {
	Format []string
	Start  []string
	Files  map[string][]byte // name -> content (in ConfigDir)
}

// Render renders node d's commands and files; bin places binaries (nil:
// the Docker image's /name).
func (p *Profile) Render(d NodeData, bin BinPath) (Rendered, error) {
	var r Rendered
	for _, a := range p.Format {
		s, err := p.render(a, d, bin)
		if err != nil {
			return r, fmt.Errorf("profile %s: format: %w", p.Name, err)
		}
		r.Format = append(r.Format, s)
	}
	for _, a := range p.Start {
		s, err := p.render(a, d, bin)
		if err != nil {
			return r, fmt.Errorf("profile %s: start: %w", p.Name, err)
		}
		r.Start = append(r.Start, s)
	}
	r.Files = map[string][]byte{}
	for name, f := range p.Files {
		s, err := p.render(f, d, bin)
		if err != nil {
			return r, fmt.Errorf("profile %s: files.%s: %w", p.Name, name, err)
		}
		r.Files[name] = []byte(s)
	}
	return r, nil
}

// BinaryPaths resolves each binary's host path (environment variables
// expanded, relative paths against the profile's dir); env adds variables
// (FAULTLINE_BROKER_BINARY) before the process environment.
func (p *Profile) BinaryPaths(env map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for name, raw := range p.Binaries {
		path := os.Expand(raw, func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return os.Getenv(k)
		})
		if path == "" {
			return nil, fmt.Errorf("profile %s: binaries.%s: %q expands to nothing (set the variable)", p.Name, name, raw)
		}
		if !filepath.IsAbs(path) && p.Dir != "" {
			path = filepath.Join(p.Dir, path)
		}
		out[name] = path
	}
	return out, nil
}

// SupportsTopology reports whether the broker runs topology t.
func (p *Profile) SupportsTopology(t string) bool {
	if t == "" {
		t = "combined"
	}
	for _, s := range p.Topologies {
		if s == t {
			return true
		}
	}
	return false
}

// MergeProperties returns base with the profile's properties laid over it,
// each value rendered for node d; an empty value removes the key.
func (p *Profile) MergeProperties(base map[string]string, d NodeData) (map[string]string, error) {
	out := make(map[string]string, len(base)+len(p.Properties))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range p.Properties {
		r, err := p.render(v, d, nil)
		if err != nil {
			return nil, fmt.Errorf("profile %s: properties.%s: %w", p.Name, k, err)
		}
		if r == "" {
			delete(out, k)
			continue
		}
		out[k] = r
	}
	return out, nil
}
