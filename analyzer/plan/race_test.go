//go:build race

package plan

// raceEnabled: the race detector slows the engine many times over, so the
// timing targets of the scale tests mean nothing in such a build.
const raceEnabled = true
