package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// holder is the scheduler that owns a finding's allocation. Advice names
// the change in that scheduler's own terms: a Slurm user edits sbatch
// flags, a pod's owner edits resources.limits, and neither can act on the
// other's syntax.
type holder struct{ kube bool }

// holderOf reads the scheduler from the finding (facts.SchedulerOf is the
// one definition: the finding's own field, else a pod name means
// Kubernetes).
func holderOf(f *finding.Finding) holder {
	return holder{kube: facts.SchedulerOf(f) == schema.SchedulerKubernetes}
}

// gpus is the request for n whole GPUs.
func (h holder) gpus(n int) string {
	if h.kube {
		return fmt.Sprintf("nvidia.com/gpu: %d in the pod's resources.limits", n)
	}
	return fmt.Sprintf("--gres=gpu:%d", n)
}

// noGPUs is how a job asks for no GPU at all.
func (h holder) noGPUs() string {
	if h.kube {
		return "drop nvidia.com/gpu from the pod's resources.limits and let it schedule on a CPU node"
	}
	return "submit it to a CPU partition without --gres=gpu"
}

// migSlice is the request for one MIG instance of the named profile: the
// device plugin's mixed-strategy resource for a pod, the gres type for
// Slurm (which sites usually name after the profile).
func (h holder) migSlice(profile string) string {
	if h.kube {
		return fmt.Sprintf("nvidia.com/mig-%s: 1 in the pod's resources.limits", profile)
	}
	return fmt.Sprintf("--gres=gpu:%s:1, or your site's gres type for that profile", profile)
}

// stopSignal is the signal the holder sends before it stops the job: the
// one a checkpoint handler should catch.
func (h holder) stopSignal() string {
	if h.kube {
		return "SIGTERM (sent at eviction, before terminationGracePeriodSeconds runs out)"
	}
	return "SIGUSR1 (sbatch --signal=USR1@600 sends it before the limit)"
}

// stageFirst is where data staging and image pulls belong, before the GPUs
// are held.
func (h holder) stageFirst() string {
	if h.kube {
		return "pre-pull the image on GPU nodes (or use a smaller one) and stage data in an init container that requests no GPU"
	}
	return "stage data to local scratch and pull container images in a CPU step (or a job dependency) before requesting GPUs"
}
