//go:build race

package testtool

// Race is true when the test binary is built with -race.
const Race = true
