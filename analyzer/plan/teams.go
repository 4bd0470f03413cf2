package plan

import (
	"runtime"
	"sort"

	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/demand"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pack"
)

// NoTeam names allocations whose team is not known.
const NoTeam = "(none)"

// teams is the pooling view: per team the GPU-hours it held and used, and
// the GPUs it would need if its work were packed on its own. Each team's
// work in each pool packs on its own, on every core.
func (o *Options) teams(byPool map[string][]*demand.Item) []Team {
	type work struct {
		team string
		its  []*demand.Item
	}
	var ws []work
	for _, items := range byPool {
		perTeam := map[string][]*demand.Item{}
		for _, it := range items {
			if it.Job == "" {
				continue
			}
			n := it.Team
			if n == "" {
				n = NoTeam
			}
			perTeam[n] = append(perTeam[n], it)
		}
		for n, its := range perTeam {
			ws = append(ws, work{n, its})
		}
	}
	held, needed := make([]int, len(ws)), make([]int, len(ws))
	g := new(errgroup.Group)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, w := range ws {
		g.Go(func() error { held[i], needed[i] = o.teamNeed(w.its); return nil })
	}
	_ = g.Wait()
	acc := map[string]*Team{}
	for i, w := range ws {
		t := acc[w.team]
		if t == nil {
			t = &Team{Team: w.team}
			acc[w.team] = t
		}
		t.Held += held[i]
		t.Needed += needed[i]
	}
	out := make([]Team, 0, len(acc))
	for _, t := range acc {
		t.Freeable = max(0, t.Held-t.Needed)
		out = append(out, *t)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Team < out[b].Team })
	return out
}

// teamNeed is the GPUs one team's allocations in one pool hold, and the
// GPUs they would need packed on their own (never more than they hold).
func (o *Options) teamNeed(its []*demand.Item) (int, int) {
	held, unknown := map[string]bool{}, map[string]bool{}
	var ds []pack.Demand
	var memTotal float64
	g, ok := mig.Lookup(its[0].Model)
	if !ok {
		g = nil
	}
	for _, it := range its {
		held[gpuKey(it)] = true
		if !o.known(it) {
			unknown[gpuKey(it)] = true
			continue
		}
		ds = append(ds, o.sized(it, g))
		memTotal = max(memTotal, it.TotalMiB)
	}
	capa := pack.Capacity{Compute: o.TargetLoad, Memory: max(1, memTotal*o.TargetLoad)}
	need := len(o.timeSlice(ds, capa))
	if g != nil {
		mb, rest := pack.MIG(ds, g)
		restDs := make([]pack.Demand, len(rest))
		for i, k := range rest {
			restDs[i] = ds[k]
		}
		need = min(need, len(mb)+len(o.timeSlice(restDs, capa)))
	}
	return len(held), min(len(held), need+len(unknown))
}
