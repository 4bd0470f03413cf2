// Package reclaim holds the reclamation integration tests: escalation against
// a real single-node Slurm (warn, checkpoint signal, cancel; exemptions, a
// tier without reclaim, dry-run, and a SIGKILL between intent and result),
// and warnings delivered to a real Alertmanager.
//
// Slurm: the tests use the cluster named by GPUWATCH_SLURM_CONF (started by
// `eval "$(test/slurm/start.sh)"`, as .ci/run does); without it, running as
// root, they start a private one through test/slurm/start.sh. Alertmanager:
// the test starts `prometheus-alertmanager` (Debian) or `alertmanager` on
// loopback. Missing binaries skip the tests, or fail them when CI is set.
package reclaim
