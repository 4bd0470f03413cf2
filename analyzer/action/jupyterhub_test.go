package action_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/actiontest"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

// hubPod is a running pod in ns carrying KubeSpawner's annotations for
// user and server; whether the Hub runs a server in it is the Hub's to say.
func hubPod(ns, name, user, server string) *corev1.Pod {
	ann := map[string]string{action.AnnotationHubUser: user}
	if server != "" {
		ann[action.AnnotationHubServer] = server
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann,
		Labels: map[string]string{"component": "singleuser-server"},
		UID:    types.UID("uid-" + ns + "-" + name), CreationTimestamp: metav1.NewTime(hubT0.Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: "node-k"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// hubT0 is when the evidence of the notebooks' findings begins.
var hubT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// idleReqIn is the reclaim the escalator makes of an idle notebook on
// node-k, with the proof (the pod's UID) made at decision time: the
// fallback's eviction is conditional on it.
func idleReqIn(ns, pod string) *action.Request {
	return &action.Request{Step: action.StepReclaim, Finding: finding.Finding{Pattern: schema.IdleSession, Namespace: ns, Pod: pod,
		Scheduler: "kubernetes", Job: ns + "/" + pod, Hostname: "node-k", Start: hubT0},
		Target: &target.Proof{Verdict: target.Proven, UID: "uid-" + ns + "-" + pod}}
}

func idleReq(pod string) *action.Request { return idleReqIn("jhub", pod) }

// The actuator against a real JupyterHub whose records name the pods its
// servers run in: the default and a named server are stopped through the
// API, the other users' servers are untouched; a pod annotated with
// another user's name (in another namespace, or under a name no server
// has) stops nothing and is evicted only by the policy's fallback; a pod
// whose annotation names the wrong user is still found by the Hub's
// record; a server already stopped is gone (skipped); a token without
// admin:server_state, a wrong token and a Hub that is down fail, and only
// a fallback the policy asked for evicts the pod.
func TestJupyterHubActuator(t *testing.T) {
	t.Parallel()
	hub := actiontest.StartHub(t, "jhub")
	if users := hub.Users(); !slices.Contains(users, "alice") || !slices.Contains(users, "bob") {
		t.Fatalf("hub users %v", users)
	}
	for _, s := range [][2]string{{"alice", ""}, {"bob", ""}, {"bob", "lab"}, {"carol", ""}, {"dave", ""}} {
		hub.Start(s[0], s[1])
	}
	if ns, pod := hub.PodOf("bob", "lab"); ns != "jhub" || pod != "jupyter-bob--lab" {
		t.Fatalf("the Hub's state of bob's lab names %s/%s, want KubeSpawner's jhub/jupyter-bob--lab", ns, pod)
	}
	client := fake.NewClientset(hubPod("jhub", "jupyter-alice", "alice", ""), hubPod("jhub", "jupyter-bob--lab", "bob", "lab"),
		hubPod("jhub", "jupyter-carol", "carol", ""), hubPod("jhub", "jupyter-dave", "alice", ""),
		hubPod("mallory", "jupyter-bob--lab", "bob", "lab"), hubPod("jhub", "jupyter-mallory", "bob", ""))
	reclaim := &kube.Reclaim{Core: client.CoreV1(), Apps: client.AppsV1(), Mode: "evict"}
	pods := &kube.Pods{Core: client.CoreV1()}
	j := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: pods, Next: reclaim}
	ctx := context.Background()

	// Mallory's pods claim to be bob's: nothing is stopped through the Hub.
	for _, r := range []*action.Request{idleReqIn("mallory", "jupyter-bob--lab"), idleReq("jupyter-mallory")} {
		_, err := j.Act(ctx, r)
		if !errors.Is(err, action.ErrUnsupported) || !strings.Contains(err.Error(), "no JupyterHub server runs in pod "+r.Finding.Job) ||
			!strings.Contains(err.Error(), "jupyterhub_fallback is not evict") {
			t.Errorf("%s annotated as bob's: %v, want skipped, naming the fallback", r.Finding.Job, err)
		}
		if out, _, err := j.Reconcile(ctx, r); err != nil || out != action.NotApplied {
			t.Errorf("reconcile %s: %v %v, want not applied", r.Finding.Job, out, err)
		}
	}
	if !hub.Running("bob", "") || !hub.Running("bob", "lab") || len(kubetest.Evictions(client)) != 0 {
		t.Fatalf("after mallory's pods: bob %v, bob's lab %v (want running), evictions %v (want none)",
			hub.Running("bob", ""), hub.Running("bob", "lab"), kubetest.Evictions(client))
	}
	withFallback := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: pods, Next: reclaim, FallbackEvict: true}
	if d, err := withFallback.Act(ctx, idleReqIn("mallory", "jupyter-bob--lab")); err != nil || !strings.Contains(d, "fallback: evicted pod mallory/jupyter-bob--lab") {
		t.Errorf("mallory's pod with the fallback: %q %v", d, err)
	}
	if ev := kubetest.Evictions(client); len(ev) != 1 || ev[0] != "mallory/jupyter-bob--lab" || !hub.Running("bob", "lab") {
		t.Fatalf("evictions %v, want mallory's pod only; bob's lab running %v", ev, hub.Running("bob", "lab"))
	}

	d, err := j.Act(ctx, idleReq("jupyter-alice"))
	if err != nil || !strings.Contains(d, `stopped the server of "alice"`) {
		t.Fatalf("stop alice: %q %v", d, err)
	}
	if hub.Running("alice", "") || !hub.Running("bob", "lab") || !hub.Running("carol", "") {
		t.Fatal("alice still runs, or another server was stopped")
	}
	if out, _, err := j.Reconcile(ctx, idleReq("jupyter-alice")); err != nil || out != action.Applied {
		t.Errorf("reconcile alice: %v %v", out, err)
	}
	if _, err := j.Act(ctx, idleReq("jupyter-alice")); !errors.Is(err, action.ErrGone) || !strings.Contains(err.Error(), "already stopped") {
		t.Errorf("second stop: %v, want already stopped", err)
	}
	if d, err := j.Act(ctx, idleReq("jupyter-bob--lab")); err != nil || !strings.Contains(d, `server "lab" of "bob"`) || hub.Running("bob", "lab") || !hub.Running("bob", "") {
		t.Errorf("stop bob's named server: %q %v; bob's default server must keep running", d, err)
	}
	// Dave's pod says it is alice's: the Hub's record says it is dave's.
	if d, err := j.Act(ctx, idleReq("jupyter-dave")); err != nil || !strings.Contains(d, `server of "dave"`) || hub.Running("dave", "") {
		t.Errorf("dave's pod annotated as alice's: %q %v, want dave's server stopped", d, err)
	}

	// A token without admin:server_state: a clear error, never a stop.
	noState := &action.JupyterHub{URL: hub.URL, TokenFile: hub.NoStateTokenFile, Pods: pods, Next: reclaim}
	if _, err := noState.Act(ctx, idleReq("jupyter-carol")); err == nil || action.Moot(err) || !strings.Contains(err.Error(), "admin:server_state") {
		t.Errorf("token without admin:server_state: %v", err)
	}
	// A wrong token: refused, nothing evicted without the fallback.
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := &action.JupyterHub{URL: hub.URL, TokenFile: bad, Pods: pods, Next: reclaim}
	if _, err := wrong.Act(ctx, idleReq("jupyter-carol")); err == nil || action.Moot(err) || !strings.Contains(err.Error(), "refused the token") ||
		strings.Contains(err.Error(), "not-the-token") {
		t.Errorf("wrong token: %v", err)
	}
	// The Hub down: fails; with the policy's fallback the pod is evicted.
	down := &action.JupyterHub{URL: actiontest.ClosedURL(t), TokenFile: hub.TokenFile, Pods: pods, Next: reclaim}
	if _, err := down.Act(ctx, idleReq("jupyter-carol")); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("hub down: %v", err)
	}
	if len(kubetest.Evictions(client)) != 1 || !hub.Running("carol", "") {
		t.Fatal("acted without the Hub and without a fallback")
	}
	down.FallbackEvict = true
	if d, err := down.Act(ctx, idleReq("jupyter-carol")); err != nil || !strings.Contains(d, "fallback") {
		t.Errorf("fallback: %q %v", d, err)
	}
	if ev := kubetest.Evictions(client); len(ev) != 2 || ev[1] != "jhub/jupyter-carol" {
		t.Errorf("evictions %v", ev)
	}
	// Not an idle session's reclaim: the Kubernetes actuator's.
	if _, err := j.Act(ctx, &action.Request{Step: action.StepCheckpoint, Finding: idleReq("jupyter-carol").Finding}); !errors.Is(err, action.ErrUnsupported) {
		t.Errorf("checkpoint: %v", err)
	}
}

// hostileHubActuator is the actuator for jhub/jupyter-alice (annotated
// alice) against a Hub that answers every request with answer.
func hostileHubActuator(t *testing.T, tokenFile string, answer func(w http.ResponseWriter, r *http.Request)) *action.JupyterHub {
	t.Helper()
	hub := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(hub.Close)
	client := fake.NewClientset(hubPod("jhub", "jupyter-alice", "alice", ""))
	return &action.JupyterHub{URL: hub.URL, TokenFile: tokenFile, Pods: &kube.Pods{Core: client.CoreV1()}}
}

// TestJupyterHubHostile: the token never leaves in an error (a Hub or
// proxy that echoes the request's headers, or the token itself), no
// redirect is followed (the token would go elsewhere, and a 307 would
// repeat the DELETE there), and a token file that is a FIFO fails at once.
func TestJupyterHubHostile(t *testing.T) {
	const token = "s3cr3t-hub-token-0123456789abcdef"
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(other.Close)
	echo := func(status int) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			fmt.Fprintf(w, "<html>proxy error; your request: %s %s\nAuthorization: %s\nheaders: %v\nraw=%s</html>",
				r.Method, r.URL, r.Header.Get("Authorization"), r.Header, strings.TrimPrefix(r.Header.Get("Authorization"), "token "))
		}
	}
	for name, answer := range map[string]func(w http.ResponseWriter, r *http.Request){
		"echo 500": echo(http.StatusInternalServerError),
		"echo 400": echo(http.StatusBadRequest),
		"echo 200": echo(http.StatusOK),
		"echo 404": echo(http.StatusNotFound),
		"echo JSON": func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `{"servers": "%s"}`, r.Header.Get("Authorization"))
		},
		"redirect 307": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
		},
		"redirect 308": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, http.StatusPermanentRedirect)
		},
		"redirect 302": func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL, http.StatusFound) },
	} {
		t.Run(name, func(t *testing.T) {
			j := hostileHubActuator(t, tokenFile, answer)
			_, err := j.Act(context.Background(), idleReq("jupyter-alice"))
			if err == nil || action.Moot(err) {
				t.Fatalf("a hostile Hub's answer was taken for an answer: %v", err)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "0123456789abcdef") {
				t.Fatalf("the token leaked into the error: %v", err)
			}
			if strings.ContainsAny(err.Error(), "\n\x1b") {
				t.Fatalf("raw text from the Hub in the error: %q", err)
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("%d requests followed a redirect to another server", n)
	}
	// A Hub that is down, asked about a name as long as a Hub name can
	// be: the error does not repeat the URL with the name escaped in it.
	longName := fake.NewClientset(hubPod("jhub", "jupyter-x", strings.Repeat("𝔟", 255), ""))
	down := &action.JupyterHub{URL: actiontest.ClosedURL(t), TokenFile: tokenFile, Pods: &kube.Pods{Core: longName.CoreV1()}}
	if _, err := down.Act(context.Background(), idleReq("jupyter-x")); err == nil || !strings.Contains(err.Error(), "unreachable") || len(err.Error()) > 300 {
		t.Errorf("Hub down, 1020-byte name: %d bytes: %.400v", len(err.Error()), err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	j := hostileHubActuator(t, fifo, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// Refused, not read: a read of a FIFO with no writer blocks forever.
	// The limit only tells a hang from a slow machine.
	errc := make(chan error, 1)
	go func() {
		_, err := j.Act(context.Background(), idleReq("jupyter-alice"))
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("token file on a FIFO: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("token file on a FIFO: still reading after 30 s")
	}
}
