//go:build !race

package testtool

// Race is true when the test binary is built with -race. Timed scale
// targets are measured without the race detector, which makes code several
// times slower and hungrier; under -race such tests run a reduced size, so
// the same path is still checked for data races.
const Race = false
