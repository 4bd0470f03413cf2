package action

import (
	"context"
	"encoding/json"
	"fmt"
)

// RecordedPods reads, once, the pods the Hub's records say its spawner made:
// every server's KubeSpawner state (pod_name, namespace) among the Hub's
// users with running servers, keyed "namespace/pod". The pods are the
// Hub's to name, not their authors': the analyzer reads a pod's kind from
// it (facts.HubKinds). The read is bounded like the actuator's: at most
// maxHubPages pages of hubPageLimit users, each answer at most maxHubBody,
// each request within the client's timeout. State the Hub withholds from
// the token is an error, since then no pod is proven either way.
func (j *JupyterHub) RecordedPods(ctx context.Context) (map[string]bool, error) {
	pods := map[string]bool{}
	offset := 0
	for page := 0; page < maxHubPages; page++ {
		p, err := j.page(ctx, offset)
		if err != nil {
			return nil, err
		}
		for i := range p.Items {
			if err := p.Items[i].addPods(pods); err != nil {
				return nil, err
			}
		}
		next := p.Pagination.Next
		if next == nil {
			return pods, nil
		}
		// As in scan: only the offset is read, and it must advance.
		if next.Offset <= offset {
			return nil, fmt.Errorf("JupyterHub's user list pages back to offset %d from %d", next.Offset, offset)
		}
		offset = next.Offset
	}
	return nil, fmt.Errorf("JupyterHub lists more than %d users with running servers: not read further", maxHubPages*hubPageLimit)
}

// addPods adds the pods the user's servers' KubeSpawner state names.
// A server whose state is another spawner's, or null (never started, or
// cleared when it stopped), names none.
func (u *hubUserModel) addPods(pods map[string]bool) error {
	if u.Servers == nil {
		return fmt.Errorf("JupyterHub lists no servers of user %s (the token needs read:servers)", shownName(u.Name))
	}
	for _, s := range u.Servers {
		if s.State == nil {
			return fmt.Errorf("user %s: %w", shownName(u.Name), errNoStateScope)
		}
		var st kubeSpawnerState
		if json.Unmarshal(s.State, &st) != nil || st.PodName == "" || st.Namespace == "" {
			continue
		}
		pods[podRef{namespace: st.Namespace, name: st.PodName}.String()] = true
	}
	return nil
}
