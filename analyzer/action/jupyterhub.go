package action

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/secret"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
	"github.com/gpuwatch/gpuwatch/schema"
)

// KubeSpawner's pod annotations: the Hub's user name and server name as
// KubeSpawner writes them. Whoever can create a pod can write them too, so
// they are hints for finding the Hub's record of the pod, never whose
// server it is: the user name narrows the lookup, the server name is not
// read (the Hub's record says which server runs in the pod).
const (
	AnnotationHubUser   = "hub.jupyter.org/username"
	AnnotationHubServer = "hub.jupyter.org/servername"
)

// PodLookup reads a finding's pod's annotations from the API server at
// decision time (kube.Pods). Its errors wrap ErrInvalid for names the API
// could not hold and ErrGone for a pod that no longer exists.
type PodLookup interface {
	Annotations(ctx context.Context, namespace, pod string) (map[string]string, error)
}

// JupyterHub reclaims idle notebook servers the way the Hub's own culler
// does: it stops the user's server through the Hub REST API, so the Hub
// knows the server is gone and the user can start a new one. It stands in
// for the Kubernetes actuator: pods without KubeSpawner's user annotation,
// and steps other than reclaiming an idle_session, go to Next.
//
// The server stopped is the one whose Hub record (KubeSpawner's state:
// pod name and namespace) names the finding's pod, whatever the pod's
// annotations say. A pod no Hub server runs in gets no Hub call: Next
// evicts it if FallbackEvict (the policy's kubernetes.jupyterhub_fallback)
// says so, else the step is skipped and the audit says why. When the Hub
// cannot be asked or cannot stop the server, the pod is likewise evicted
// only if FallbackEvict says so.
type JupyterHub struct {
	// URL of the Hub, e.g. http://hub:8081 (the API is under /hub/api).
	URL string
	// TokenFile holds an API token with the scopes list:users,
	// read:servers, admin:server_state and servers (or admin:servers and
	// list:users). It is read at each use and never logged.
	TokenFile string
	// Pods reads the pod's annotations at decision time.
	Pods          PodLookup
	Next          Actuator
	FallbackEvict bool
	// Client defaults to one with a 10s timeout. Redirects are never
	// followed, whatever the client says: the token would go to wherever
	// the Hub (or a proxy) points, and a 307 or 308 would repeat a DELETE
	// there.
	Client *http.Client
	// Secrets masks the token (and any credential shape) in every error
	// text, since the Hub's answers go into the audit; nil masks shapes.
	Secrets *secret.Redactor
}

// Name implements Actuator: the Hub acts for Kubernetes pods.
func (j *JupyterHub) Name() string { return schema.SchedulerKubernetes }

// maxHubBody bounds what is read of a Hub answer: a page of
// hubPageLimit users with their servers' state fits many times over.
const maxHubBody = 4 << 20

var errNotHubPod = errors.New("not a JupyterHub pod")

// hubServer is a Hub user and server name, as the Hub's record has them.
type hubServer struct{ user, name string }

func (s hubServer) String() string {
	if s.name == "" {
		return "server of " + shownName(s.user)
	}
	return "server " + shownName(s.name) + " of " + shownName(s.user)
}

func (s hubServer) path() string {
	p := "/hub/api/users/" + url.PathEscape(s.user)
	if s.name == "" {
		return p + "/server"
	}
	return p + "/servers/" + url.PathEscape(s.name)
}

// hint reads the finding's pod's user annotation: errNotHubPod when it has
// none.
func (j *JupyterHub) hint(ctx context.Context, req *Request) (podRef, string, error) {
	pod := podRef{namespace: req.Finding.Namespace, name: req.Finding.Pod}
	if j.Pods == nil {
		return pod, "", errNotHubPod
	}
	ann, err := j.Pods.Annotations(ctx, pod.namespace, pod.name)
	if err != nil {
		return pod, "", err
	}
	hint := ann[AnnotationHubUser]
	if hint == "" {
		return pod, "", errNotHubPod
	}
	return pod, hint, nil
}

// Act implements Actuator.
func (j *JupyterHub) Act(ctx context.Context, req *Request) (string, error) {
	if req.Step != StepReclaim || req.Finding.Pattern != schema.IdleSession {
		return j.next(ctx, req)
	}
	pod, hint, err := j.hint(ctx, req)
	if errors.Is(err, errNotHubPod) {
		return j.next(ctx, req)
	}
	if err != nil {
		return "", err
	}
	rec, note, err := j.record(ctx, pod, hint)
	switch {
	case errors.Is(err, errNoHubRecord):
		return j.notTheHubs(ctx, req, pod, note)
	case err != nil:
		return j.fallback(ctx, req, err)
	case rec.stopped:
		return "", fmt.Errorf("the %s, the Hub's record of pod %s, is already stopped: %w", rec.srv, pod, ErrGone)
	}
	detail, err := j.stop(ctx, rec.srv)
	if err != nil {
		return j.fallback(ctx, req, err)
	}
	return detail, nil
}

// fallback evicts the pod through Next when the Hub failed and the policy
// asks for it; otherwise the Hub's error stands.
func (j *JupyterHub) fallback(ctx context.Context, req *Request, err error) (string, error) {
	if !j.FallbackEvict || j.Next == nil {
		return "", err
	}
	d, nerr := j.Next.Act(ctx, req)
	if nerr != nil {
		return "", fmt.Errorf("JupyterHub: %w; eviction as the policy's fallback: %w", err, nerr)
	}
	return "JupyterHub: " + err.Error() + "; the policy's fallback: " + d, nil
}

// notTheHubs treats a pod with KubeSpawner's annotation that no Hub server
// runs in: the Hub is not asked to stop anything, and the pod itself is
// evicted only by the policy's fallback.
func (j *JupyterHub) notTheHubs(ctx context.Context, req *Request, pod podRef, note string) (string, error) {
	why := fmt.Sprintf("no JupyterHub server runs in pod %s (%s)", pod, note)
	if !j.FallbackEvict || j.Next == nil {
		return "", fmt.Errorf("%s: nothing stopped through the Hub, and the policy's kubernetes.jupyterhub_fallback is not evict: %w", why, ErrUnsupported)
	}
	d, err := j.Next.Act(ctx, req)
	if err != nil {
		return "", fmt.Errorf("%s; eviction as the policy's fallback: %w", why, err)
	}
	return why + "; the policy's fallback: " + d, nil
}

func (j *JupyterHub) next(ctx context.Context, req *Request) (string, error) {
	if j.Next == nil {
		return "", fmt.Errorf("jupyterhub %s of %s: %w", req.Step, req.Finding.Pattern, ErrUnsupported)
	}
	return j.Next.Act(ctx, req)
}

// stop asks the Hub to stop the server its record names.
func (j *JupyterHub) stop(ctx context.Context, srv hubServer) (string, error) {
	code, body, err := j.call(ctx, http.MethodDelete, srv.path(), "")
	if err != nil {
		return "", err
	}
	switch code {
	case http.StatusNoContent:
		return "stopped the " + srv.String() + " through JupyterHub", nil
	case http.StatusAccepted:
		return "JupyterHub is stopping the " + srv.String(), nil
	}
	return "", fmt.Errorf("stop %s: JupyterHub answered %d: %s", srv, code, excerpt(body))
}

// call sends one authenticated request (accept, if not empty, as its
// Accept header) and returns the status and the body, refused past
// maxHubBody.
func (j *JupyterHub) call(ctx context.Context, method, path, accept string) (int, string, error) {
	red := j.Secrets
	if red == nil {
		red = &secret.Redactor{}
	}
	token, err := secret.ReadWord(j.TokenFile, red)
	if err != nil {
		return 0, "", fmt.Errorf("JupyterHub token: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(j.URL, "/")+path, nil)
	if err != nil {
		return 0, "", fmt.Errorf("JupyterHub request: %w", err)
	}
	r.Header.Set("Authorization", "token "+token)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	what := method + " " + shownPath(path)
	resp, err := noRedirects(j.Client).Do(r)
	if err != nil {
		// url.Error repeats the whole URL, with a user name in it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, "", red.Error(fmt.Errorf("JupyterHub unreachable (%s): %w", what, err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHubBody+1))
	switch {
	case err != nil:
		return 0, "", red.Error(fmt.Errorf("JupyterHub %s: %w", what, err))
	case len(b) > maxHubBody:
		return 0, "", fmt.Errorf("JupyterHub's answer to %s is over %d bytes: not read", what, maxHubBody)
	case resp.StatusCode == http.StatusUnauthorized:
		return 0, "", fmt.Errorf("JupyterHub refused the token (401) for %s", what)
	case resp.StatusCode == http.StatusForbidden:
		return 0, "", fmt.Errorf("JupyterHub refused the token (403) for %s: it needs the scopes list:users, read:servers, %s and servers", what, scopeServerState)
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return 0, "", fmt.Errorf("JupyterHub answered %s with a redirect (%d): not followed (check --jupyterhub.url)", what, resp.StatusCode)
	}
	return resp.StatusCode, red.String(string(b)), nil
}

// shownPath is a request's path for errors: without its query, and cut
// (a user name in it is escaped, so ASCII).
func shownPath(p string) string {
	p, _, _ = strings.Cut(p, "?")
	if len(p) > 2*shownNameBytes {
		return p[:2*shownNameBytes] + "…"
	}
	return p
}

// noRedirects returns a copy of c (or of a default client with a 10 s
// timeout) that stops at the first redirect and hands it back.
func noRedirects(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	} else {
		cp.Timeout = 10 * time.Second
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// excerpt is a one-line, bounded piece of a Hub answer for the audit; the
// body was redacted by call.
func excerpt(b string) string {
	s := strings.Join(strings.Fields(b), " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return termsafe.String(s)
}

// Reconcile implements Reconciler: a stop took effect when the Hub's
// record of the pod says its server is stopped, or the pod is gone.
func (j *JupyterHub) Reconcile(ctx context.Context, req *Request) (Outcome, string, error) {
	if req.Step != StepReclaim || req.Finding.Pattern != schema.IdleSession {
		return j.nextReconcile(ctx, req, "no way to check")
	}
	pod, hint, err := j.hint(ctx, req)
	switch {
	case errors.Is(err, ErrGone):
		return Applied, "pod " + pod.String() + " is gone", nil
	case errors.Is(err, errNotHubPod):
		return j.nextReconcile(ctx, req, "not a JupyterHub pod")
	case err != nil:
		return 0, "", err
	}
	rec, _, err := j.record(ctx, pod, hint)
	switch {
	case errors.Is(err, errNoHubRecord) && j.FallbackEvict:
		return j.nextReconcile(ctx, req, "no JupyterHub server runs in pod "+pod.String())
	case errors.Is(err, errNoHubRecord):
		return NotApplied, "no JupyterHub server runs in pod " + pod.String() + ", and the pod is not evicted", nil
	case err != nil:
		return 0, "", err
	case rec.stopped:
		return Applied, "the " + rec.srv.String() + " is stopped", nil
	}
	return NotApplied, "the " + rec.srv.String() + " still runs", nil
}

func (j *JupyterHub) nextReconcile(ctx context.Context, req *Request, why string) (Outcome, string, error) {
	if r, ok := j.Next.(Reconciler); ok {
		return r.Reconcile(ctx, req)
	}
	return Unknowable, why, nil
}
