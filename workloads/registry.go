package workloads

import (
	"fmt"
	"sort"
	"strings"
)

// New builds one run's instance of a workload against a serving cluster.
type New func(Options) (Workload, error)

// Registry maps the names `faultline test --workload` accepts onto their
// workloads. The command fills it; the harness looks Test.Workload up in it.
type Registry map[string]New

// Names returns the registered names, sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the workload registered as name, or an error naming the
// registered ones.
func (r Registry) Lookup(name string) (New, error) {
	if n, ok := r[name]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(r.Names(), ", "))
}
