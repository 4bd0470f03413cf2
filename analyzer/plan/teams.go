package plan

import (
	"sort"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/demand"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pack"
)

// NoTeam names allocations whose team is not known.
const NoTeam = "(none)"

// teams is the pooling view: per team the GPU-hours it held and used, and
// the GPUs it would need if its work were packed on its own.
func (o *Options) teams(res *demand.Result, byPool map[string][]*demand.Item) []Team {
	acc := map[string]*Team{}
	team := func(it *demand.Item) *Team {
		n := it.Team
		if n == "" {
			n = NoTeam
		}
		t := acc[n]
		if t == nil {
			t = &Team{Team: n}
			acc[n] = t
		}
		return t
	}
	for _, items := range byPool {
		perTeam := map[string][]*demand.Item{}
		for _, it := range items {
			if it.Job == "" {
				continue
			}
			t := team(it)
			perTeam[t.Team] = append(perTeam[t.Team], it)
		}
		for name, its := range perTeam {
			t := acc[name]
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
			need := len(pack.TimeSlice(ds, capa))
			if g != nil {
				mb, rest := pack.MIG(ds, g)
				restDs := make([]pack.Demand, len(rest))
				for i, k := range rest {
					restDs[i] = ds[k]
				}
				need = min(need, len(mb)+len(pack.TimeSlice(restDs, capa)))
			}
			t.Held += len(held)
			t.Needed += min(len(held), need+len(unknown))
		}
	}
	out := make([]Team, 0, len(acc))
	for _, t := range acc {
		t.Freeable = max(0, t.Held-t.Needed)
		out = append(out, *t)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Team < out[b].Team })
	return out
}
