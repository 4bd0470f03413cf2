// Package pools names the node pool of each GPU as the operator has it:
// from a series label (a relabel rule that adds one), from a host map
// (host name or glob pattern → pool), or from the facts of the scheduler or
// the API server (Slurm partitions, Kubernetes node labels read by
// kube.Nodes), in that order. Without any of them a pool is the GPU model
// and the node group, read from the host name (its prefix before the
// trailing number), and the plan says so: a model alone would merge
// unrelated node groups, whose work must not be packed together.
package pools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Hosts names the pool of hosts from facts an owner keeps: a scheduler's
// partitions, an API server's node labels.
type Hosts interface {
	// Pools returns the pool of each host it knows among hosts.
	Pools(ctx context.Context, hosts []string) (map[string]string, error)
	// Describe says where the pools come from ("Kubernetes node label
	// eks.amazonaws.com/nodegroup").
	Describe() string
}

// Rule maps hosts whose name matches Host (a name, or a glob pattern of
// path.Match: `gpu-a-*`) to Pool.
type Rule struct {
	Host string `yaml:"host"`
	Pool string `yaml:"pool"`
}

// Map is a host map: the first rule that matches a host names its pool.
type Map []Rule

// maxMapBytes bounds a host map file.
const maxMapBytes = 1 << 20

// LoadMap reads a host map file: YAML, a list of {host, pool}. Errors name
// the line.
func LoadMap(file string) (Map, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read host map: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMapBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read host map %s: %w", file, err)
	}
	if len(data) > maxMapBytes {
		return nil, fmt.Errorf("host map %s: larger than %d bytes", file, maxMapBytes)
	}
	return ParseMap(file, data)
}

// ParseMap decodes a host map strictly; name is used in errors.
func ParseMap(name string, data []byte) (Map, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Map
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("host map %s: %w", name, err)
	}
	for i, r := range m {
		if r.Host == "" || r.Pool == "" {
			return nil, fmt.Errorf("host map %s: rule %d: host and pool must both be set", name, i+1)
		}
		if _, err := path.Match(r.Host, ""); err != nil {
			return nil, fmt.Errorf("host map %s: rule %d: pattern %q: %w", name, i+1, r.Host, err)
		}
	}
	return m, nil
}

// Pool returns the pool of host and whether a rule matched.
func (m Map) Pool(host string) (string, bool) {
	for _, r := range m {
		if ok, _ := path.Match(r.Host, host); ok {
			return r.Pool, true
		}
	}
	return "", false
}

// How a pool was named.
const (
	ByLabel     = "series label"
	ByMap       = "host map"
	ByNodeGroup = "GPU model and node group (host name prefix)"
)

// Options say where pools come from.
type Options struct {
	// Label is a series label naming the pool; empty: none.
	Label string
	// Map is the host map.
	Map Map
	// Hosts are facts naming the pools; nil: none.
	Hosts Hosts
}

// Namer names the pools of one plan: facts are read once, for the hosts the
// window saw.
type Namer struct {
	o     Options
	facts map[string]string
	// Note says how the pools were named, with what failed.
	notes map[string]bool
	err   error
}

// New reads the facts for hosts.
func New(ctx context.Context, o Options, hosts []string) *Namer {
	n := &Namer{o: o, notes: map[string]bool{}}
	if o.Hosts != nil {
		n.facts, n.err = o.Hosts.Pools(ctx, hosts)
		if n.err != nil {
			n.notes[fmt.Sprintf("%s unreadable (%v)", o.Hosts.Describe(), n.err)] = true
		}
	}
	return n
}

// Pool names the pool of a GPU of model on host whose series carry
// labelValue for the Label option, and says how it was named.
func (n *Namer) Pool(model, host, labelValue string) (name, by string) {
	model = strings.TrimPrefix(model, "NVIDIA ")
	switch {
	case n.o.Label != "" && labelValue != "":
		name, by = labelValue, ByLabel+" "+n.o.Label
	case n.mapped(host, &name):
		by = ByMap
	case n.facts[host] != "":
		name, by = n.facts[host], n.o.Hosts.Describe()
	default:
		name, by = NodeGroup(host), ByNodeGroup
	}
	n.notes[by] = true
	if name == "" {
		return model, by
	}
	return model + "/" + name, by
}

func (n *Namer) mapped(host string, name *string) bool {
	p, ok := n.o.Map.Pool(host)
	*name = p
	return ok
}

// Notes says how the plan's pools were named, sorted.
func (n *Namer) Notes() []string {
	out := make([]string, 0, len(n.notes))
	for s := range n.notes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

var trailingNumber = regexp.MustCompile(`[-_.]?[0-9]+$`)

// NodeGroup is a host's node group read from its name: the name without
// its domain and its trailing number (`gpu-a-012.dc1` → `gpu-a`). A name
// that is all number is its own group; an address is no group.
func NodeGroup(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	if g := trailingNumber.ReplaceAllString(host, ""); g != "" {
		return g
	}
	return host
}
