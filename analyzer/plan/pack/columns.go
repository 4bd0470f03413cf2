package pack

import "slices"

// columns holds the load and memory of every GPU at each hour, hour by
// hour, and the least of each block of binBlock GPUs at each hour: most
// GPUs that cannot take a demand are full at its first hour already, and
// scanning one hour's column of all GPUs stays in cache where a GPU's own
// profile would not; a block's least refuses a demand for the whole block
// at once, so that the GPUs filled long ago are passed over by the block.
//
// The columns are stored a block at a time ([block][hour][GPU of the
// block]), allocated whole when the block's first GPU opens: growing one
// slice per hour by a GPU at a time copied every column again and again
// (a fifth of a week's 10,000-GPU plan went to those copies).
//
// A block's least is recomputed only when it is asked for after one of its
// GPUs that held it grew: a placement touches every hour of the demand,
// while the search asks of two hours only.
type columns struct {
	hours  int
	n      int
	blocks []*block
}

// block is the columns of binBlock GPUs.
type block struct {
	load, mem       [][binBlock]float64 // [hour][GPU of the block]
	loadMin, memMin []float64           // [hour]
	stale           []bool              // [hour]: the least is to be recomputed
}

func newColumns(hours int) *columns { return &columns{hours: hours} }

// open adds an idle GPU; an idle GPU is its block's least.
func (c *columns) open() {
	b := c.n / binBlock
	if c.n%binBlock == 0 {
		c.blocks = append(c.blocks, &block{load: make([][binBlock]float64, c.hours), mem: make([][binBlock]float64, c.hours),
			loadMin: make([]float64, c.hours), memMin: make([]float64, c.hours), stale: make([]bool, c.hours)})
	} else {
		bl := c.blocks[b]
		for h := range c.hours {
			bl.loadMin[h], bl.memMin[h], bl.stale[h] = 0, 0, false
		}
	}
	c.n++
}

// set records GPU k's load l and memory m at hour h. Loads only grow, so
// a block's least changes only when the GPU that grew held it.
func (c *columns) set(h, k int, l, m float64) {
	bl, i := c.blocks[k/binBlock], k%binBlock
	if !bl.stale[h] && (bl.load[h][i] <= bl.loadMin[h] || bl.mem[h][i] <= bl.memMin[h]) {
		bl.stale[h] = true
	}
	bl.load[h][i], bl.mem[h][i] = l, m
}

// least is the least load and memory of block b at hour h.
func (c *columns) least(h, b int) (load, mem float64) {
	bl := c.blocks[b]
	if bl.stale[h] {
		k := min(binBlock, c.n-b*binBlock)
		bl.loadMin[h], bl.memMin[h] = slices.Min(bl.load[h][:k]), slices.Min(bl.mem[h][:k])
		bl.stale[h] = false
	}
	return bl.loadMin[h], bl.memMin[h]
}

// blockRefuses says whether every GPU of block b refuses d at hour h: none
// is idle in that hour, and even the least loaded has no room.
func (c *columns) blockRefuses(d *Demand, h, b int, cp Capacity) bool {
	l, m := c.least(h, b)
	return (l > 0 && l+d.Compute[h] > cp.Compute+1e-9) || (m > 0 && m+d.Memory > cp.Memory+1e-9)
}

// refuses says whether GPU k, busy at hour h, has no room there for d.
func (c *columns) refuses(d *Demand, h, k int, cp Capacity) bool {
	bl, i := c.blocks[k/binBlock], k%binBlock
	return refuses(d, h, bl.load[h][i], bl.mem[h][i], cp)
}
