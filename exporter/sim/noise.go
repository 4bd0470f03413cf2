package sim

import "math"

// The noise model is a hash of (seed, device, channel, time step), not a
// stateful generator: a value depends only on what it describes, so any
// instant can be computed directly (fast-forward, CollectAll and Collect
// agree) and the same seed always gives the same fleet.

func mix64(x uint64) uint64 {
	// splitmix64 finaliser: cheap, and every input bit affects every output bit.
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// unit returns a uniform value in [0, 1) for the given keys.
func unit(keys ...uint64) float64 {
	h := uint64(0x243F6A8885A308D3)
	for _, k := range keys {
		h = mix64(h ^ k)
	}
	return float64(h>>11) / (1 << 53)
}

// sym returns a uniform value in [-1, 1).
func sym(keys ...uint64) float64 { return 2*unit(keys...) - 1 }

// hashString folds a string into a key.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func clamp(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}
