package schema

import "testing"

func TestClassifyKind(t *testing.T) {
	for _, tc := range []struct{ job, pod, want string }{
		{"", "jupyter-alice", "interactive"},
		{"", "jupyter-alice--gpu-server", "interactive"},
		{"", "myjupyter-alice", "batch"},
		{"interactive", "", "interactive"},
		{"interactive-gpu", "", "interactive"},
		{"sys/dashboard/sys/bc_desktop", "", "interactive"},
		{"ondemand/sys/dashboard/dev/jupyter", "", "interactive"},
		{"sys/dashboardish", "", "batch"},
		{"train-resnet", "", "batch"},
		{"jupyter-alice", "", "batch"}, // pod pattern only applies to pod names
		{"", "", "batch"},
	} {
		if got := ClassifyKind(tc.job, tc.pod); got != tc.want {
			t.Errorf("ClassifyKind(%q, %q) = %q, want %q", tc.job, tc.pod, got, tc.want)
		}
	}
}
