package action_test

import (
	"github.com/gpuwatch/gpuwatch/schema"

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
)

func hubPod(name, user, server string) *corev1.Pod {
	ann := map[string]string{action.AnnotationHubUser: user}
	if server != "" {
		ann[action.AnnotationHubServer] = server
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "jhub", Annotations: ann,
		Labels: map[string]string{action.AnnotationHubUser: user, "component": "singleuser-server"},
		UID:    types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(hubT0.Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: "node-k"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

// hubT0 is when the evidence of the notebooks' findings begins.
var hubT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// idleReq is the reclaim the escalator makes of an idle notebook on
// node-k, with the proof (the pod's UID) made at decision time.
func idleReq(pod string) *action.Request {
	return &action.Request{Step: action.StepReclaim, Finding: finding.Finding{Pattern: schema.IdleSession, Namespace: "jhub", Pod: pod,
		Scheduler: "kubernetes", Job: "jhub/" + pod, Hostname: "node-k", Start: hubT0},
		Target: &target.Proof{Verdict: target.Proven, UID: "uid-" + pod}}
}

// The actuator against a real JupyterHub: the default and a named server
// are stopped through the API, the other user's server is untouched; a
// server already stopped is gone (skipped), a wrong token and a Hub that
// is down fail, and only a fallback the policy asked for evicts the pod.
func TestJupyterHubActuator(t *testing.T) {
	hub := actiontest.StartHub(t)
	if users := hub.Users(); !slices.Contains(users, "alice") || !slices.Contains(users, "bob") {
		t.Fatalf("hub users %v", users)
	}
	hub.Start("alice", "")
	hub.Start("bob", "lab")
	hub.Start("carol", "")
	client := fake.NewClientset(hubPod("jupyter-alice", "alice", ""), hubPod("jupyter-bob--lab", "bob", "lab"),
		hubPod("jupyter-carol", "carol", ""))
	reclaim := &kube.Reclaim{Core: client.CoreV1(), Apps: client.AppsV1(), Mode: "evict"}
	j := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim}
	ctx := context.Background()

	d, err := j.Act(ctx, idleReq("jupyter-alice"))
	if err != nil || !strings.Contains(d, "stopped the server of alice") {
		t.Fatalf("stop alice: %q %v", d, err)
	}
	if hub.Running("alice", "") || !hub.Running("bob", "lab") || !hub.Running("carol", "") {
		t.Fatal("alice still runs, or another server was stopped")
	}
	if len(kubetest.Evictions(client)) != 0 {
		t.Fatal("a pod was evicted while the Hub stopped the server")
	}
	if out, _, err := j.Reconcile(ctx, idleReq("jupyter-alice")); err != nil || out != action.Applied {
		t.Errorf("reconcile alice: %v %v", out, err)
	}
	if _, err := j.Act(ctx, idleReq("jupyter-alice")); !errors.Is(err, action.ErrGone) || !strings.Contains(err.Error(), "already stopped") {
		t.Errorf("second stop: %v, want already stopped", err)
	}
	if d, err := j.Act(ctx, idleReq("jupyter-bob--lab")); err != nil || !strings.Contains(d, "server lab of bob") || hub.Running("bob", "lab") {
		t.Errorf("stop bob's named server: %q %v", d, err)
	}

	// A wrong token: refused, nothing evicted without the fallback.
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := &action.JupyterHub{URL: hub.URL, TokenFile: bad, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim}
	if _, err := wrong.Act(ctx, idleReq("jupyter-carol")); err == nil || errors.Is(err, action.ErrGone) || !strings.Contains(err.Error(), "refused the token") ||
		strings.Contains(err.Error(), "not-the-token") {
		t.Errorf("wrong token: %v", err)
	}
	// The Hub down: fails; with the policy's fallback the pod is evicted.
	down := &action.JupyterHub{URL: actiontest.ClosedURL(t), TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim}
	if _, err := down.Act(ctx, idleReq("jupyter-carol")); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("hub down: %v", err)
	}
	if len(kubetest.Evictions(client)) != 0 || !hub.Running("carol", "") {
		t.Fatal("acted without the Hub and without a fallback")
	}
	down.FallbackEvict = true
	if d, err := down.Act(ctx, idleReq("jupyter-carol")); err != nil || !strings.Contains(d, "fallback") {
		t.Errorf("fallback: %q %v", d, err)
	}
	if ev := kubetest.Evictions(client); len(ev) != 1 || ev[0] != "jhub/jupyter-carol" {
		t.Errorf("evictions %v", ev)
	}
	// Not a Hub pod, or not an idle session: the Kubernetes actuator's.
	if _, err := j.Act(ctx, &action.Request{Step: action.StepCheckpoint, Finding: idleReq("jupyter-carol").Finding}); !errors.Is(err, action.ErrUnsupported) {
		t.Errorf("checkpoint: %v", err)
	}
}

// hostileHub answers every request with answer; got counts requests that
// reached the other server a redirect points at.
func hostileHubActuator(t *testing.T, tokenFile string, answer func(w http.ResponseWriter, r *http.Request)) *action.JupyterHub {
	t.Helper()
	hub := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(hub.Close)
	client := fake.NewClientset(hubPod("jupyter-alice", "alice", ""))
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
			if err == nil {
				t.Fatal("a hostile Hub's answer was taken for success")
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
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	j := hostileHubActuator(t, fifo, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	start := time.Now()
	_, err := j.Act(context.Background(), idleReq("jupyter-alice"))
	if err == nil || !strings.Contains(err.Error(), "not a regular file") || time.Since(start) > time.Second {
		t.Fatalf("token file on a FIFO: %v after %s", err, time.Since(start))
	}
}
