package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Node is what Slurm says of one node, from `sinfo --json`.
type Node struct {
	Name string
	// State is the base state in capitals (IDLE, MIXED, ALLOCATED, DOWN...).
	State string
	// Flags are the state's flags in capitals (DRAIN, NOT_RESPONDING...).
	Flags []string
	// Reason is the administrator's (or gpuwatch's) reason for DRAIN or DOWN.
	Reason string
	// Hostname is the node's host name where it differs from Name
	// (NodeHostname in slurm.conf); Partitions the partitions it is in,
	// in slurm.conf's order.
	Hostname   string
	Partitions []string
}

// Drained reports whether the node takes no new jobs: drained or draining
// (DRAIN on any base state), or down.
func (n *Node) Drained() bool {
	return n.State == "DOWN" || n.State == "DRAINED" || n.State == "DRAINING" || slices.Contains(n.Flags, "DRAIN")
}

// nodeName is what Slurm accepts as one NodeName (no host lists, no
// commas or brackets that would name several nodes).
var nodeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidNodeName reports whether name is one Slurm node name.
func ValidNodeName(name string) bool { return nodeName.MatchString(name) }

// MaxReasonBytes bounds a drain reason: slurmctld keeps it with the node
// and shows it in every sinfo -R.
const MaxReasonBytes = 256

type sinfoDoc struct {
	Nodes []struct {
		Name       string          `json:"name"`
		State      json.RawMessage `json:"state"`
		StateFlags []string        `json:"state_flags"`
		Reason     string          `json:"reason"`
		Hostname   string          `json:"hostname"`
		Partitions []string        `json:"partitions"`
	} `json:"nodes"`
	Errors []json.RawMessage `json:"errors"`
}

func decodeSinfo(out []byte) ([]Node, error) {
	if len(out) > maxDoc {
		return nil, fmt.Errorf("sinfo --json: %d bytes, more than %d", len(out), maxDoc)
	}
	var doc sinfoDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("sinfo --json: decode: %w", err)
	}
	if len(doc.Errors) > 0 {
		return nil, fmt.Errorf("sinfo --json: %s", errorText(doc.Errors[0]))
	}
	nodes := make([]Node, 0, len(doc.Nodes))
	for _, d := range doc.Nodes {
		n := Node{Name: d.Name, Reason: d.Reason}
		if ValidNodeName(d.Hostname) && d.Hostname != d.Name {
			n.Hostname = d.Hostname
		}
		for _, p := range d.Partitions {
			if partitionName.MatchString(p) {
				n.Partitions = append(n.Partitions, p)
			}
		}
		// 22.05: "state": "idle" with "state_flags"; 23.02+: "state":
		// ["IDLE", "DRAIN"], base state first.
		var one string
		var list []string
		switch {
		case json.Unmarshal(d.State, &one) == nil:
			n.State = strings.ToUpper(one)
		case json.Unmarshal(d.State, &list) == nil && len(list) > 0:
			n.State, n.Flags = strings.ToUpper(list[0]), upper(list[1:])
		}
		n.Flags = append(n.Flags, upper(d.StateFlags)...)
		if !ValidNodeName(n.Name) || !stateWord.MatchString(n.State) {
			return nil, fmt.Errorf("sinfo --json: node %q in state %q: not a node name and state", n.Name, n.State)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func upper(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToUpper(s)
	}
	return out
}

// partitionName is a partition name as slurm.conf allows it; one that is
// not (a hostile or broken answer) is left out.
var partitionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// Nodes returns what Slurm says of every node.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	out, err := c.Runner.Run(ctx, orDefault(c.Sinfo, "sinfo"), "--json")
	if err != nil {
		return nil, fmt.Errorf("sinfo --json: %w", err)
	}
	return decodeSinfo(out)
}

// Node returns what Slurm says of one node, or nil when it has no such
// node. Slurm 22.05 ignores sinfo's node filter with --json, so the call
// lists every node and picks one.
func (c *Client) Node(ctx context.Context, name string) (*Node, error) {
	if !ValidNodeName(name) {
		return nil, fmt.Errorf("slurm node %q: %w", name, ErrInvalid)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i], nil
		}
	}
	return nil, nil
}

// Drain drains the node: running jobs finish, no new job starts on it,
// until an administrator resumes it (scontrol update State=RESUME). The
// reason is one printable line, at most MaxReasonBytes.
func (c *Client) Drain(ctx context.Context, name, reason string) error {
	if !ValidNodeName(name) {
		return fmt.Errorf("slurm node %q: %w", name, ErrInvalid)
	}
	if reason == "" || len(reason) > MaxReasonBytes || strings.IndexFunc(reason, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("drain reason: empty, longer than %d bytes or not one printable line: %w", MaxReasonBytes, ErrInvalid)
	}
	if _, err := c.Runner.Run(ctx, orDefault(c.Scontrol, "scontrol"), "update", "NodeName="+name, "State=DRAIN", "Reason="+reason); err != nil {
		return fmt.Errorf("drain node %s: %w", name, err)
	}
	return nil
}
