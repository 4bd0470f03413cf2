// Package analyzercmd holds the subcommands that gpuwatch and
// gpuwatch-analyzer share: analyzer (the daemon), analyze, report, audit and
// check-config. Only cmd/ uses it; it is part of the binaries' wiring, so it
// defines their flags.
package analyzercmd
