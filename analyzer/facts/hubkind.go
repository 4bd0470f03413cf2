package facts

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// A pod no controller owns is what JupyterHub's KubeSpawner makes, and
// what anyone who may create a pod makes too: its name (jupyter-<user>) is
// its author's to choose. Which pods are notebook servers is the Hub's to
// say: its record of each server (KubeSpawner's state) names the pod it
// made, and no pod author writes it. So where a Hub is configured, a pod
// with no controller is interactive when the Hub records it, batch when
// the Hub answered and does not, and of unknown kind when the Hub could
// not be asked; names decide neither.

// The KindSource values of kinds the Hub's record decided.
const (
	// KindFromHub: the Hub records the pod as a server's.
	KindFromHub = "JupyterHub record"
	// KindNotInHub: the pod has no controller and the Hub does not record it.
	KindNotInHub = "no controller, not in JupyterHub's record"
	// KindHubUnreachable: the Hub could not be asked; the kind is unknown.
	KindHubUnreachable = "JupyterHub unreachable"
)

// PodRecord is the Hub's record of the pods its spawner made, by
// "namespace/pod" (action.JupyterHub.RecordedPods).
type PodRecord interface {
	RecordedPods(ctx context.Context) (map[string]bool, error)
}

// DefaultHubRecordMaxAge is how long one read of the Hub's record serves:
// the engine's owner lookup and the escalator's facts of one cycle share
// it, so the Hub is asked at most once per cycle.
const DefaultHubRecordMaxAge = 30 * time.Second

// HubKinds is the Kubernetes Source (kube.Facts) with the kinds of its
// pods that have no controller read from JupyterHub's record.
type HubKinds struct {
	Source
	Hub PodRecord
	// MaxAge is how long a read of the record (or its failure) is reused;
	// DefaultHubRecordMaxAge when 0.
	MaxAge time.Duration
	// Now defaults to time.Now.
	Now func() time.Time

	mu     sync.Mutex
	read   time.Time
	pods   map[string]bool
	err    error
	cached bool
}

// Lookup implements Source: the owner's facts, then, for the pods no
// controller owns and no owner decided, the Hub's word on their kind.
func (h *HubKinds) Lookup(ctx context.Context, jobs []string) (map[string]*Facts, error) {
	fs, err := h.Source.Lookup(ctx, jobs)
	if err != nil {
		return nil, err
	}
	if !anyBare(fs) {
		return fs, nil
	}
	pods, herr := h.record(ctx)
	out := make(map[string]*Facts, len(fs))
	for job, f := range fs {
		if f != nil && noController(f) {
			// The source's facts may be shared (a Table): decide on a copy.
			c := *f
			c.known = maps.Clone(f.known)
			f = &c
			hubKind(f, job, pods, herr)
		}
		out[job] = f
	}
	return out, nil
}

// anyBare reports whether any pod of fs is one the Hub's record decides,
// so that a cycle without one asks the Hub nothing.
func anyBare(fs map[string]*Facts) bool {
	for _, f := range fs {
		if f != nil && noController(f) {
			return true
		}
	}
	return false
}

// noController reports whether the API server named no controller of the
// pod and no owner decided its kind.
func noController(f *Facts) bool {
	owner, ok, _ := f.Value(schema.AttrOwner)
	return ok && owner == "" && !f.known[schema.AttrKind] && f.OwnerKind == ""
}

// hubKind decides the kind of the bare pod job from the Hub's record, or
// marks it unknown when the record could not be read: then no name
// decides it, and no policy tier that matches kinds can act on it.
func hubKind(f *Facts, job string, pods map[string]bool, herr error) {
	switch {
	case herr != nil:
		f.KindSource = KindHubUnreachable
		f.Missing = maps.Clone(f.Missing)
		if f.Missing == nil {
			f.Missing = map[schema.Attr]string{}
		}
		f.Missing[schema.AttrKind] = herr.Error()
	case pods[job]:
		f.SetOwnerKind(schema.KindInteractive, KindFromHub)
	default:
		f.SetOwnerKind(schema.KindBatch, KindNotInHub)
	}
}

// record returns the Hub's record, read at most once per MaxAge.
func (h *HubKinds) record(ctx context.Context) (map[string]bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	maxAge := h.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultHubRecordMaxAge
	}
	if h.cached && now().Sub(h.read) < maxAge {
		return h.pods, h.err
	}
	h.pods, h.err = h.Hub.RecordedPods(ctx)
	h.read, h.cached = now(), true
	return h.pods, h.err
}
