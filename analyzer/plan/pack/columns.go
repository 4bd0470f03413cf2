package pack

import "slices"

// columns holds the load and memory of every GPU at each hour, hour by
// hour, and the least of each block of binBlock GPUs at each hour: most
// GPUs that cannot take a demand are full at its first hour already, and
// scanning one hour's column of all GPUs stays in cache where a GPU's own
// profile would not; a block's least refuses a demand for the whole block
// at once, so that the GPUs filled long ago are passed over by the block.
//
// A block's least is recomputed only when it is asked for after one of its
// GPUs that held it grew: a placement touches every hour of the demand,
// while the search asks of two hours only.
type columns struct {
	n               int
	load, mem       [][]float64 // [hour][GPU]
	loadMin, memMin [][]float64 // [hour][block]
	stale           [][]bool    // [hour][block]: the least is to be recomputed
}

func newColumns(hours int) *columns {
	return &columns{load: make([][]float64, hours), mem: make([][]float64, hours),
		loadMin: make([][]float64, hours), memMin: make([][]float64, hours), stale: make([][]bool, hours)}
}

// open adds an idle GPU; an idle GPU is its block's least.
func (c *columns) open() {
	b := c.n / binBlock
	for h := range c.load {
		c.load[h] = append(c.load[h], 0)
		c.mem[h] = append(c.mem[h], 0)
		if c.n%binBlock == 0 {
			c.loadMin[h] = append(c.loadMin[h], 0)
			c.memMin[h] = append(c.memMin[h], 0)
			c.stale[h] = append(c.stale[h], false)
		} else {
			c.loadMin[h][b], c.memMin[h][b], c.stale[h][b] = 0, 0, false
		}
	}
	c.n++
}

// set records GPU k's load l and memory m at hour h. Loads only grow, so
// a block's least changes only when the GPU that grew held it.
func (c *columns) set(h, k int, l, m float64) {
	b := k / binBlock
	if !c.stale[h][b] && (c.load[h][k] <= c.loadMin[h][b] || c.mem[h][k] <= c.memMin[h][b]) {
		c.stale[h][b] = true
	}
	c.load[h][k], c.mem[h][k] = l, m
}

// least is the least load and memory of block b at hour h.
func (c *columns) least(h, b int) (load, mem float64) {
	if c.stale[h][b] {
		lo, hi := b*binBlock, min((b+1)*binBlock, c.n)
		c.loadMin[h][b], c.memMin[h][b] = slices.Min(c.load[h][lo:hi]), slices.Min(c.mem[h][lo:hi])
		c.stale[h][b] = false
	}
	return c.loadMin[h][b], c.memMin[h][b]
}

// blockRefuses says whether every GPU of block b refuses d at hour h: none
// is idle in that hour, and even the least loaded has no room.
func (c *columns) blockRefuses(d *Demand, h, b int, cp Capacity) bool {
	l, m := c.least(h, b)
	return (l > 0 && l+d.Compute[h] > cp.Compute+1e-9) || (m > 0 && m+d.Memory > cp.Memory+1e-9)
}

// refuses says whether GPU k, busy at hour h, has no room there for d.
func (c *columns) refuses(d *Demand, h, k int, cp Capacity) bool {
	return refuses(d, h, c.load[h][k], c.mem[h][k], cp)
}
